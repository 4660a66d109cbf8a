package dest

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/treewalk"
)

// Temporary files are named ".restoresync-<16 hex digits>.tmp" in the final
// file's directory: the digits are a hash of the final name, so a rerun
// after an interruption reuses (truncates) the same name instead of leaving
// one more behind, and Finish can recognise and sweep stale ones. The name
// stays short whatever the final name's length (255-byte names work).
const (
	tempPrefix = ".restoresync-"
	tempSuffix = ".tmp"
)

func tempName(base string) string {
	return tempPrefix + fmt.Sprintf("%016x", xxh3.HashString(base)) + tempSuffix
}

// Writer is the safe writer: the only code that writes into a destination
// tree, for every method. It resolves every path beneath the destination
// without following symlinks, writes each file to an unnamed or temporary
// file in its directory, sets owner, mode and mtime on the open descriptor,
// then links or renames it into place, so a file never appears under its
// final name half-written or with the wrong permissions. WriteItem, Commit and OpenBasis are safe
// for concurrent use by any number of streams, and several Writers (in
// several processes) may work on one destination, as the streams of a push
// do; Plan, Finish, FixRsync, RsyncQuickCheck, Delete and Itemize are
// passes over the whole file list, each called from one goroutine (Plan
// before the items are written, Finish after the last).
type Writer struct {
	dst    string
	rootFd int
	opts   WriterOptions
	policy *OwnerPolicy
	chown  bool // running as root: owners are set
	bufs   sync.Pool
	// created says that NewWriter made dst: without a "." entry in the
	// list (several SRCs, a file SRC), settleRoot gives it a new
	// directory's usual mode; rootSettled says that it did.
	created     bool
	rootSettled bool
	filter      *treewalk.Filter // opts.Filters, compiled

	splitMu    sync.Mutex
	splitTemps map[string]bool // split files prepared and not yet committed

	dirs    dirCache     // the data path's open directories
	tmpLink atomic.Int32 // how O_TMPFILE files are linked (link* in fs_linux.go)

	umaskOnce sync.Once
	umask     int // the process umask, -1 if unknown (umaskBits)
}

// umaskBits returns the process umask and whether it is known.
func (w *Writer) umaskBits() (uint32, bool) {
	w.umaskOnce.Do(func() { w.umask = readUmask() })
	return uint32(w.umask), w.umask >= 0
}

// NewWriter creates dst if missing (mode 0700 until Finish gives it its
// final mode) and opens it; with o.DryRun it only opens dst if it exists.
// Errors: bad owner options or filters, a dst that cannot be made or
// opened. The caller closes the Writer.
func NewWriter(dst string, o WriterOptions) (*Writer, error) {
	o.ApplyDefaults()
	policy, err := NewOwnerPolicy(o.Owner, SystemIDs())
	if err != nil {
		return nil, err
	}
	filter, err := treewalk.ParseFilter(o.Filters)
	if err != nil {
		return nil, err
	}
	_, statErr := os.Lstat(dst)
	if !o.DryRun && statErr != nil {
		// Missing parents are made as mkdir -p makes them (0777 less the
		// umask); DST itself is 0700 until its metadata is known.
		if err := os.MkdirAll(filepath.Dir(dst), 0o777); err != nil {
			return nil, fmt.Errorf("create destination %s: %w", dst, err)
		}
		if err := os.Mkdir(dst, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create destination %s: %w", dst, err)
		}
	}
	fd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if o.DryRun && err == unix.ENOENT {
		fd, err = -1, nil // nothing there yet: everything is new
	}
	if err != nil {
		return nil, fmt.Errorf("open destination %s: %w", dst, err)
	}
	w := &Writer{dst: dst, rootFd: fd, opts: o, policy: policy, chown: os.Geteuid() == 0,
		created: os.IsNotExist(statErr), filter: filter}
	w.bufs.New = func() any { return bufio.NewWriterSize(nil, o.WriteBufferBytes) }
	return w, nil
}

// Close removes the temporary files of split files that were prepared and
// not committed (an interrupted run), and releases the destination's
// descriptor.
func (w *Writer) Close() error {
	if w.rootFd < 0 {
		return nil
	}
	w.removeSplitTemps()
	w.dirs.closeAll()
	return unix.Close(w.rootFd)
}

// BlockSize returns the size in bytes above which files are split.
func (w *Writer) BlockSize() int64 { return w.opts.BlockSizeBytes }

// parent opens the directory that holds rel and returns it with rel's last
// component. The caller closes the fd.
func (w *Writer) parent(rel string) (int, string, error) {
	dir, base := path.Split(rel)
	if dir == "" {
		dir = "."
	} else {
		dir = dir[:len(dir)-1]
	}
	fd, err := openDirBeneath(w.rootFd, dir)
	if err != nil {
		return -1, "", fmt.Errorf("open directory %s: %w", dir, err)
	}
	return fd, base, nil
}

// applyMeta sets owner, ACLs, mode, xattrs and mtime on the open
// descriptor fd, in that order (chown clears setuid bits and file
// capabilities, so chmod and xattrs come after it; see xattr_linux.go).
func (w *Writer) applyMeta(fd int, e *treewalk.Entry) error { return w.setMeta(fd, e, true, true) }

// setMeta is applyMeta; without list, fd is a file this Writer has just
// made, which has no xattrs or ACLs of its own, so none are listed (and
// none are touched unless e has some); without chmod, fd was made with
// its final mode, which nothing here changes (e has no ACL, its mode no
// setuid or setgid bit for chown to clear), so it is not set again.
func (w *Writer) setMeta(fd int, e *treewalk.Entry, list, chmod bool) error {
	uid, gid, mode := w.policy.Resolve(e)
	if w.chown {
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return fmt.Errorf("chown %d:%d: %w", uid, gid, err)
		}
	}
	setMode := func() error {
		if !chmod {
			return nil
		}
		if err := unix.Fchmod(fd, mode); err != nil {
			return fmt.Errorf("chmod %04o: %w", mode, err)
		}
		return nil
	}
	var err error
	if list {
		err = w.syncMeta(fdTarget(fd), e, setMode)
	} else {
		err = w.syncMetaFrom(fdTarget(fd), nil, e, setMode)
	}
	if err != nil {
		return err
	}
	if err := futimens(fd, e.MtimeNs); err != nil {
		return fmt.Errorf("set mtime: %w", err)
	}
	return nil
}

// syncMeta brings t's POSIX ACLs and xattrs to e's around chmod, which it
// calls between them: ACLs first (setting one rewrites the group mode
// bits, which chmod then puts right), xattrs last (a chown before clears
// security.capability; see xattr_linux.go). What t has and e lacks is
// removed. Without --no-xattrs and --no-acls both, t's names are listed
// even when e has none, so that an inherited default ACL goes.
func (w *Writer) syncMeta(t xattrTarget, e *treewalk.Entry, chmod func() error) error {
	var cur []string
	if !w.opts.NoXattrs || !w.opts.NoACLs {
		var err error
		if cur, err = t.names(); err != nil {
			return err
		}
	}
	return w.syncMetaFrom(t, cur, e, chmod)
}

// syncMetaFrom is syncMeta on a target whose names are cur.
func (w *Writer) syncMetaFrom(t xattrTarget, cur []string, e *treewalk.Entry, chmod func() error) error {
	sync := len(cur) > 0 || w.hasXattrs(e)
	if sync {
		if err := w.syncXattrs(t, cur, partACL, e); err != nil {
			return err
		}
	}
	if err := chmod(); err != nil {
		return err
	}
	if sync {
		return w.syncXattrs(t, cur, partXattrs, e)
	}
	return nil
}
