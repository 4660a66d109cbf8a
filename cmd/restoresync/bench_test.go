package main

// bench's checks that need no peer, in-process through run().

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/internal/testenv"
)

// bench run and bench report check --out and --chart before anything runs:
// a missing directory or a directory as --out exits 11, a chart name that
// is not .svg or .png exits 1, and nothing is timed or written.
func TestBenchOutputsCheckedFirst(t *testing.T) {
	src := smallTree(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "res.json")
	if err := os.WriteFile(in, []byte(`{"source":"x","rows":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"bench", "run", "--src", src, "--out", "/nonexistent-benchfix/x.md"}, exitFileIO, "--out /nonexistent-benchfix/x.md: cannot create a file in /nonexistent-benchfix: no such file or directory"},
		{[]string{"bench", "run", "--src", src, "--out", dir}, exitFileIO, "is a directory"},
		{[]string{"bench", "run", "--src", src, "--chart", "/nonexistent-benchfix/x.svg"}, exitFileIO, "--chart /nonexistent-benchfix/x.svg: cannot create"},
		{[]string{"bench", "run", "--src", src, "--chart", filepath.Join(dir, "x.jpg")}, exitUsage, `unknown chart type ".jpg" (valid: .svg, .png)`},
		{[]string{"bench", "report", "--in", in, "--chart", filepath.Join(dir, "a.png"), "--chart", filepath.Join(dir, "b.JPEG")}, exitUsage, `unknown chart type ".JPEG"`},
		{[]string{"bench", "report", "--in", in, "--out", "/nonexistent-benchfix/t.md"}, exitFileIO, "/nonexistent-benchfix"},
	} {
		r := runIn(t, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) || r.stdout != "" || strings.Contains(r.stderr, "run 1/") {
			t.Errorf("want exit %d, %q on stderr, nothing run, nothing on stdout:\n%s", c.code, c.want, r)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Errorf("files left in %s: %v, want only res.json", dir, left)
	}
}

// A source host that cannot be reached is fatal before any row: exit 255,
// ssh's reason, no table.
func TestBenchRunUnreachable(t *testing.T) {
	testenv.RequireTool(t, "ssh")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	r := runIn(t, "bench", "run", "--src", "ssh://root@127.0.0.1:"+strconv.Itoa(port)+"/srv/alice", "-F", "none", "--runs", "1", "--tmp", t.TempDir())
	if r.code != exitSSH || r.stdout != "" || !strings.Contains(r.stderr, "cannot reach 127.0.0.1") ||
		!strings.Contains(r.stderr, "Connection refused") || strings.Contains(r.stderr, "run 1/") {
		t.Errorf("want exit 255 up front, naming the host and ssh's reason:\n%s", r)
	}
}

// bench compare's "identical" line lists what it compared, xattrs, ACLs
// and sparseness included, and not what an --ignore flag left out.
func TestBenchCompareIdenticalSays(t *testing.T) {
	src := smallTree(t)
	r := mustRunIn(t, "bench", "compare", src, src)
	if !strings.Contains(r.stdout, "identical (content, kind, mode, owner, mtime, symlink targets, hardlink groups, xattrs, ACLs, sparseness)") {
		t.Errorf("compare output:\n%s", r)
	}
	r = mustRunIn(t, "bench", "compare", "--ignore-xattrs", "--ignore-sparse", "--ignore-owner", src, src)
	if !strings.Contains(r.stdout, "identical (content, kind, mode, mtime, symlink targets, hardlink groups)") {
		t.Errorf("compare --ignore-xattrs --ignore-sparse --ignore-owner output:\n%s", r)
	}
}
