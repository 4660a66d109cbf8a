package restore_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/restore"
)

// requireRoot skips t unless it runs as root (mounts need it); in CI, where
// the tests run as root, a skip would hide the test, so it fails instead.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("this test needs root, as in CI")
		}
		t.Skip("needs root to mount")
	}
}

// mount runs mount(8) with args and unmounts target when t ends (before
// TempDir's removal, which runs later).
func mount(t *testing.T, target string, args ...string) {
	t.Helper()
	if out, err := exec.Command("mount", append(args, target)...).CombinedOutput(); err != nil {
		t.Fatalf("mount %v %s: %v: %s", args, target, err, out)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", target, err)
		}
	})
}

// A destination that fills up (a 4 MiB tmpfs, 8 MiB to restore): each
// file that does not fit is reported with the file system's error and its
// path, nothing is under a final name half-written, no temporary file is
// left, and what fitted is restored.
func TestFaultDiskFull(t *testing.T) {
	requireRoot(t)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			src := filepath.Join(t.TempDir(), "alice")
			TestDir{
				"index.php": TestFile{Content: "<?php echo 1;\n"},
				"media": TestDir{
					"split.mov": TestFile{Size: 5<<20 + 1}, // 2 blocks of 4 MiB
					"whole.jpg": TestFile{Size: 3 << 20},
				},
				"notes": TestDir{"a.txt": TestFile{Content: "a\n"}, "b.txt": TestFile{Content: "b\n"}},
			}.build(t, src)
			mnt := t.TempDir()
			mount(t, mnt, "-t", "tmpfs", "-o", "size=4m", "tmpfs")
			dst := filepath.Join(mnt, "alice")
			o := options(mode, src, dst)
			o.Writer.BlockSizeBytes = 4 << 20
			rep, err := runAllowingErrors(t, o)
			if err != nil {
				t.Fatalf("the run failed instead of reporting the files: %v", err)
			}
			failed := map[string]bool{}
			for _, fe := range rep.Errors {
				failed[fe.Path] = true
				// A block of a split file that arrives on another stream
				// after one failed finds its temporary file removed.
				if !strings.Contains(fe.Error, "no space left on device") && !strings.Contains(fe.Error, "another block of the file failed") {
					t.Errorf("%s: %s; want the file system's ENOSPC", fe.Path, fe.Error)
				}
			}
			if !failed["media/split.mov"] && !failed["media/whole.jpg"] {
				t.Errorf("errors %+v; want the big files that cannot fit", rep.Errors)
			}
			placed := assertPlacedComplete(t, src, dst)
			assertNoTempFiles(t, dst)
			if placed+len(failed) != 5 {
				t.Errorf("%d files placed, %d failed, of 5", placed, len(failed))
			}
			t.Logf("%s: %d placed, errors: %+v", mode, placed, rep.Errors)
		})
	}
}

// A read-only part of the destination (a read-only bind mount, which root
// cannot write through): its entries are reported, the rest of the tree is
// restored.
func TestFaultReadOnlyDestination(t *testing.T) {
	requireRoot(t)
	src := filepath.Join(t.TempDir(), "alice")
	accountFixture().build(t, src)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			dst := filepath.Join(t.TempDir(), "alice")
			ro := filepath.Join(dst, "public_html", "uploads")
			must(t, os.MkdirAll(ro, 0o755))
			mount(t, ro, "--bind", ro)
			if out, err := exec.Command("mount", "-o", "remount,bind,ro", ro).CombinedOutput(); err != nil {
				t.Fatalf("remount read-only: %v: %s", err, out)
			}
			o := options(mode, src, dst)
			rep, err := runAllowingErrors(t, o)
			if err != nil {
				t.Fatal(err)
			}
			// Each entry of the read-only part fails: the directories that
			// cannot be made with EROFS, their contents for want of them.
			erofs := 0
			for _, fe := range rep.Errors {
				if fe.Path != "public_html/uploads" && !strings.HasPrefix(fe.Path, "public_html/uploads/") {
					t.Errorf("error outside the read-only part: %s: %s", fe.Path, fe.Error)
				}
				if strings.Contains(fe.Error, "read-only file system") {
					erofs++
				}
			}
			if erofs == 0 {
				t.Fatalf("errors %+v; want EROFS for the read-only part", rep.Errors)
			}
			// Everything else is there and equal to the source.
			filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
				rel, _ := filepath.Rel(src, p)
				if err != nil || rel == "public_html/uploads" {
					return fs.SkipDir
				}
				if _, err := os.Lstat(filepath.Join(dst, rel)); err != nil {
					t.Errorf("%s was not restored: %v", rel, err)
				}
				return nil
			})
			assertPlacedComplete(t, src, dst)
			assertNoTempFiles(t, dst)
		})
	}
}

// runAllowingErrors runs a restore whose per-file errors are expected.
func runAllowingErrors(t *testing.T, o restore.Options) (*restore.Report, error) {
	t.Helper()
	return restore.Run(context.Background(), o)
}
