package restore

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/treewalk"
)

// The agent-less listing (GNU find's output, parsed) says what treewalk
// says of the same tree, hardlink leaders aside (find's order is not ours).
func TestFindListMatchesWalk(t *testing.T) {
	testenv.RequireTool(t, "find") // GNU find
	root := filepath.Join(t.TempDir(), "it's a \"tree\"")
	write := func(rel, data string, mode os.FileMode) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("public_html/index.php", "<?php\n", 0o644)
	write("public_html/setuid", "x", 0o755|os.ModeSetuid)
	write("public_html/setgid", "y", 0o2750|os.ModeSetgid)
	write("new\nline", "z", 0o600)
	write("bad\xffutf8", "", 0o644)
	write("-dash", strings.Repeat("d", 70000), 0o644)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Link(filepath.Join(root, "public_html/index.php"), filepath.Join(root, "copy.php")))
	must(os.Symlink("../etc/passwd\nx", filepath.Join(root, "public_html/link")))
	must(syscall.Mkfifo(filepath.Join(root, "fifo"), 0o640))
	must(os.Mkdir(filepath.Join(root, "empty"), 0o1777))
	must(os.Chmod(filepath.Join(root, "empty"), 0o1777))
	must(os.Chtimes(filepath.Join(root, "-dash"), time.Time{}, time.Unix(-2, 250_000_000)))
	must(os.Chtimes(filepath.Join(root, "copy.php"), time.Time{}, time.Unix(1700000000, 123456789)))
	must(os.WriteFile(filepath.Join(root, "sparse.img"), nil, 0o600))
	must(os.Truncate(filepath.Join(root, "sparse.img"), 1<<30))

	out, err := exec.Command("sh", "-c", findListCommand(root)).Output()
	if err != nil {
		t.Fatalf("find: %v", err)
	}
	got, err := parseFindList(strings.NewReader(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	want, err := treewalk.Walk(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Errors) != 0 {
		t.Errorf("errors: %v", got.Errors)
	}
	byPath := map[string]treewalk.Entry{}
	gotLinks := 0
	for _, e := range got.Entries {
		if e.IsHardlink() {
			gotLinks++
		}
		e.LinkTo = ""
		byPath[e.Path] = e
	}
	wantLinks := 0
	for _, w := range want.Entries {
		if w.IsHardlink() {
			wantLinks++
		}
		w.LinkTo = ""
		w.Xattrs, w.ACL, w.DefaultACL = nil, nil, nil // find does not list them
		if g, ok := byPath[w.Path]; !ok {
			t.Errorf("%q: missing from the find listing", w.Path)
		} else if !reflect.DeepEqual(g, w) {
			t.Errorf("%q:\n find %+v\n walk %+v", w.Path, g, w)
		}
		delete(byPath, w.Path)
	}
	for p := range byPath {
		t.Errorf("%q: only in the find listing", p)
	}
	if gotLinks != 1 || wantLinks != 1 {
		t.Errorf("hardlink followers: find %d, walk %d; want 1", gotLinks, wantLinks)
	}
}

// Malformed or hostile output is an error, never an entry that escapes.
func TestParseFindListRejects(t *testing.T) {
	rec := func(fields ...string) string { return strings.Join(fields, "\x00") + "\x00" }
	root := rec("d", "755", "0", "0", "root", "root", "4096", "1.0000000000", "1", "2", "2", "", "", "8")
	file := func(path string) string {
		return rec("f", "644", "0", "0", "root", "root", "3", "1.5", "1", "3", "1", path, "", "8")
	}
	for name, in := range map[string]string{
		"empty":           "",
		"dotdot":          root + file("../etc/passwd"),
		"absolute":        root + file("/etc/passwd"),
		"unclean":         root + file("a//b"),
		"no root":         file("a"),
		"second root":     root + root,
		"truncated":       root + "f\x00644\x00",
		"bad mode":        root + rec("f", "99999", "0", "0", "r", "r", "3", "1.5", "1", "3", "1", "a", "", "8"),
		"bad time":        root + rec("f", "644", "0", "0", "r", "r", "3", "1.5e9", "1", "3", "1", "a", "", "8"),
		"negative size":   root + rec("f", "644", "0", "0", "r", "r", "-3", "1.5", "1", "3", "1", "a", "", "8"),
		"unknown type":    root + rec("D", "644", "0", "0", "r", "r", "3", "1.5", "1", "3", "1", "a", "", "8"),
		"huge field":      root + strings.Repeat("x", maxFindField+10),
		"empty symlink":   root + rec("l", "777", "0", "0", "r", "r", "3", "1.5", "1", "3", "1", "a", "", "8"),
		"not find at all": "bash: find: command not found\n",
		"a name twice":    root + file("a") + file("a"),
		"beneath a file":  root + file("a") + file("a/b"),
	} {
		if l, err := parseFindList(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error; entries %+v", name, l.Entries)
		}
	}
	l, err := parseFindList(strings.NewReader(root + file("a") + rec("c", "600", "0", "0", "r", "r", "0", "1.5", "1", "4", "1", "dev", "", "8")))
	if err != nil || len(l.Entries) != 2 || len(l.Errors) != 1 {
		t.Errorf("device node: %+v, %v; want 2 entries and 1 per-entry error", l, err)
	}
	if _, err := parseFindList(strings.NewReader(root + file("../x"))); !errors.Is(err, errFindOutput) || !errors.Is(err, treewalk.ErrBadPath) {
		t.Errorf("bad path: %v, want errFindOutput and ErrBadPath", err)
	}
}

func FuzzParseFindList(f *testing.F) {
	f.Add("d\x00755\x000\x000\x00root\x00root\x004096\x001.0\x001\x002\x002\x00\x00\x008\x00f\x00644\x000\x000\x00r\x00r\x003\x001.5\x001\x003\x002\x00a\x00\x008\x00")
	f.Fuzz(func(t *testing.T, in string) {
		l, err := parseFindList(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, e := range l.Entries {
			if err := treewalk.ValidPath(e.Path); err != nil {
				t.Fatalf("entry %q passed: %v", e.Path, err)
			}
		}
	})
}
