package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// firstFileWatch notes when the first regular file gets its final name
// anywhere beneath a directory, whichever tool writes it: inotify on the
// directory and on each subdirectory as it appears, with each new
// subdirectory's contents looked at once it is watched (what was made in
// it before the watch counts too). A file counts when it is created under
// its name (tar writes in place; restoresync links an unnamed file in) or
// renamed to it (rsync, restoresync's temporary names), and is a regular
// file then; a temporary name (tempName) never counts. The time is when
// this process saw it, so it may lag the event by a scheduling delay.
type firstFileWatch struct {
	fd   int
	dirs map[int32]string // watch descriptor → directory
	stop atomic.Bool
	done chan struct{}
	at   time.Time // when the first file was seen; zero if none
	path string    // that file
	err  error
}

// watchMask asks for the events that give a name its final file, and
// refuses to watch through a symlink.
const watchMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_CLOSE_WRITE | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

// watchFirstFile starts watching root (a directory); Stop ends it.
func watchFirstFile(root string) (*firstFileWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	w := &firstFileWatch{fd: fd, dirs: map[int32]string{}, done: make(chan struct{})}
	found, err := w.add(root)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	if found {
		w.at = time.Now()
		close(w.done)
		return w, nil
	}
	go w.loop()
	return w, nil
}

// Stop ends the watch and returns when the first regular file was seen
// (ok false when none was), and an error that stopped the watch early
// (an inotify queue overflow: events were lost).
func (w *firstFileWatch) Stop() (at time.Time, ok bool, err error) {
	w.stop.Store(true)
	<-w.done
	unix.Close(w.fd)
	return w.at, !w.at.IsZero(), w.err
}

// add watches dir, then looks at what it holds already: a subdirectory
// is added the same way, a placed file ends the watch (found true). A
// directory that is gone or replaced by then is passed over.
func (w *firstFileWatch) add(dir string) (found bool, err error) {
	wd, err := unix.InotifyAddWatch(w.fd, dir, watchMask)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("inotify watch %s: %w", dir, err)
	}
	w.dirs[int32(wd)] = dir
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, nil // gone since: its parent's events tell the rest
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() {
			if found, err := w.add(p); found || err != nil {
				return found, err
			}
		} else if placedFile(p, e.Name()) {
			w.path = p
			return true, nil
		}
	}
	return false, nil
}

// loop reads events until the first placed file or Stop.
func (w *firstFileWatch) loop() {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
	for !w.stop.Load() {
		// The timeout only bounds how long Stop waits: an event ends
		// the poll at once.
		n, err := unix.Poll(fds, 20)
		if err == unix.EINTR || n == 0 {
			continue
		}
		if err != nil {
			w.err = fmt.Errorf("inotify poll: %w", err)
			return
		}
		for {
			k, err := unix.Read(w.fd, buf)
			if err == unix.EINTR {
				continue
			}
			if err == unix.EAGAIN {
				break
			}
			if err != nil {
				w.err = fmt.Errorf("inotify read: %w", err)
				return
			}
			if k <= 0 {
				break
			}
			found, err := w.events(buf[:k])
			if found {
				w.at = time.Now()
				return
			}
			if err != nil {
				w.err = err
				return
			}
		}
	}
}

// events handles one read's events.
func (w *firstFileWatch) events(b []byte) (found bool, err error) {
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(b) {
			return false, errors.New("inotify: short event")
		}
		name := string(bytes.TrimRight(b[unix.SizeofInotifyEvent:end], "\x00"))
		b = b[end:]
		if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
			return false, errors.New("inotify queue overflowed: the first file is not known")
		}
		dir, ok := w.dirs[ev.Wd]
		if !ok || name == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if ev.Mask&unix.IN_ISDIR != 0 {
			if ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
				if found, err := w.add(p); found || err != nil {
					return found, err
				}
			}
			continue
		}
		if placedFile(p, name) {
			w.path = p
			return true, nil
		}
	}
	return false, nil
}

// tempName matches the temporary names the restorers write under before
// a rename: restoresync's ".restoresync-<16 hex digits>.tmp" and rsync's
// ".NAME.XXXXXX" (mkstemp).
var tempName = regexp.MustCompile(`^\.restoresync-[0-9a-f]{16}\.tmp$|^\..+\.[A-Za-z0-9]{6}$`)

// placedFile reports whether p (whose last element is name) is a regular
// file under its final name.
func placedFile(p, name string) bool {
	if tempName.MatchString(name) {
		return false
	}
	var st unix.Stat_t
	return unix.Lstat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG
}

// fsKind says what file system dir is on: "tmpfs", or "disk (TYPE)" for
// the common disk file systems, else the magic number.
func fsKind(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return ""
	}
	switch st.Type {
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.EXT4_SUPER_MAGIC:
		return "disk (ext4)"
	case unix.XFS_SUPER_MAGIC:
		return "disk (xfs)"
	case unix.BTRFS_SUPER_MAGIC:
		return "disk (btrfs)"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs"
	}
	return fmt.Sprintf("file system 0x%x", st.Type)
}
