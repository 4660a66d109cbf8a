package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/restoresync/restoresync/internal/testreport"
	"github.com/restoresync/restoresync/internal/testsshd"
)

// End-to-end tests of --method rsync: a real sshd, the real rsync as the
// remote sender, gokrazy/rsync as the receiver, and restoresync completing
// the tree (owners, nanosecond mtimes, hardlinks, symlinks, set-id bits).

// rsyncArgs are the client flags for srv: the built-in SSH client and,
// agent-less, --remote-path none (the remote's own rsync and find), or the
// agent (this binary on the far side).
func rsyncArgs(srv *testsshd.Server, agentless bool) []string {
	args := []string{"restore", "--json", "--method", "rsync"}
	args = append(args, sshdArgs(srv)...)
	if agentless {
		i := slices.Index(args, "--remote-path")
		args[i+1] = "none"
	}
	return args
}

// checkRsyncReport checks a fresh --method rsync restore's report.
func checkRsyncReport(t *testing.T, rep testreport.Report, src treeStats) {
	t.Helper()
	if rep.Method != "rsync" || rep.Compression != "none" || rep.Jobs != 1 {
		t.Errorf("report: method %q, compression %q, jobs %d; want rsync, none, 1", rep.Method, rep.Compression, rep.Jobs)
	}
	if rep.Files != src.files || rep.Dirs != src.dirs || rep.Symlinks != src.symlinks || rep.Hardlinks != src.hardlinks {
		t.Errorf("report: %d files, %d dirs, %d symlinks, %d hardlinks; the source has %d, %d, %d, %d",
			rep.Files, rep.Dirs, rep.Symlinks, rep.Hardlinks, src.files, src.dirs, src.symlinks, src.hardlinks)
	}
	if rep.Bytes != src.bytes || rep.Skipped != 0 {
		t.Errorf("report: bytes = %d, skipped = %d; want %d, 0", rep.Bytes, rep.Skipped, src.bytes)
	}
	if rep.WireBytes < src.bytes/2 {
		t.Errorf("report: wire_bytes = %d for %d bytes of incompressible-ish data", rep.WireBytes, src.bytes)
	}
	if len(rep.Errors) != 0 {
		t.Errorf("report: errors: %+v", rep.Errors)
	}
}

// Agent-less pull: the remote has only rsync and find (--remote-path none).
func TestE2ERsyncPullAgentless(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := account.get(t)
	srv := testsshd.Start(t)
	dst := filepath.Join(t.TempDir(), "restored", "alice")

	r := mustRun(t, append(rsyncArgs(srv, true), sshdURL(srv, src), dst)...)
	checkRsyncReport(t, parseReport(t, r), statTree(t, src))
	assertSameTree(t, src, dst)
	assertNoTempFiles(t, dst)
}

// Pull through the agent: its rsync-sender role runs the system rsync.
func TestE2ERsyncPullAgent(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := account.get(t)
	srv := testsshd.Start(t)
	dst := filepath.Join(t.TempDir(), "alice")

	r := mustRun(t, append(rsyncArgs(srv, false), sshdURL(srv, src), dst)...)
	checkRsyncReport(t, parseReport(t, r), statTree(t, src))
	assertSameTree(t, src, dst)
	assertNoTempFiles(t, dst)
}

// Delta: restore, change about 1% of the files (appends, and bytes edited
// in the middle of the largest file, same size), restore again: only the
// changed blocks cross the wire, and the tree compares equal.
func TestE2ERsyncDelta(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := filepath.Join(t.TempDir(), "carol")
	mustRun(t, "bench", "gen", "--profile", "hosting", "--scale", "0.03", "--seed", "11", "--owners", src)
	srv := testsshd.Start(t)
	dst := filepath.Join(t.TempDir(), "carol")

	for _, agentless := range []bool{true, false} {
		name := map[bool]string{true: "agentless", false: "agent"}[agentless]
		t.Run(name, func(t *testing.T) {
			args := append(rsyncArgs(srv, agentless), sshdURL(srv, src), dst)
			mustRun(t, args...)
			changeOnePercent(t, src)
			st := statTree(t, src)
			rep := parseReport(t, mustRun(t, args...))
			if len(rep.Errors) != 0 {
				t.Errorf("delta run: errors: %+v", rep.Errors)
			}
			if limit := st.bytes / 20; rep.WireBytes >= limit {
				t.Errorf("delta run: wire_bytes = %d, want under 5%% of the tree's %d bytes (%d)", rep.WireBytes, st.bytes, limit)
			}
			if rep.Files == 0 || rep.Files > st.files/20 || rep.Skipped < st.files-st.files/20 {
				t.Errorf("delta run: %d files sent, %d up to date, of %d", rep.Files, rep.Skipped, st.files)
			}
			t.Logf("delta run: %d files, %d bytes payload, %d wire bytes (tree: %d files, %d bytes)", rep.Files, rep.Bytes, rep.WireBytes, st.files, st.bytes)
			assertSameTree(t, src, dst)
			assertNoTempFiles(t, dst)
		})
	}
}

// changeOnePercent appends to about 1% of the regular files (hardlinked
// ones excepted) and rewrites 100 bytes in the middle of the largest file,
// keeping its size.
func changeOnePercent(t *testing.T, root string) {
	t.Helper()
	var files []string
	var largest string
	var largestSize int64
	walkRel(t, root, func(rel string, d os.DirEntry) {
		fi, err := d.Info()
		if err != nil || !fi.Mode().IsRegular() || strings.Contains(rel, "/.") {
			return
		}
		if fi.Sys().(*syscall.Stat_t).Nlink > 1 {
			return
		}
		files = append(files, rel)
		if fi.Size() > largestSize {
			largest, largestSize = rel, fi.Size()
		}
	})
	n := 0
	for i, rel := range files {
		if i%100 != 7 || rel == largest {
			continue
		}
		f, err := os.OpenFile(filepath.Join(root, rel), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString("appended by the delta test\n"); err != nil {
			t.Fatal(err)
		}
		f.Close()
		n++
	}
	f, err := os.OpenFile(filepath.Join(root, largest), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(strings.Repeat("X", 100)), largestSize/2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if n == 0 || largestSize < 1<<20 {
		t.Fatalf("changed %d files and a largest file of %d bytes: the tree is too small for the test", n, largestSize)
	}
}
