package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/internal/testsshd"
)

// The rsync method treats one entry it cannot restore as one error, as the
// raw and tar methods do: each case below restores the rest of the tree,
// names each entry it could not restore in the report and exits 23,
// through the agent and agent-less (the remote's own rsync and find).

// entriesCase is a source tree with entries the rsync method cannot
// restore as they are, and what DST holds before the restore.
type entriesCase struct {
	name string
	// make writes the source tree into src and DST's prior contents into
	// dst (which does not exist yet), and returns the entries (relative
	// paths) that must be reported, not restored.
	make func(t *testing.T, src, dst string) []string
	// agentRestores says that through the agent the entries are restored
	// all the same (the safe writer writes them, from the agent's raw
	// sender): exit 0 and no errors.
	agentRestores bool
}

// longName is a name of 255 bytes (85 × "€"), the longest a Linux file
// system takes; gokrazy/rsync's temporary name for it would be longer.
// otherLongName is another of 255 bytes.
var (
	longName      = strings.Repeat("€", 85)
	otherLongName = "ab" + strings.Repeat("€", 84) + "c"
)

var entriesCases = []entriesCase{
	{"type-change", func(t *testing.T, src, dst string) []string {
		writeFiles(t, src, map[string]string{"config.php": "<?php // new\n", "index.php": "<?php\n", "data/a.txt": "a\n"})
		if err := os.Symlink("index.php", filepath.Join(src, "link")); err != nil {
			t.Fatal(err)
		}
		// DST has a non-empty directory where the snapshot has a file and
		// where it has a symlink: kept, as rsync keeps them without --force.
		writeFiles(t, dst, map[string]string{"config.php/keep.txt": "keep\n", "link/keep.txt": "keep\n", "old.txt": "old\n"})
		return []string{"config.php", "link"}
	}, false},
	{"two-255-byte-names", func(t *testing.T, src, dst string) []string {
		writeFiles(t, src, map[string]string{
			"index.php":             "<?php\n",
			"long/" + longName:      "one\n",
			"long/" + otherLongName: "two\n",
			"long/short.txt":        "short\n",
			"zz/after.txt":          "after\n",
		})
		return []string{"long/" + longName, "long/" + otherLongName}
	}, true},
	{"8000-255-byte-names", func(t *testing.T, src, dst string) []string {
		writeFiles(t, src, map[string]string{"index.php": "<?php\n", "zz/after.txt": "after\n"})
		dir := filepath.Join(src, "many")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var bad []string
		for i := range 8000 {
			name := fmt.Sprintf("%05d", i) + strings.Repeat("€", 83) + "x" // 255 bytes
			if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			bad = append(bad, "many/"+name)
		}
		return bad
	}, true},
	{"path-over-4096-bytes", func(t *testing.T, src, dst string) []string {
		writeFiles(t, src, map[string]string{"index.php": "<?php\n", "zz/after.txt": "after\n"})
		// deep/ then 16 directories of 250 bytes: the file below them has
		// a path of 4,097 bytes, one more than rsync's MAXPATHLEN allows.
		rel := "deep"
		fd, err := unix.Open(src, unix.O_DIRECTORY|unix.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		comps := []string{"deep"}
		for range 16 {
			comps = append(comps, strings.Repeat("d", 250))
		}
		for _, c := range comps {
			if err := unix.Mkdirat(fd, c, 0o755); err != nil {
				t.Fatal(err)
			}
			nfd, err := unix.Openat(fd, c, unix.O_DIRECTORY|unix.O_RDONLY, 0)
			unix.Close(fd)
			if err != nil {
				t.Fatal(err)
			}
			fd = nfd
			if c != "deep" {
				rel += "/" + c
			}
		}
		name := strings.Repeat("f", 4097-len(rel)-1)
		ffd, err := unix.Openat(fd, name, unix.O_CREAT|unix.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		unix.Write(ffd, []byte("deep\n"))
		unix.Close(ffd)
		unix.Close(fd)
		if n := len(rel + "/" + name); n != 4097 {
			t.Fatalf("path of %d bytes", n)
		}
		return []string{rel + "/" + name}
	}, false},
}

func TestE2ERsyncEntryErrors(t *testing.T) {
	e2e(t)
	t.Parallel()
	srv := testsshd.Start(t)
	for _, c := range entriesCases {
		for _, agentless := range []bool{false, true} {
			name := c.name + map[bool]string{true: "/agentless", false: "/agent"}[agentless]
			t.Run(name, func(t *testing.T) {
				src := filepath.Join(t.TempDir(), "src")
				dst := filepath.Join(t.TempDir(), "dst")
				bad := c.make(t, src, dst)
				r := runBinWithin(t, 5*time.Minute, append(rsyncArgs(srv, agentless), sshdURL(srv, src), dst)...)
				if c.agentRestores && !agentless {
					if r.code != 0 {
						t.Fatalf("want exit 0, the long names written by the safe writer:\n%.3000s", r.String())
					}
					checkEntryErrors(t, r, src, dst, nil)
					return
				}
				checkEntryErrors(t, r, src, dst, bad)
			})
		}
	}
}

// checkEntryErrors checks that r exited 23 naming exactly the entries bad
// in its report's errors, and that everything else of src is in dst.
func checkEntryErrors(t *testing.T, r result, src, dst string, bad []string) {
	t.Helper()
	if want := map[bool]int{true: 23, false: 0}[len(bad) > 0]; r.code != want {
		t.Fatalf("exit %d, want %d:\n%.3000s", r.code, want, r.String())
	}
	rep := parseReport(t, r)
	var got []string
	for _, e := range rep.Errors {
		got = append(got, e.Path)
	}
	slices.Sort(got)
	want := slices.Clone(bad)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		if len(got) > 5 {
			got = append(got[:5], fmt.Sprintf("... %d in all", len(got)))
		}
		t.Errorf("report errors on %q; want %d: %.300q", got, len(want), want)
	}
	if len(rep.Errors) > 0 {
		t.Logf("first error: %s: %s", rep.Errors[0].Path, rep.Errors[0].Error)
	}
	// Everything else is restored: the regular files of src not under a
	// bad entry have their bytes in dst.
	badSet := map[string]bool{}
	for _, b := range bad {
		badSet[b] = true
	}
	// (deep/ holds paths too long to walk by name.)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "deep" {
			return filepath.SkipDir
		}
		if badSet[rel] || !d.Type().IsRegular() {
			return nil
		}
		want, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if got, err := os.ReadFile(filepath.Join(dst, rel)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: not restored (%v)", rel, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	assertNoTempFiles(t, dst)
}

// writeFiles writes files (relative path → contents) beneath root, making
// directories as needed.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, data := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Agent-less auto picks rsync for a DST that holds files, and the type
// change is one error there too.
func TestE2EAutoAgentlessTypeChange(t *testing.T) {
	e2e(t)
	t.Parallel()
	srv := testsshd.Start(t)
	src := filepath.Join(t.TempDir(), "src")
	dst := filepath.Join(t.TempDir(), "dst")
	bad := entriesCases[0].make(t, src, dst)
	args := rsyncArgs(srv, true)
	args[slices.Index(args, "rsync")] = "auto"
	r := runBin(t, append(args, sshdURL(srv, src), dst)...)
	checkEntryErrors(t, r, src, dst, bad)
	if rep := parseReport(t, r); rep.Method != "rsync" {
		t.Errorf("auto picked %q (%s), want rsync for a DST that holds files", rep.Method, rep.MethodReason)
	}
}

// With --force the directories in the way are replaced, as rsync's --force
// replaces them: the file and the symlink are restored and nothing fails.
func TestE2ERsyncTypeChangeForce(t *testing.T) {
	e2e(t)
	t.Parallel()
	srv := testsshd.Start(t)
	for _, agentless := range []bool{false, true} {
		t.Run(map[bool]string{true: "agentless", false: "agent"}[agentless], func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "src")
			dst := filepath.Join(t.TempDir(), "dst")
			entriesCases[0].make(t, src, dst)
			r := runBin(t, append(rsyncArgs(srv, agentless), "--force", sshdURL(srv, src), dst)...)
			if r.code != 0 {
				t.Fatalf("want exit 0:\n%s", r)
			}
			if got, err := os.ReadFile(filepath.Join(dst, "config.php")); err != nil || string(got) != "<?php // new\n" {
				t.Errorf("config.php: %q, %v", got, err)
			}
			if target, err := os.Readlink(filepath.Join(dst, "link")); err != nil || target != "index.php" {
				t.Errorf("link: %q, %v", target, err)
			}
		})
	}
}

// runBinWithin is runBin for a run that may take up to d (8,000 files with
// exclude rules on a loaded machine), past runBin's cmdTimeout.
func runBinWithin(t *testing.T, d time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	cmd := commandContext(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("restoresync %s: still running after %v, killed", strings.Join(args, " "), d)
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("restoresync %s: %v", strings.Join(args, " "), err)
	}
	return r
}
