package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testenv"
)

// rsyncDryRun runs the real rsync -aHAXni from src to dst with the
// locale loc and returns its itemized lines, sorted, and its exit status.
func rsyncDryRun(t *testing.T, loc, src, dst string, flags ...string) ([]string, int) {
	t.Helper()
	testenv.RequireTool(t, "rsync")
	cmd := exec.Command("rsync", append(append([]string{"-aHAXni"}, flags...), src+"/", dst+"/")...)
	cmd.Env = append(os.Environ(), "LC_ALL="+loc)
	out, err := cmd.Output()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		if len(l) >= 12 && l[11] == ' ' || strings.HasPrefix(l, "*deleting") {
			lines = append(lines, l) // not "created directory D"
		}
	}
	slices.Sort(lines)
	return lines, code
}

// changeLines returns the itemized lines restore -n printed (the
// summary, its last line, dropped), sorted.
func changeLines(r result) []string {
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	lines = lines[:len(lines)-1]
	slices.Sort(lines)
	return lines
}

// restore -n prints the lines the real rsync -aHAXni prints, byte for
// byte, for names that hold a newline (one that would forge a
// "*deleting" line), control bytes and invalid UTF-8, in a UTF-8 locale
// and in the C locale; file errors are escaped likewise, and --json
// keeps the exact names.
func TestItemizedNamesPrintedAsRsync(t *testing.T) {
	src := filepath.Join(t.TempDir(), "S")
	for _, n := range []string{"evil\n*deleting   precious", "new\nline", "inv\xffx", "utf\xc3\xa9x", "esc\x1b[2Jx"} {
		p := filepath.Join(src, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mt := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	os.Chtimes(src, mt, mt)
	dst := filepath.Join(t.TempDir(), "D")
	for _, loc := range []string{"C.UTF-8", "C"} {
		t.Setenv("LC_ALL", loc)
		want, _ := rsyncDryRun(t, loc, src, dst)
		r := mustRunIn(t, "restore", "-n", src+"/", dst+"/")
		if got := changeLines(r); !slices.Equal(got, want) {
			t.Errorf("LC_ALL=%s: restore -n printed\n  %q\nrsync -aHAXni:\n  %q", loc, got, want)
		}
	}
	r := mustRunIn(t, "restore", "-n", "--json", src+"/", dst+"/")
	var rep struct {
		Changes []string `json:"changes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.Changes, ">f+++++++++ evil\n*deleting   precious") {
		t.Errorf("--json changes do not keep the exact name: %q", rep.Changes)
	}
}

// Without --force, a dry run where a non-empty directory is in the way
// of a file fails as rsync -n does: exit 23, no line for the file, the
// error on stderr; with --force it lists the directory's contents as
// deletions and exits 0, as rsync -n --force.
func TestDryRunDirectoryInTheWayExitsAsRsync(t *testing.T) {
	src := filepath.Join(t.TempDir(), "S")
	dst := filepath.Join(t.TempDir(), "D")
	for p, dir := range map[string]string{filepath.Join(src, "nolf"): src, filepath.Join(dst, "nolf/deep/f"): dst} {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		mt := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
		os.Chtimes(dir, mt, mt)
	}
	t.Setenv("LC_ALL", "C.UTF-8")
	for _, force := range []bool{false, true} {
		var flags []string
		if force {
			flags = []string{"--force"}
		}
		want, wantCode := rsyncDryRun(t, "C.UTF-8", src, dst, flags...)
		r := runIn(t, append(append([]string{"restore", "-n"}, flags...), src+"/", dst+"/")...)
		if got := changeLines(r); !slices.Equal(got, want) || r.code != wantCode {
			t.Errorf("force=%v: exit %d, printed\n  %q\nrsync -aHAXni: exit %d\n  %q\n%s", force, r.code, got, wantCode, want, r)
		}
		if !force && !strings.Contains(r.stderr, "nolf: a non-empty directory is in the way") {
			t.Errorf("the error does not name the entry:\n%s", r)
		}
	}
}
