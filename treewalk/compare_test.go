package treewalk

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cmpFixture is one entry of a test tree, shaped like a small hosting
// account. kind is 'f' (file), 'd' (dir), 'l' (symlink to target) or 'h'
// (hardlink to the file at target).
type cmpFixture struct {
	path   string
	kind   byte
	mode   uint32
	data   string
	target string
	mtime  int64 // nanoseconds after cmpBase
}

var cmpBase = time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC).UnixNano()

func cmpFixtures() []cmpFixture {
	return []cmpFixture{
		{path: "wp-config.php", kind: 'f', mode: 0o600, data: "<?php define( 'DB_PASSWORD', 'x' );\n", mtime: 1},
		{path: "empty", kind: 'f', mode: 0o644, mtime: 2},
		{path: "public_html", kind: 'd', mode: 0o750, mtime: 3},
		{path: "public_html/a.txt", kind: 'f', mode: 0o644, data: "hello world\n", mtime: 4},
		{path: "public_html/b.txt", kind: 'h', target: "public_html/a.txt"},
		{path: "public_html/c.txt", kind: 'f', mode: 0o644, data: "hello world\n", mtime: 4},
		{path: "public_html/current", kind: 'l', target: "releases/2", mtime: 5},
		{path: "public_html/releases", kind: 'd', mode: 0o755, mtime: 6},
		{path: "public_html/releases/2", kind: 'd', mode: 0o711, mtime: 7},
		{path: "public_html/releases/2/index.php", kind: 'f', mode: 0o644, data: "<?php echo 2;\n", mtime: 8},
		{path: "public_html/Menu café.pdf", kind: 'f', mode: 0o644, data: "%PDF-1.7\n", mtime: 9},
		{path: "cgi-bin", kind: 'd', mode: 0o755, mtime: 10},
		{path: "cgi-bin/wrapper", kind: 'f', mode: 0o4755, data: "#!/bin/sh\n", mtime: 11},
		{path: "uploads", kind: 'd', mode: 0o2775, mtime: 12},
		{path: "tmp", kind: 'd', mode: 0o1777, mtime: 13},
	}
}

// cmpBuild creates the fixtures under dir (created here) and sets modes and
// times, deepest entries first and the root last.
func cmpBuild(t *testing.T, dir string, fx []cmpFixture) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	full := func(p string) string { return filepath.Join(dir, filepath.FromSlash(p)) }
	for _, f := range fx {
		var err error
		switch f.kind {
		case 'd':
			err = os.Mkdir(full(f.path), 0o700)
		case 'f':
			err = os.WriteFile(full(f.path), []byte(f.data), 0o600)
		case 'l':
			err = os.Symlink(f.target, full(f.path))
		case 'h':
			err = os.Link(full(f.target), full(f.path))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	byDepth := slices.Clone(fx)
	slices.SortStableFunc(byDepth, func(x, y cmpFixture) int {
		return strings.Count(y.path, "/") - strings.Count(x.path, "/")
	})
	for _, f := range byDepth {
		if f.kind == 'h' {
			continue
		}
		if f.kind != 'l' {
			if err := unix.Chmod(full(f.path), f.mode); err != nil {
				t.Fatal(err)
			}
		}
		cmpSetTime(t, full(f.path), cmpBase+f.mtime)
	}
	if err := unix.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmpSetTime(t, dir, cmpBase)
}

// cmpSetTime sets the mtime of name itself, not following a symlink.
func cmpSetTime(t *testing.T, name string, ns int64) {
	t.Helper()
	ts := unix.NsecToTimespec(ns)
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, name, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
}

// cmpEdit returns fx with the entry at p changed by fn, or removed when fn
// is nil.
func cmpEdit(fx []cmpFixture, p string, fn func(*cmpFixture)) []cmpFixture {
	out := fx[:0:0]
	for _, f := range fx {
		if strings.HasPrefix(f.path+"/", p+"/") && fn == nil {
			continue
		}
		if f.path == p {
			fn(&f)
		}
		out = append(out, f)
	}
	return out
}

func TestCompareDetectsEachDifference(t *testing.T) {
	same := cmpFixtures()
	for _, tc := range []struct {
		name string
		b    []cmpFixture
		post func(t *testing.T, b string) // runs on tree b after it is built
		opts CompareOptions
		want []string // Difference.String(), or "PATH: WHAT" when values vary
	}{
		{name: "identical", b: same},
		{
			name: "content same size same mtime",
			b:    cmpEdit(same, "public_html/c.txt", func(f *cmpFixture) { f.data = "hello wyrld\n" }),
			want: []string{"public_html/c.txt: content"},
		},
		{
			name: "size",
			b:    cmpEdit(same, "wp-config.php", func(f *cmpFixture) { f.data += "\n" }),
			want: []string{"wp-config.php: size 36 != 37"},
		},
		{
			name: "mode",
			b:    cmpEdit(same, "wp-config.php", func(f *cmpFixture) { f.mode = 0o644 }),
			want: []string{"wp-config.php: mode 0600 != 0644"},
		},
		{
			name: "setuid lost",
			b:    cmpEdit(same, "cgi-bin/wrapper", func(f *cmpFixture) { f.mode = 0o755 }),
			want: []string{"cgi-bin/wrapper: mode 4755 != 0755"},
		},
		{
			name: "setgid and sticky dirs",
			b: cmpEdit(cmpEdit(same, "uploads", func(f *cmpFixture) { f.mode = 0o775 }),
				"tmp", func(f *cmpFixture) { f.mode = 0o777 }),
			want: []string{"tmp: mode 1777 != 0777", "uploads: mode 2775 != 0775"},
		},
		{
			name: "file mtime by 1 ns",
			b:    cmpEdit(same, "public_html/a.txt", func(f *cmpFixture) { f.mtime++ }),
			want: []string{
				"public_html/a.txt: mtime 2024-05-06T07:08:09.123456793Z != 2024-05-06T07:08:09.123456794Z",
				"public_html/b.txt: mtime", // the same inode, reported under each name
			},
		},
		{
			name: "symlink mtime by 1 ns",
			b:    cmpEdit(same, "public_html/current", func(f *cmpFixture) { f.mtime++ }),
			want: []string{"public_html/current: mtime"},
		},
		{
			name: "dir mtime by 1 ns",
			b:    cmpEdit(same, "public_html/releases", func(f *cmpFixture) { f.mtime++ }),
			want: []string{"public_html/releases: mtime"},
		},
		{
			name: "dir mtime ignored",
			b:    cmpEdit(same, "public_html/releases", func(f *cmpFixture) { f.mtime++ }),
			opts: CompareOptions{IgnoreDirTimes: true},
		},
		{
			name: "symlink target",
			b:    cmpEdit(same, "public_html/current", func(f *cmpFixture) { f.target = "releases/1" }),
			want: []string{`public_html/current: target "releases/2" != "releases/1"`},
		},
		{
			name: "hardlink broken",
			b: cmpEdit(same, "public_html/b.txt", func(f *cmpFixture) {
				*f = cmpFixture{path: f.path, kind: 'f', mode: 0o644, data: "hello world\n", mtime: 4}
			}),
			want: []string{`public_html/b.txt: hardlink linked to "public_html/a.txt" != not linked to "public_html/a.txt"`},
		},
		{
			name: "hardlink added",
			b: cmpEdit(same, "public_html/c.txt", func(f *cmpFixture) {
				*f = cmpFixture{path: f.path, kind: 'h', target: "public_html/a.txt"}
			}),
			want: []string{`public_html/c.txt: hardlink not linked to "public_html/a.txt" != linked to "public_html/a.txt"`},
		},
		{
			name: "missing file",
			b:    cmpEdit(same, "empty", nil),
			want: []string{"empty: missing (file only in a)"},
		},
		{
			name: "missing subtree reported once",
			b:    cmpEdit(same, "public_html/releases", nil),
			want: []string{"public_html/releases: missing (dir only in a)"},
		},
		{
			name: "extra",
			b:    append(slices.Clone(same), cmpFixture{path: "public_html/new.php", kind: 'f', mode: 0o644}),
			want: []string{"public_html/new.php: extra (file only in b)"},
		},
		{
			name: "file became dir",
			b:    cmpEdit(same, "empty", func(f *cmpFixture) { f.kind, f.mode = 'd', 0o755 }),
			want: []string{"empty: kind file != dir"},
		},
		{
			name: "dir became symlink",
			b: append(cmpEdit(same, "cgi-bin", nil),
				cmpFixture{path: "cgi-bin", kind: 'l', target: "/usr/lib/cgi-bin", mtime: 10}),
			want: []string{"cgi-bin: kind dir != symlink"},
		},
		{
			name: "root mtime",
			b:    same,
			post: func(t *testing.T, b string) { cmpSetTime(t, b, cmpBase+1) },
			want: []string{".: mtime"},
		},
		{
			name: "root ignored",
			b:    same,
			post: func(t *testing.T, b string) {
				cmpSetTime(t, b, cmpBase+1)
				if err := os.Chmod(b, 0o700); err != nil {
					t.Fatal(err)
				}
			},
			opts: CompareOptions{IgnoreRootDir: true},
		},
		{
			name: "several, sorted by path",
			b: cmpEdit(cmpEdit(same, "wp-config.php", func(f *cmpFixture) { f.mode = 0o640 }),
				"cgi-bin/wrapper", func(f *cmpFixture) { f.mtime++ }),
			want: []string{"cgi-bin/wrapper: mtime", "wp-config.php: mode 0600 != 0640"},
		},
		{
			name: "MaxDiffs",
			b: cmpEdit(cmpEdit(same, "wp-config.php", func(f *cmpFixture) { f.mode = 0o640 }),
				"cgi-bin/wrapper", func(f *cmpFixture) { f.mtime++ }),
			opts: CompareOptions{MaxDiffs: 1},
			want: []string{"cgi-bin/wrapper: mtime"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			cmpBuild(t, a, same)
			cmpBuild(t, b, tc.b)
			if tc.post != nil {
				tc.post(t, b)
			}
			diffs, err := Compare(context.Background(), a, b, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			cmpCheck(t, diffs, tc.want)
		})
	}
}

// cmpCheck matches diffs against want: a want entry is the whole
// Difference.String() or, when it has no value, "PATH: WHAT".
func cmpCheck(t *testing.T, diffs []Difference, want []string) {
	t.Helper()
	var got []string
	for _, d := range diffs {
		got = append(got, d.String())
	}
	ok := len(diffs) == len(want)
	for i := 0; ok && i < len(want); i++ {
		short := diffs[i].Path + ": " + diffs[i].What
		ok = want[i] == got[i] || want[i] == short
	}
	if !ok {
		t.Errorf("differences:\n  got  %q\n  want %q", got, want)
	}
}

func TestCompareOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	cmpBuild(t, a, cmpFixtures())
	cmpBuild(t, b, cmpFixtures())
	if err := os.Lchown(filepath.Join(b, "public_html/current"), 1, 2); err != nil {
		t.Fatal(err)
	}
	diffs, err := Compare(context.Background(), a, b, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cmpCheck(t, diffs, []string{"public_html/current: gid 0 != 2", "public_html/current: uid 0 != 1"})
	diffs, err = Compare(context.Background(), a, b, CompareOptions{IgnoreOwner: true})
	if err != nil {
		t.Fatal(err)
	}
	cmpCheck(t, diffs, nil)
}

func TestCompareErrors(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a")
	cmpBuild(t, a, cmpFixtures())
	if _, err := Compare(context.Background(), a, filepath.Join(a, "wp-config.php"), CompareOptions{}); !errors.Is(err, ErrNotDir) {
		t.Errorf("file as root: got %v, want ErrNotDir", err)
	}
	if _, err := Compare(context.Background(), a, filepath.Join(a, "public_html/current"), CompareOptions{}); !errors.Is(err, ErrNotDir) {
		t.Errorf("symlink as root: got %v, want ErrNotDir", err)
	}
	if _, err := Compare(context.Background(), filepath.Join(dir, "nope"), a, CompareOptions{}); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "nope") {
		t.Errorf("missing root: got %v, want ErrNotExist naming the path", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Compare(ctx, a, a, CompareOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: got %v, want context.Canceled", err)
	}
}

// Hardlink groups of fifos and symlinks count as those of files: a
// group linked in a and made of separate inodes in b (same names, kinds,
// modes, times and targets) is a hardlink difference for each follower.
func TestCompareHardlinkKinds(t *testing.T) {
	tmp := t.TempDir()
	mt := []unix.Timespec{unix.NsecToTimespec(cmpBase), unix.NsecToTimespec(cmpBase)}
	build := func(dir string, linked bool) {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, pair := range [][2]string{{"fifo1", "fifo2"}, {"sym1", "sym2"}} {
			for i, name := range pair {
				p := filepath.Join(dir, name)
				var err error
				switch {
				case i == 1 && linked:
					err = unix.Linkat(unix.AT_FDCWD, filepath.Join(dir, pair[0]), unix.AT_FDCWD, p, 0)
				case name[0] == 'f':
					err = unix.Mkfifo(p, 0o644)
				default:
					err = os.Symlink("target", p)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, name := range []string{"fifo1", "fifo2", "sym1", "sym2", "."} {
			if err := unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(dir, name), mt, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				t.Fatal(err)
			}
		}
	}
	a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	build(a, true)
	build(b, false)
	diffs, err := Compare(context.Background(), a, b, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range diffs {
		got = append(got, d.String())
	}
	want := []string{
		`fifo2: hardlink linked to "fifo1" != not linked to "fifo1"`,
		`sym2: hardlink linked to "sym1" != not linked to "sym1"`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("differences:\n  %q\nwant\n  %q", got, want)
	}
	if diffs, _ := Compare(context.Background(), a, a, CompareOptions{}); len(diffs) > 0 {
		t.Errorf("a tree differs from itself: %v", diffs)
	}
}
