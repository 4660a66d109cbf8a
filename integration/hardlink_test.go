package integration

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/internal/testsshd"
)

// Over a real sshd, a pull keeps hardlinked fifos and symlinks as one
// inode each, and a name added to a hardlink group whose file DST
// already holds crosses the wire as a link only: the rerun's report
// counts no data and far fewer wire bytes than the file, and both names
// share one inode in DST.
func TestE2EHardlinksPull(t *testing.T) {
	e2e(t)
	t.Parallel()
	const size = 5 << 20
	src := filepath.Join(t.TempDir(), "alice")
	if err := os.MkdirAll(filepath.Join(src, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size)
	rand.Read(data)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(src, "filelist"), data, 0o644))
	must(unix.Mkfifo(filepath.Join(src, "fifo1"), 0o600))
	must(os.Link(filepath.Join(src, "fifo1"), filepath.Join(src, "dir/fifo2")))
	must(os.Symlink("filelist", filepath.Join(src, "sym1")))
	must(unix.Linkat(unix.AT_FDCWD, filepath.Join(src, "sym1"), unix.AT_FDCWD, filepath.Join(src, "sym2"), 0))
	srv := testsshd.Start(t)
	dst := filepath.Join(t.TempDir(), "alice")
	args := append([]string{"restore", "--json"}, sshdArgs(srv)...)
	args = append(args, sshdURL(srv, src), dst)
	first := parseReport(t, mustRun(t, args...))
	if first.Bytes != size {
		t.Errorf("first run: %d bytes; want %d", first.Bytes, size)
	}
	assertSameTree(t, src, dst)

	must(os.Link(filepath.Join(src, "filelist"), filepath.Join(src, "dir/filelist")))
	second := parseReport(t, mustRun(t, args...))
	if second.Bytes != 0 || second.WireBytes > size/10 {
		t.Errorf("new hardlink: %d bytes of data, %d on the wire; want none of the %d-byte file", second.Bytes, second.WireBytes, size)
	}
	assertSameTree(t, src, dst)
	for _, g := range [][2]string{{"filelist", "dir/filelist"}, {"fifo1", "dir/fifo2"}, {"sym1", "sym2"}} {
		var ino [2]uint64
		for i, p := range g {
			fi, err := os.Lstat(filepath.Join(dst, p))
			must(err)
			ino[i] = fi.Sys().(*syscall.Stat_t).Ino
		}
		if ino[0] != ino[1] {
			t.Errorf("%s and %s are separate inodes in DST", g[0], g[1])
		}
	}
}
