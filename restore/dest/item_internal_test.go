package dest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

var itemTime = time.Date(2023, 7, 8, 9, 10, 11, 121314151, time.UTC).UnixNano()

func writeWholeFile(t *testing.T, w *Writer, rel string, data []byte, mode uint32) error {
	t.Helper()
	e := treewalk.Entry{Path: rel, Kind: treewalk.KindFile, Mode: mode, Uid: uint32(os.Geteuid()),
		Gid: uint32(os.Getegid()), Size: int64(len(data)), MtimeNs: itemTime}
	return w.WriteItem(t.Context(), &transfer.Item{Entry: e, Length: e.Size}, bytes.NewReader(data))
}

func checkFile(t *testing.T, p string, data []byte, mode os.FileMode) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("%s: %q, %v; want %q", p, got, err, data)
	}
	fi, err := os.Lstat(p)
	if err != nil || fi.Mode() != mode || fi.ModTime().UnixNano() != itemTime {
		t.Fatalf("%s: mode %v mtime %v (%v); want %v and the sender's mtime", p, fi.Mode(), fi.ModTime(), err, mode)
	}
}

// noTemps fails if a temporary file is left anywhere under dst.
func noTemps(t *testing.T, dst string) {
	t.Helper()
	filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err == nil && isTempName(d.Name()) {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
}

func openFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(ents)
}

// Streams writing into many more directories than the descriptor cache
// keeps, all at once, put every file in place with its data and
// metadata; Close leaves no directory open.
func TestWriteItemManyDirectoriesConcurrently(t *testing.T) {
	dst := t.TempDir()
	fds := openFds(t)
	w, err := NewWriter(dst, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const dirs, files, streams = 3 * dirCacheMax, 4, 8
	for d := 0; d < dirs; d++ {
		if err := os.MkdirAll(filepath.Join(dst, fmt.Sprintf("d%03d/s", d)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for s := 0; s < streams; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := s; i < dirs*files; i += streams {
				rel := fmt.Sprintf("d%03d/s/f%d", i%dirs, i/dirs)
				if err := writeWholeFile(t, w, rel, []byte(rel), 0o640); err != nil {
					errs <- fmt.Errorf("%s: %w", rel, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := len(w.dirs.dirs); n > dirCacheMax {
		t.Errorf("%d directories cached while idle, want at most %d", n, dirCacheMax)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := openFds(t); n != fds {
		t.Errorf("%d descriptors open after Close, %d before NewWriter", n, fds)
	}
	for i := 0; i < dirs*files; i++ {
		rel := fmt.Sprintf("d%03d/s/f%d", i%dirs, i/dirs)
		checkFile(t, filepath.Join(dst, rel), []byte(rel), 0o640)
	}
	noTemps(t, dst)
}

// A whole file replaces what DST has at its name (a file, a symlink to
// outside DST, an empty directory) without following it, whether it is
// written unnamed (O_TMPFILE) or, where that is unavailable, under its
// temporary name; a temporary file a killed run left, with an xattr of
// its own, does not give its xattr to the restored file, and is gone
// after Finish.
func TestWriteItemReplacesWhatIsThere(t *testing.T) {
	for _, tc := range []struct {
		name string
		link int32
	}{{"unnamed", linkUnknown}, {"named", linkNone}} {
		t.Run(tc.name, func(t *testing.T) {
			dst, outside := t.TempDir(), t.TempDir()
			w, err := NewWriter(dst, WriterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			w.tmpLink.Store(tc.link)
			secret := filepath.Join(outside, "secret")
			if err := os.WriteFile(secret, []byte("outside"), 0o600); err != nil {
				t.Fatal(err)
			}
			must(t, os.WriteFile(filepath.Join(dst, "file"), []byte("old contents, longer"), 0o666))
			must(t, os.Symlink(secret, filepath.Join(dst, "link")))
			must(t, os.Mkdir(filepath.Join(dst, "dir"), 0o755))
			stale := filepath.Join(dst, tempName("new"))
			must(t, os.WriteFile(stale, []byte("a killed run's partial data"), 0o644))
			xattrs := unix.Setxattr(stale, "user.stale", []byte("x"), 0) == nil

			for _, name := range []string{"first", "file", "link", "dir", "new", "last"} {
				if err := writeWholeFile(t, w, name, []byte("new "+name), 0o644); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				checkFile(t, filepath.Join(dst, name), []byte("new "+name), 0o644)
			}
			if b, err := os.ReadFile(secret); err != nil || string(b) != "outside" {
				t.Errorf("the file outside DST the symlink pointed to: %q, %v", b, err)
			}
			if xattrs {
				if n, _ := unix.Getxattr(filepath.Join(dst, "new"), "user.stale", nil); n >= 0 {
					t.Errorf("the stale temporary file's xattr reached the restored file")
				}
			}
			// The unnamed way leaves the stale temporary file to
			// Finish, which sweeps every directory of the list.
			root := []treewalk.Entry{{Path: ".", Kind: treewalk.KindDir, Mode: 0o755, MtimeNs: itemTime,
				Uid: uint32(os.Geteuid()), Gid: uint32(os.Getegid())}}
			if errs, err := w.Finish(t.Context(), root); err != nil || len(errs) > 0 {
				t.Fatal(err, errs)
			}
			noTemps(t, dst)
		})
	}
}

// An unnamed file is linked by either way, never over an existing name.
func TestLinkTmpfile(t *testing.T) {
	dir := t.TempDir()
	dirfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dirfd)
	must(t, os.WriteFile(filepath.Join(dir, "taken"), []byte("kept"), 0o644))
	for _, m := range []int32{linkEmptyPath, linkProcFd} {
		fd, err := unix.Openat(dirfd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
		if err != nil {
			t.Skip("no O_TMPFILE here:", err)
		}
		unix.Write(fd, []byte("unnamed"))
		if err := linkTmpfile(fd, dirfd, "taken", m); err != unix.EEXIST {
			t.Errorf("way %d over an existing name: %v, want EEXIST", m, err)
		}
		name := fmt.Sprintf("linked%d", m)
		err = linkTmpfile(fd, dirfd, name, m)
		unix.Close(fd)
		if err != nil {
			if m == linkEmptyPath && os.Geteuid() != 0 {
				continue // needs CAP_DAC_READ_SEARCH
			}
			t.Fatalf("way %d: %v", m, err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != "unnamed" {
			t.Errorf("way %d: %q, %v", m, b, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "taken")); !strings.EqualFold(string(b), "kept") {
		t.Errorf("the existing name was replaced: %q", b)
	}
}

// A temporary name is ".restoresync-", the final name's xxh3 in 16 hex
// digits, ".tmp" (what Finish sweeps and a rerun reuses), made with one
// allocation: every file written gets one.
func TestTempNameFormatAndAllocations(t *testing.T) {
	for _, base := range []string{"wp-config.php", "", strings.Repeat("n", 255)} {
		want := fmt.Sprintf(".restoresync-%016x.tmp", xxh3.HashString(base))
		if got := tempName(base); got != want {
			t.Errorf("tempName(%q) = %q, want %q", base, got, want)
		}
		if n := testing.AllocsPerRun(100, func() { _ = tempName(base) }); n > 1 {
			t.Errorf("tempName(%q): %.0f allocations, want at most 1", base, n)
		}
	}
	if got := tempName("a"); !strings.HasPrefix(got, ".restoresync-") || len(got) != len(".restoresync-")+16+len(".tmp") {
		t.Errorf("tempName(a) = %q", got)
	}
}
