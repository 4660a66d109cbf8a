package treewalk

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// OpenBeneath gives a single name the guarantees of a path: a symlink,
// to a file or to a directory, is refused and not followed; ".." and an
// empty name never leave the directory; a plain file opens.
func TestOpenBeneathSingleName(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"tofile": filepath.Join(outside, "secret"), "todir": outside, "self": "self"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	fd, err := OpenBeneath(dfd, "file", unix.O_RDONLY)
	if err != nil {
		t.Fatalf("file: %v", err)
	}
	buf := make([]byte, 16)
	n, _ := unix.Read(fd, buf)
	unix.Close(fd)
	if string(buf[:n]) != "inside" {
		t.Errorf("file reads %q", buf[:n])
	}
	for _, name := range []string{"tofile", "todir", "self"} {
		for _, flags := range []int{unix.O_RDONLY, unix.O_RDONLY | unix.O_DIRECTORY, unix.O_WRONLY | unix.O_TRUNC} {
			fd, err := OpenBeneath(dfd, name, flags)
			if err == nil {
				unix.Close(fd)
				t.Errorf("%s (flags %#x) was opened through the symlink", name, flags)
			} else if !errors.Is(err, ErrSymlinkInPath) {
				t.Errorf("%s (flags %#x): %v, want ErrSymlinkInPath", name, flags, err)
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "outside" {
		t.Errorf("the file outside now holds %q", b)
	}
	for _, name := range []string{"..", ""} {
		if fd, err := OpenBeneath(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY); err == nil {
			unix.Close(fd)
			t.Errorf("%q was opened beneath the directory", name)
		}
	}
	// O_PATH|O_NOFOLLOW names the link itself, as openat2 would.
	fd, err = OpenBeneath(dfd, "tofile", unix.O_PATH)
	if err != nil {
		t.Fatalf("O_PATH of a symlink: %v", err)
	}
	var st unix.Stat_t
	unix.Fstat(fd, &st)
	unix.Close(fd)
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		t.Errorf("O_PATH descriptor is of mode %#o, want the symlink", st.Mode)
	}
}

// BenchmarkOpenBeneathName opens and closes files by a single name
// beneath their directory, as the sender does for each file it reads.
func BenchmarkOpenBeneathName(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "index.php"), []byte("<?php"), 0o644); err != nil {
		b.Fatal(err)
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(dfd)
	for b.Loop() {
		fd, err := OpenBeneath(dfd, "index.php", unix.O_RDONLY)
		if err != nil {
			b.Fatal(err)
		}
		unix.Close(fd)
	}
}
