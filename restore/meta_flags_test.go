package restore_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/treewalk"
)

// methodCases are the methods and directions every exactness test runs.
var methodCases = []struct {
	name   string
	mode   string
	method restore.Method
}{
	{"raw/pull", "pull", restore.MethodRaw},
	{"raw/push", "push", restore.MethodRaw},
	{"tar/pull", "pull", restore.MethodTar},
	{"rsync/pull", "pull", restore.MethodRsync},
}

// --no-xattrs, --no-acls, --no-sparse, --no-specials and --no-devices leave
// each part out (and DST's xattrs and ACLs alone), for every method.
func TestRestoreNoMetaFlags(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (device nodes, trusted.* xattrs)")
	}
	src := filepath.Join(t.TempDir(), "alice")
	buildMetaTree(t, src, false)
	for _, tc := range methodCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dst := filepath.Join(t.TempDir(), "alice")
			// DST's directory already has an xattr the source has not:
			// kept, as rsync without -X keeps it.
			must(t, os.MkdirAll(filepath.Join(dst, "meta"), 0o755))
			sh(t, "setfattr", "-n", "user.keep", "-v", "mine", filepath.Join(dst, "meta"))
			o := options(tc.mode, src, dst)
			o.Method = tc.method
			w := &o.Writer
			w.NoXattrs, w.NoACLs, w.NoSparse, w.NoSpecials, w.NoDevices = true, true, true, true, true
			run(t, o)
			diffs, err := treewalk.Compare(context.Background(), src, dst, treewalk.CompareOptions{IgnoreXattrs: true, IgnoreSparse: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range diffs {
				if d.What == treewalk.DiffMissing && strings.Contains(" fifo meta/queue meta/null meta/loop9 ", " "+d.Path+" ") {
					continue
				}
				t.Errorf("difference: %s", d)
			}
			for _, p := range []string{"fifo", "meta/queue", "meta/null", "meta/loop9"} {
				if _, err := os.Lstat(filepath.Join(dst, p)); !os.IsNotExist(err) {
					t.Errorf("%s: restored despite --no-specials --no-devices (%v)", p, err)
				}
			}
			for _, c := range []struct{ path, name string }{
				{"meta/tagged.txt", "user.mime_type"}, {"meta/ping", "security.capability"},
				{"meta/shared/doc.txt", "system.posix_acl_access"}, {"meta/shared", "system.posix_acl_default"},
			} {
				if _, err := unix.Lgetxattr(filepath.Join(dst, c.path), c.name, nil); err != unix.ENODATA {
					t.Errorf("%s: %s restored despite --no-xattrs --no-acls (%v)", c.path, c.name, err)
				}
			}
			if v, err := unix.Lgetxattr(filepath.Join(dst, "meta"), "user.keep", make([]byte, 16)); err != nil || v != 4 {
				t.Errorf("DST's own user.keep on meta: %d, %v; want it kept", v, err)
			}
			var st unix.Stat_t
			must(t, unix.Stat(filepath.Join(dst, "meta/disk.img"), &st))
			if st.Blocks*512 < st.Size {
				t.Errorf("disk.img: %d of %d bytes allocated despite --no-sparse", st.Blocks*512, st.Size)
			}
		})
	}
}

// Set-id bits are kept when ownership is kept (plain, --numeric-ids) and
// dropped when --chown or --usermap changes the owner, unless
// --keep-setid; a directory keeps setgid. Every method.
func TestRestoreSetIDCases(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (chown)")
	}
	src := filepath.Join(t.TempDir(), "src")
	TestDir{
		"suid":  TestFile{Content: "suid", Mode: 0o755 | os.ModeSetuid, Uid: 1000},
		"sgid":  TestFile{Content: "sgid", Mode: 0o755 | os.ModeSetgid, Uid: 1000},
		"share": TestDirMode{Mode: 0o775 | os.ModeSetgid, Dir: TestDir{"f": TestFile{Content: "x"}}},
	}.build(t, src)
	cases := []struct {
		name       string
		opts       dest.OwnerOptions
		suid, sgid uint32 // mode bits expected on the files
	}{
		{"plain", dest.OwnerOptions{}, 0o4755, 0o2755},
		{"numeric-ids", dest.OwnerOptions{NumericIDs: true}, 0o4755, 0o2755},
		{"chown", dest.OwnerOptions{Chown: "nobody:nogroup"}, 0o755, 0o755},
		{"chown keep-setid", dest.OwnerOptions{Chown: "nobody:nogroup", KeepSetID: true}, 0o4755, 0o2755},
		{"usermap", dest.OwnerOptions{Usermap: []string{"*:nobody"}}, 0o755, 0o2755},
		{"usermap keep-setid", dest.OwnerOptions{Usermap: []string{"*:nobody"}, KeepSetID: true}, 0o4755, 0o2755},
	}
	for _, mc := range methodCases {
		for _, c := range cases {
			t.Run(mc.name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				dst := filepath.Join(t.TempDir(), "dst")
				o := options(mc.mode, src, dst)
				o.Method = mc.method
				o.Writer.Owner = c.opts
				run(t, o)
				for p, want := range map[string]uint32{"suid": c.suid, "sgid": c.sgid, "share": 0o2775} {
					var st unix.Stat_t
					must(t, unix.Lstat(filepath.Join(dst, p), &st))
					if got := st.Mode & 0o7777; got != want {
						t.Errorf("%s: mode %04o, want %04o", p, got, want)
					}
				}
			})
		}
	}
}

// Type changes in every direction between file, directory, symlink and
// fifo, for every method: what DST holds is replaced cleanly (an empty
// directory included; a non-empty one needs --force, see
// TestRestoreTypeChanges).
func TestRestoreTypeChangesAllMethods(t *testing.T) {
	kinds := map[string]func() any{
		"file": func() any { return TestFile{Content: "a file"} },
		"dir":  func() any { return TestDir{} },
		"link": func() any { return TestSymlink{Target: "somewhere"} },
		"fifo": func() any { return TestFifo{} },
	}
	srcTree, dstTree := TestDir{}, TestDir{}
	for from, mkFrom := range kinds {
		for to, mkTo := range kinds {
			if from != to {
				name := from + "-to-" + to
				dstTree[name] = mkFrom()
				srcTree[name] = mkTo()
			}
		}
	}
	src := filepath.Join(t.TempDir(), "src")
	srcTree.build(t, src)
	for _, mc := range methodCases {
		t.Run(mc.name, func(t *testing.T) {
			t.Parallel()
			dst := filepath.Join(t.TempDir(), "dst")
			dstTree.build(t, dst)
			o := options(mc.mode, src, dst)
			o.Method = mc.method
			run(t, o)
			assertSameTree(t, src, dst)
			assertNoTempFiles(t, dst)
		})
	}
}

// A directory with 100,000 entries (empty files, on tmpfs when there is
// one): listed, planned, written and finished like any other.
func TestRestoreHugeDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	base := t.TempDir()
	if d, err := os.MkdirTemp("/dev/shm", "restoresync-test-"); err == nil {
		base = d
		t.Cleanup(func() { os.RemoveAll(d) })
	}
	src := filepath.Join(base, "src")
	dir := filepath.Join(src, "sessions")
	must(t, os.MkdirAll(dir, 0o755))
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	for i := range hugeDirEntries {
		f, err := unix.Openat(fd, "sess_"+strings.Repeat("0", 6-len(itoa(i)))+itoa(i), unix.O_WRONLY|unix.O_CREAT, 0o600)
		must(t, err)
		unix.Close(f)
	}
	unix.Close(fd)
	dst := filepath.Join(base, "dst")
	rep := run(t, options("local", src, dst))
	if rep.Files != hugeDirEntries {
		t.Errorf("report: %d files written, want %d", rep.Files, hugeDirEntries)
	}
	diffs, err := treewalk.Compare(context.Background(), src, dst, treewalk.CompareOptions{MaxDiffs: 10, IgnoreXattrs: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Errorf("difference: %s", d)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// hugeDirEntries is the size of TestRestoreHugeDirectory's directory.
var hugeDirEntries = 100_000
