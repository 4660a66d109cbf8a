package restore_test

import (
	"syscall"

	"golang.org/x/sys/unix"
)

func utimesNanoAtNoFollow(p string, ts []syscall.Timespec) error {
	uts := []unix.Timespec{unix.Timespec(ts[0]), unix.Timespec(ts[1])}
	return unix.UtimesNanoAt(unix.AT_FDCWD, p, uts, unix.AT_SYMLINK_NOFOLLOW)
}
