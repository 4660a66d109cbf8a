package dest

import (
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/treewalk"
)

// Low-level, symlink-proof file operations beneath a destination directory
// descriptor. Every path is resolved with openat2(RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS), so a symlink planted anywhere in the path makes the
// operation fail (ELOOP) instead of being followed; the final component is
// then handled with *at calls and O_NOFOLLOW / AT_SYMLINK_NOFOLLOW.

// openDirBeneath opens the directory rel (slash-separated, "." for the root)
// beneath rootFd without following any symlink. The caller closes the fd.
func openDirBeneath(rootFd int, rel string) (int, error) {
	return treewalk.OpenBeneath(rootFd, rel, unix.O_RDONLY|unix.O_DIRECTORY)
}

// How the Writer links an unnamed (O_TMPFILE) file into place; the
// first such file finds it (Writer.tmpLink).
const (
	linkUnknown   int32 = iota // not tried yet
	linkEmptyPath              // linkat(fd, "", AT_EMPTY_PATH): needs CAP_DAC_READ_SEARCH
	linkProcFd                 // linkat of /proc/self/fd/N, following that magic link to the open file
	linkNone                   // neither works here: files get temporary names
)

// linkTmpfile gives the unnamed file open at fd the name name in dirfd,
// the way m says. Like every link, it never replaces what is at name
// (EEXIST) and never follows it.
func linkTmpfile(fd, dirfd int, name string, m int32) error {
	if m == linkProcFd {
		return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), dirfd, name, unix.AT_SYMLINK_FOLLOW)
	}
	return unix.Linkat(fd, "", dirfd, name, unix.AT_EMPTY_PATH)
}

// probeTmpfileLink links the unnamed file fd as name in dirfd each way in
// turn and returns the first that works; linkNone when neither is
// allowed, linkUnknown when the link failed for another reason (say, a
// full directory) and the next file should try again.
func probeTmpfileLink(fd, dirfd int, name string) int32 {
	var err error
	for _, m := range []int32{linkEmptyPath, linkProcFd} {
		if err = linkTmpfile(fd, dirfd, name, m); err == nil {
			return m
		}
	}
	if err == unix.ENOENT || err == unix.EPERM || err == unix.EACCES || err == unix.EXDEV {
		return linkNone
	}
	return linkUnknown
}

// futimens sets fd's mtime to ns nanoseconds since the epoch, leaving atime.
func futimens(fd int, ns int64) error {
	ts := [2]unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(ns)}
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// lutimensAt sets the mtime of name in dirfd without following a symlink.
func lutimensAt(dirfd int, name string, ns int64) error {
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(ns)}
	return unix.UtimesNanoAt(dirfd, name, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// lstatAt stats name in dirfd without following a symlink.
func lstatAt(dirfd int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// removeAllAt removes name in dirfd and, if it is a directory, everything in
// it, never following symlinks (each level is opened with O_NOFOLLOW).
func removeAllAt(dirfd int, name string) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || err == unix.ENOENT {
		return nil
	}
	if err != unix.EISDIR && err != unix.EPERM {
		return err
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	names, err := readDirNames(fd)
	if err == nil {
		for _, n := range names {
			if err = removeAllAt(fd, n); err != nil {
				break
			}
		}
	}
	unix.Close(fd)
	if err != nil {
		return err
	}
	return unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
}

// readDirNames lists the directory open at fd (without "." and ".."). It
// reads through a duplicate so fd's offset is left alone.
func readDirNames(fd int) ([]string, error) {
	d, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(d)
	var names []string
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(d, buf)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// renameReplacing renames from to to within dirfd, replacing whatever is at
// to. A directory there (the source has another type) is removed first if
// it is empty, or, with force, with everything in it; otherwise the result
// is ErrNonEmptyDir.
func (w *Writer) renameReplacing(dirfd int, from, to string) error {
	err := unix.Renameat(dirfd, from, dirfd, to)
	if err == unix.EISDIR || err == unix.ENOTEMPTY || err == unix.EEXIST || err == unix.ENOTDIR {
		rerr := unix.Unlinkat(dirfd, to, unix.AT_REMOVEDIR)
		if rerr == unix.ENOTEMPTY || rerr == unix.EEXIST {
			if !w.opts.Force {
				return ErrNonEmptyDir
			}
			rerr = removeAllAt(dirfd, to)
		}
		if rerr != nil {
			return fmt.Errorf("replace %s: %w", to, rerr)
		}
		err = unix.Renameat(dirfd, from, dirfd, to)
	}
	return err
}

// removeTempAt removes name in dirfd, one of the writer's temporary
// names: a file, or an empty directory a killed mkdirOwned left (it is
// renamed into place before anything is put in it). ENOENT is success.
func removeTempAt(dirfd int, name string) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == unix.EISDIR || err == unix.EPERM {
		err = unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
	}
	if err == unix.ENOENT {
		return nil
	}
	return err
}

// isTempName reports whether name is one of the writer's temporary files.
func isTempName(name string) bool {
	return strings.HasPrefix(name, tempPrefix) && strings.HasSuffix(name, tempSuffix)
}
