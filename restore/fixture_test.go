package restore_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/treewalk"
)

// A declarative tree fixture shaped like a hosting account: each value is a
// TestFile, TestDir, TestSymlink, TestHardlink or TestFifo.
type (
	TestFile struct {
		Content string
		Mode    os.FileMode // permission bits plus os.ModeSetuid etc.; 0 means 0644
		Uid     int         // -1 or 0 means leave (root's)
		Size    int64       // when > 0, a sparse-free file of this size with patterned content
	}
	TestDir     map[string]any
	TestSymlink struct{ Target string }
	// TestHardlink links to another path of the fixture (relative to its root).
	TestHardlink struct{ To string }
	TestFifo     struct{}
)

// dirModes records directory modes to set after the tree is filled.
type fixtureDirMode struct {
	path string
	mode os.FileMode
}

// TestDirMode wraps a TestDir with a mode for that directory.
type TestDirMode struct {
	Mode os.FileMode
	Dir  TestDir
}

var fixtureTime = time.Date(2024, 5, 17, 10, 30, 15, 123456789, time.UTC)

// build writes the fixture under root. Hardlinks are made after files;
// times are set to distinct nanosecond values; directory modes and times
// last, deepest first.
func (d TestDir) build(t testing.TB, root string) {
	t.Helper()
	var links [][2]string
	var dirs []fixtureDirMode
	var all []string
	var walk func(dir string, td TestDir)
	walk = func(dir string, td TestDir) {
		names := make([]string, 0, len(td))
		for n := range td {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, name := range names {
			p := filepath.Join(dir, name)
			switch v := td[name].(type) {
			case TestFile:
				data := []byte(v.Content)
				if v.Size > 0 {
					data = patterned(v.Size)
				}
				mode := v.Mode
				if mode == 0 {
					mode = 0o644
				}
				must(t, os.WriteFile(p, data, 0o600))
				if v.Uid > 0 {
					must(t, os.Lchown(p, v.Uid, v.Uid))
				}
				must(t, os.Chmod(p, mode))
				all = append(all, p)
			case TestDir:
				must(t, os.Mkdir(p, 0o755))
				walk(p, v)
				dirs = append(dirs, fixtureDirMode{p, 0o755})
			case TestDirMode:
				must(t, os.Mkdir(p, 0o755))
				walk(p, v.Dir)
				dirs = append(dirs, fixtureDirMode{p, v.Mode})
			case TestSymlink:
				must(t, os.Symlink(v.Target, p))
				all = append(all, p)
			case TestHardlink:
				links = append(links, [2]string{filepath.Join(root, v.To), p})
			case TestFifo:
				must(t, syscall.Mkfifo(p, 0o640))
				all = append(all, p)
			default:
				t.Fatalf("fixture %s: unknown type %T", p, v)
			}
		}
	}
	must(t, os.MkdirAll(root, 0o755))
	walk(root, d)
	for _, l := range links {
		must(t, os.Link(l[0], l[1]))
	}
	for i, p := range all {
		ts := fixtureTime.Add(time.Duration(i) * 1_000_001_001)
		must(t, lutimes(p, ts))
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		must(t, os.Chmod(dirs[i].path, dirs[i].mode))
		must(t, os.Chtimes(dirs[i].path, fixtureTime, fixtureTime.Add(time.Duration(i)*time.Hour+7)))
	}
	must(t, os.Chtimes(root, fixtureTime, fixtureTime.Add(-time.Hour)))
}

func lutimes(p string, ts time.Time) error {
	tv := []syscall.Timespec{syscall.NsecToTimespec(ts.UnixNano()), syscall.NsecToTimespec(ts.UnixNano())}
	return utimesNanoAtNoFollow(p, tv)
}

func patterned(n int64) []byte {
	b := make([]byte, n)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// accountFixture is a small hosting account with every kind of entry the
// safe writer must get right.
func accountFixture() TestDir {
	long := strings.Repeat("n", 255)
	return TestDir{
		"public_html": TestDir{
			"index.php":     TestFile{Content: "<?php require __DIR__.'/wp-blog-header.php';\n"},
			"wp-config.php": TestFile{Content: "<?php define('DB_PASSWORD', 'x');\n", Mode: 0o600},
			"wp-cron.sh":    TestFile{Content: "#!/bin/sh\nphp wp-cron.php\n", Mode: 0o755},
			"empty.txt":     TestFile{},
			"setuid-tool":   TestFile{Content: "suid", Mode: 0o755 | os.ModeSetuid},
			"setgid-tool":   TestFile{Content: "sgid", Mode: 0o755 | os.ModeSetgid},
			"no-perms":      TestFile{Content: "locked", Mode: 0o000},
			"current":       TestSymlink{Target: "releases/2"},
			"abs-link":      TestSymlink{Target: "/etc/hostname"},
			"dangling":      TestSymlink{Target: "does/not/exist"},
			"releases":      TestDir{"2": TestDir{"app.js": TestFile{Content: "console.log(1)\n"}}, "1": TestDir{}},
			"uploads": TestDir{
				"2024": TestDir{"05": TestDir{
					"photo one.jpg": TestFile{Size: 300 << 10},
					"big.mp4":       TestFile{Size: 5<<20 + 12345},
				}},
			},
			"copy-of-index.php": TestHardlink{To: "public_html/index.php"},
			"cache":             TestDirMode{Mode: 0o700, Dir: TestDir{}},
			"-leading-dash":     TestFile{Content: "dash"},
			"new\nline":         TestFile{Content: "newline in name"},
			"bad\xffutf8":       TestFile{Content: "invalid utf-8 name"},
			long:                TestFile{Content: "255-byte name"},
		},
		"mail": TestDir{"example.com": TestDir{"info": TestDir{
			"cur": TestDir{"1700000000.M1P2.host:2,S": TestFile{Content: "From: a@b\n\nhi\n", Mode: 0o600}},
			"new": TestDir{}, "tmp": TestDir{},
		}}},
		"sticky": TestDirMode{Mode: 0o777 | os.ModeSticky, Dir: TestDir{"f": TestFile{Content: "x"}}},
		"locked": TestDirMode{Mode: 0o500, Dir: TestDir{"inside": TestFile{Content: "must still be written"}}},
		"fifo":   TestFifo{},
		"logs":   TestDir{"access.log": TestFile{Content: strings.Repeat("127.0.0.1 - - [17/May/2024] \"GET / HTTP/1.1\" 200 512\n", 2000)}},
		"backups": TestDir{
			"db.sql":      TestFile{Content: strings.Repeat("INSERT INTO wp_posts VALUES (1,'hello world');\n", 5000)},
			"db-link.sql": TestHardlink{To: "backups/db.sql"},
		},
	}
}

// assertSameTree fails the test unless dst equals src file by file
// (content, kind, mode, owner, mtime to the nanosecond, symlink targets,
// hardlink groups), by our comparison and by the real rsync's.
func assertSameTree(t testing.TB, src, dst string) {
	t.Helper()
	diffs, err := treewalk.Compare(context.Background(), src, dst, treewalk.CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range diffs {
		if i == 20 {
			t.Errorf("... and %d more differences", len(diffs)-20)
			break
		}
		t.Errorf("difference: %s", d)
	}
	rsyncSame(t, src, dst)
}

// rsyncSame asks the real rsync, in dry-run itemize mode with checksums, for
// what it would change to make dst equal src: nothing, if the restore was
// exact.
func rsyncSame(t testing.TB, src, dst string) {
	t.Helper()
	testenv.RequireTool(t, "rsync")
	out, err := exec.Command("rsync", "-aHni", "--checksum", "--specials", "--devices", "--delete", src+"/", dst+"/").CombinedOutput()
	if err != nil {
		t.Fatalf("rsync -aHni: %v\n%s", err, out)
	}
	if out = bytes.TrimSpace(out); len(out) > 0 {
		lines := strings.Split(string(out), "\n")
		if len(lines) > 20 {
			lines = append(lines[:20], "...")
		}
		t.Errorf("rsync sees differences between %s and %s:\n%s", src, dst, strings.Join(lines, "\n"))
	}
}

func execOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	return string(out), err
}
