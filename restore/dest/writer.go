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
	const digits = "0123456789abcdef"
	var b [len(tempPrefix) + 16 + len(tempSuffix)]byte
	n := copy(b[:], tempPrefix)
	h := xxh3.HashString(base)
	for shift := 60; shift >= 0; shift -= 4 {
		b[n] = digits[h>>shift&15]
		n++
	}
	copy(b[n:], tempSuffix)
	return string(b[:])
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
	// created says that NewWriter made dst: settleRoot gives it the
	// owner and interim mode of the list's "." entry, or without one
	// (several SRCs, a file SRC) back the mode mkdir gave it (rootMode,
	// its permission, setuid, setgid and sticky bits), when NewWriter
	// narrowed it to the owner (rootNarrowed) while the list is not
	// known; rootSettled says that it did.
	created      bool
	rootMode     uint32
	rootNarrowed bool
	rootSettled  bool
	filter       *treewalk.Filter // opts.Filters, compiled

	splitMu    sync.Mutex
	splitTemps map[string]bool // split files prepared and not yet committed

	// madeDirs holds the directories this Writer created and has not
	// finished yet (relative paths): no earlier run left temporary files
	// in them, so finishDir need not list them. An entry goes when its
	// directory is finished, so the set holds the directories in flight,
	// not the tree.
	madeMu   sync.Mutex
	madeDirs map[string]struct{}

	dirs    dirCache     // the data path's open directories
	tmpLink atomic.Int32 // how O_TMPFILE files are linked (link* in fs_linux.go)

	umaskOnce  sync.Once
	umask      uint32 // the process umask (umaskBits)
	umaskKnown bool   // whether it could be read
}

// umaskBits returns the process umask and whether it is known.
func (w *Writer) umaskBits() (uint32, bool) {
	w.umaskOnce.Do(func() { w.umask, w.umaskKnown = readUmask() })
	return w.umask, w.umaskKnown
}

// NewWriter creates dst if missing and opens it; with o.DryRun it only
// opens dst if it exists. A dst it creates, and its missing parents, are
// made as mkdir -p (and rsync) makes them: mkdir(2) with mode 0777, so
// that the kernel applies the umask or the parent's default ACL and
// inherits the parent's setgid bit; it is owned from the start by the
// owner the policy gives a root-owned directory (chownNewRoot: the
// account with --account); until Plan or Finish knows whether the list
// gives dst a mode of its own, dst keeps no group or other access (see
// settleRoot). Errors: bad owner options or filters, a dst
// that cannot be made or opened. The caller closes the Writer.
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
		if err := os.MkdirAll(filepath.Dir(dst), 0o777); err != nil {
			return nil, fmt.Errorf("create destination %s: %w", dst, err)
		}
		if err := os.Mkdir(dst, 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
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
	if w.created && !o.DryRun {
		if err := w.narrowNewRoot(); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("create destination %s: %w", dst, err)
		}
		if err := w.chownNewRoot(); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("create destination %s: %w", dst, err)
		}
	}
	w.bufs.New = func() any { return bufio.NewWriterSize(nil, o.WriteBufferBytes) }
	return w, nil
}

// narrowNewRoot records the mode mkdir gave the new DST (rootMode) and
// takes group and other access away from it until settleRoot. chmod(2)
// changes only the owner, group class (the ACL mask, with an ACL) and
// other entries, which the mode holds, so settleRoot's chmod back to
// rootMode restores the ACL mkdir made exactly. When this process could
// not set the setgid bit again (not root and not in DST's group, where
// chmod clears it), DST is left as mkdir made it.
func (w *Writer) narrowNewRoot() error {
	var st unix.Stat_t
	if err := unix.Fstat(w.rootFd, &st); err != nil {
		return err
	}
	w.rootMode = st.Mode & 0o7777
	if w.rootMode&0o077 == 0 || (w.rootMode&unix.S_ISGID != 0 && !mayKeepSetgid(st.Gid)) {
		return nil
	}
	if err := unix.Fchmod(w.rootFd, w.rootMode&^0o077); err != nil {
		return err
	}
	w.rootNarrowed = true
	return nil
}

// chownNewRoot gives the new DST, when running as root, the owner that
// the policy gives a directory the backup has owned by root: the account's
// with --account (--chown's, a "*" map rule's), so that DST belongs to it
// as soon as it exists; Plan gives it the list's "." entry's owner before
// anything is written into it. Without a rule that maps root, DST stays
// root's, as mkdir made it.
func (w *Writer) chownNewRoot() error {
	if !w.chown {
		return nil
	}
	uid, gid, _ := w.policy.Resolve(&treewalk.Entry{Path: ".", Kind: treewalk.KindDir})
	if uid == 0 && gid == 0 {
		return nil
	}
	return unix.Fchown(w.rootFd, uid, gid)
}

// mayKeepSetgid reports whether chmod(2) by this process keeps the setgid
// bit of a file of group gid: it does for root and for a member of gid.
func mayKeepSetgid(gid uint32) bool {
	if os.Geteuid() == 0 || uint32(os.Getegid()) == gid {
		return true
	}
	groups, _ := os.Getgroups()
	for _, g := range groups {
		if uint32(g) == gid {
			return true
		}
	}
	return false
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
