package restore_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/treewalk"
)

// A restore is exact by default, like rsync -aHAXS: the account fixture
// (odd names, modes 000 and 0500, set-id bits, sticky dir, fifo, hardlinks,
// empty files and dirs) plus xattrs in every namespace a restore carries,
// file capabilities, access and default ACLs, sparse files, device nodes
// (paths longer than PATH_MAX, which rsync cannot copy, are in
// TestRestoreLongPaths). Each method restores it, and the result
// is compared file by file with the source (treewalk.Compare: xattrs, ACLs
// and holes included), by the real rsync -AX, and with the real rsync
// -aHAXS's own copy of the source.

// buildMetaTree writes the account fixture plus the extended metadata
// under root, with the real setfattr, setfacl and setcap.
func buildMetaTree(t *testing.T, root string, long255 bool) {
	t.Helper()
	for _, tool := range []string{"setfattr", "setfacl", "setcap"} {
		testenv.RequireTool(t, tool)
	}
	fx := accountFixture()
	if !long255 {
		delete(fx["public_html"].(TestDir), strings.Repeat("n", 255))
	}
	fx["meta"] = TestDir{
		"tagged.txt": TestFile{Content: "xattrs in every namespace"},
		"ping":       TestFile{Content: "\x7fELF pretend", Mode: 0o755},
		"shared":     TestDir{"doc.txt": TestFile{Content: "shared doc"}, "plain.txt": TestFile{Content: "no ACL"}},
		"link":       TestSymlink{Target: "tagged.txt"},
		"queue":      TestFifo{},
		"empty-dir":  TestDir{},
		"empty":      TestFile{},
	}
	fx.build(t, root)
	m := func(p string) string { return filepath.Join(root, "meta", p) }
	sh(t, "setfattr", "-n", "user.mime_type", "-v", "text/plain", m("tagged.txt"))
	sh(t, "setfattr", "-n", "user.empty", m("tagged.txt"))
	sh(t, "setfattr", "-n", "trusted.md5", "-v", "0x00ff10", m("tagged.txt"))
	sh(t, "setfattr", "-n", "security.restoresync", "-v", "label", m("tagged.txt"))
	sh(t, "setfattr", "-h", "-n", "trusted.link", "-v", "on a symlink", m("link"))
	sh(t, "setfattr", "-n", "user.dir", "-v", "on a dir", m("empty-dir"))
	sh(t, "setfattr", "-n", "trusted.fifo", "-v", "on a fifo", m("queue"))
	sh(t, "setcap", "cap_net_raw+ep", m("ping"))
	sh(t, "setfacl", "-m", "u:nobody:rw,g:daemon:r", m("shared/doc.txt"))
	sh(t, "setfacl", "-m", "u:nobody:rwx", m("shared"))
	sh(t, "setfacl", "-d", "-m", "u:nobody:rx,g:daemon:rwx", m("shared"))
	sh(t, "setfacl", "-m", "u:nobody:r", m("queue"))
	// Sparse: a hole, data, a hole, data, and a trailing hole.
	sparse := m("disk.img")
	f, err := os.Create(sparse)
	must(t, err)
	must(t, f.Truncate(64<<20))
	_, err = f.WriteAt(bytes.Repeat([]byte("data"), 3000), 8<<20)
	must(t, err)
	_, err = f.WriteAt([]byte("end"), 40<<20)
	must(t, err)
	must(t, f.Close())
	// Device nodes (root only; tests run as root in CI).
	if os.Geteuid() == 0 {
		must(t, unix.Mknod(m("null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
		must(t, unix.Mknod(m("loop9"), unix.S_IFBLK|0o660, int(unix.Mkdev(7, 9))))
	}
	// Setting xattrs changed the parents' mtimes: set them again.
	for _, d := range []string{"shared", ""} {
		must(t, os.Chtimes(m(d), fixtureTime, fixtureTime))
	}
}

// deepTree makes, under dir, a chain of 200-byte directory names more than
// 4,096 bytes long in total, with a file and a symlink at the bottom. It
// works one level at a time (fd-relative), as nothing else could.
func deepTree(t *testing.T, dir string) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	for i := range 22 {
		name := strings.Repeat(string(rune('a'+i)), 200)
		must(t, unix.Mkdirat(fd, name, 0o755))
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		must(t, err)
		unix.Close(fd)
		fd = next
	}
	ffd, err := unix.Openat(fd, "deep file", unix.O_WRONLY|unix.O_CREAT, 0o640)
	must(t, err)
	unix.Write(ffd, []byte("at the bottom of a 4,400-byte path"))
	unix.Close(ffd)
	must(t, unix.Symlinkat("deep file", fd, "deep link"))
	unix.Close(fd)
}

func sh(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// assertExact is assertSameTree with the extended metadata: Compare (which
// checks xattrs, ACLs and holes) and the real rsync's -AX dry run.
func assertExact(t *testing.T, src, dst string) {
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
	out, err := exec.Command("rsync", "-aHAXni", "--checksum", "--specials", "--devices", "--delete", src+"/", dst+"/").CombinedOutput()
	if err != nil {
		t.Fatalf("rsync -aHAXni: %v\n%s", err, out)
	}
	if out = bytes.TrimSpace(out); len(out) > 0 {
		t.Errorf("rsync -AX sees differences:\n%s", out)
	}
}

func TestRestoreExactMetadata(t *testing.T) {
	testenv.RequireTool(t, "rsync")
	src := filepath.Join(t.TempDir(), "alice")
	buildMetaTree(t, src, true)
	// gokrazy/rsync's receiver makes its temporary files ".NAME.XXXXXX":
	// a 255-byte NAME fails the whole rsync run (ENAMETOOLONG), so the
	// rsync method gets the tree without that name.
	src254 := filepath.Join(t.TempDir(), "alice")
	buildMetaTree(t, src254, false)
	// The real rsync's copy, the reference: both restores must agree.
	ref := filepath.Join(t.TempDir(), "rsync-copy")
	sh(t, "rsync", "-aHAXS", "--devices", "--specials", src+"/", ref+"/")
	for _, tc := range []struct {
		name   string
		mode   string
		method restore.Method
	}{
		{"raw/local", "local", restore.MethodRaw},
		{"raw/pull", "pull", restore.MethodRaw},
		{"raw/push", "push", restore.MethodRaw},
		{"tar/pull", "pull", restore.MethodTar},
		{"tar/local", "local", restore.MethodTar},
		{"rsync/pull", "pull", restore.MethodRsync},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dst := filepath.Join(t.TempDir(), "alice")
			src, ref := src, ref
			if tc.method == restore.MethodRsync {
				src, ref = src254, src254
			}
			o := options(tc.mode, src, dst)
			o.Method, o.Jobs = tc.method, 3
			o.Writer.BlockSizeBytes = 4 << 20 // disk.img (64 MiB, sparse) travels in 16 blocks
			run(t, o)
			assertExact(t, src, dst)
			assertNoTempFiles(t, dst)
			diffs, err := treewalk.Compare(context.Background(), ref, dst, treewalk.CompareOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range diffs {
				// rsync 3.2.7 does not give device nodes their mtimes.
				if d.What == treewalk.DiffMtime && (d.Path == "meta/null" || d.Path == "meta/loop9") {
					continue
				}
				t.Errorf("the restore and rsync -aHAXS's copy differ: %s", d)
			}
			var st unix.Stat_t
			must(t, unix.Stat(filepath.Join(dst, "meta/disk.img"), &st))
			if st.Blocks*512 > 1<<20 {
				t.Errorf("disk.img: %d bytes allocated for 12 KB of data: the holes were filled", st.Blocks*512)
			}
			// A file written again into the directory with a default ACL
			// inherits it; the restore must not keep what the source has
			// not. (DST's copy is made stale, so the rerun rewrites it.)
			must(t, os.Chtimes(filepath.Join(dst, "meta/shared/plain.txt"), fixtureTime, fixtureTime))
			run(t, o)
			assertExact(t, src, dst)
		})
	}
}

// Paths longer than PATH_MAX (4,096 bytes) in total: the walk, the sender
// and the safe writer resolve them piece by piece, for every method. (The
// real rsync refuses them, "filename overflows max-path len": with the
// rsync method they are one error each.)
func TestRestoreLongPaths(t *testing.T) {
	src := filepath.Join(t.TempDir(), "deep")
	must(t, os.Mkdir(src, 0o755))
	deepTree(t, src)
	for _, tc := range []struct {
		name   string
		mode   string
		method restore.Method
	}{
		{"raw/local", "local", restore.MethodRaw},
		{"raw/push", "push", restore.MethodRaw},
		{"tar/pull", "pull", restore.MethodTar},
		{"rsync/pull", "pull", restore.MethodRsync},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dst := filepath.Join(t.TempDir(), "deep")
			o := options(tc.mode, src, dst)
			o.Method = tc.method
			rep, err := restore.Run(context.Background(), o)
			if tc.method == restore.MethodRsync {
				// rsync's sender refuses such paths ("filename overflows
				// max-path len"): each entry past 4,095 bytes (the 21st
				// and 22nd directories, the file, the link) is one error,
				// and the rest is restored.
				if err != nil {
					t.Fatalf("rsync method: %v; want the run to complete", err)
				}
				if len(rep.Errors) != 4 {
					t.Fatalf("rsync method: %d errors, want 4: %+v", len(rep.Errors), rep.Errors)
				}
				for _, e := range rep.Errors {
					if len(e.Path) <= 4095 || !strings.Contains(e.Error, "longer than rsync's limit of 4,095 bytes") {
						t.Errorf("error on %d-byte path: %s", len(e.Path), e.Error)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Errors) > 0 {
				t.Fatalf("errors: %+v", rep.Errors)
			}
			diffs, err := treewalk.Compare(context.Background(), src, dst, treewalk.CompareOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range diffs {
				t.Errorf("difference: %s", d)
			}
		})
	}
}

// An archive made by the real GNU tar with --xattrs --acls --sparse (what
// agent-less --method tar asks the remote's tar for) restores exactly:
// SCHILY.xattr.*, SCHILY.acl.* and GNU's sparse pax records are read.
func TestTarGNUArchiveMetadata(t *testing.T) {
	testenv.RequireTool(t, "tar")
	src := filepath.Join(t.TempDir(), "alice")
	buildMetaTree(t, src, true)
	archive := filepath.Join(t.TempDir(), "alice.tar")
	sh(t, "tar", "--format=posix", "--xattrs", "--xattrs-include=*", "--acls", "--sparse", "-C", src, "-cf", archive, ".")
	dst := filepath.Join(t.TempDir(), "alice")
	run(t, restore.Options{Src: archive, Dst: dst})
	assertExact(t, src, dst)
}
