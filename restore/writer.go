package restore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/transfer"
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

// WriterOptions configure a Writer. The zero value is valid: owners mapped
// by name, 16 MiB blocks, 1 MiB write buffers.
type WriterOptions struct {
	// Owner is the ownership and permission policy (--numeric-ids,
	// --chown, --usermap, --groupmap, --chmod, --keep-setid).
	Owner OwnerOptions
	// BlockSizeBytes: files larger than this are split into blocks of this
	// size that may arrive on different streams; 0 means 16 MiB.
	BlockSizeBytes int64
	// WriteBufferBytes is the buffer between the network and each file
	// write; 0 means 1 MiB.
	WriteBufferBytes int
	// Force deletes a non-empty directory that is in the way of a file or
	// symlink (rsync's --force); without it that entry fails with
	// ErrNonEmptyDir.
	Force bool
	// Delta makes Plan compute the signatures of the destination's copies
	// of needed files, so that they can be sent as deltas (the raw method
	// over a network sets it). Off: every needed file is sent whole.
	Delta bool

	// Selection (--delete, --dry-run, --itemize-changes).
	//
	// DryRun opens DST only to compare it with a file list (Itemize):
	// nothing is created, written or deleted, and a missing DST reads as
	// empty. Plan, WriteItem, Commit, Finish and Delete must not be
	// called.
	DryRun bool
	// Roots are the restored scope for Delete and Itemize: the file-list
	// paths of the SRCs ("." for a whole tree restored as DST). Only below
	// those that the list has as directories is anything deleted.
	Roots []string
	// Filters are the include/exclude rules of the restore, in short form
	// ("+ PATTERN", "- PATTERN"): an entry of DST that they exclude is
	// protected from Delete, as rsync does without --delete-excluded.
	Filters []string

	// Extended metadata (rsync's -X, -A, -S; all on by default here).

	// NoXattrs (--no-xattrs) leaves extended attributes alone: the
	// source's are not set, and those DST has are kept.
	NoXattrs bool
	// NoACLs (--no-acls) likewise for POSIX ACLs.
	NoACLs bool
	// NoSparse (--no-sparse) writes the zeros of sparse files instead of
	// leaving holes.
	NoSparse bool
	// NoSpecials (--no-specials) and NoDevices (--no-devices) leave fifos,
	// and character and block devices, out: Finish does not create them,
	// and whatever DST holds there is left alone.
	NoSpecials bool
	NoDevices  bool
}

func (o *WriterOptions) applyDefaults() {
	if o.BlockSizeBytes <= 0 {
		o.BlockSizeBytes = DefaultBlockSize // spreads big files over streams, bounds one item's time
	}
	if o.WriteBufferBytes <= 0 {
		o.WriteBufferBytes = 1 << 20 // few syscalls, still small times --jobs
	}
}

// DefaultBlockSize is the default --block-size: 16 MiB.
const DefaultBlockSize = 16 << 20

// Writer is the safe writer: the only code that writes into a destination
// tree, for every method. It resolves every path beneath the destination
// without following symlinks, writes each file to a temporary name in its
// directory, sets owner, mode and mtime on the open descriptor, then renames
// it into place, so a file never appears under its final name half-written
// or with the wrong permissions. It is safe for concurrent use; several
// Writers (in several processes) may work on one destination, as the
// streams of a push do.
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
}

// NewWriter creates dst if missing (mode 0700 until Finish gives it its
// final mode) and opens it; with o.DryRun it only opens dst if it exists.
// Errors: bad owner options or filters, a dst that cannot be made or
// opened. The caller closes the Writer.
func NewWriter(dst string, o WriterOptions) (*Writer, error) {
	o.applyDefaults()
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
func (w *Writer) applyMeta(fd int, e *treewalk.Entry) error {
	uid, gid, mode := w.policy.Resolve(e)
	if w.chown {
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return fmt.Errorf("chown %d:%d: %w", uid, gid, err)
		}
	}
	err := w.syncMeta(fdTarget(fd), e, func() error {
		if err := unix.Fchmod(fd, mode); err != nil {
			return fmt.Errorf("chmod %04o: %w", mode, err)
		}
		return nil
	})
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

// OpenBasis implements transfer.BasisOpener: it opens the destination's
// current copy of it's file, the basis of a delta, without following a
// symlink anywhere in its path; it must still be a regular file of the size
// its signature was made from. The caller closes it.
func (w *Writer) OpenBasis(ctx context.Context, it *transfer.Item) (transfer.Basis, error) {
	if it.Delta == nil {
		return nil, fmt.Errorf("open basis: not a delta item")
	}
	dirfd, base, err := w.parent(it.Entry.Path)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dirfd)
	return openBasisAt(dirfd, base, it.Delta.FileSizeBytes)
}

// openBasisAt opens the regular file base in dirfd, not following a
// symlink, and checks that it has size bytes.
func openBasisAt(dirfd int, base string, size int64) (*os.File, error) {
	fd, err := unix.Openat(dirfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != size {
		unix.Close(fd)
		return nil, fmt.Errorf("basis changed: now a %d-byte %s, was a %d-byte file", st.Size, fileType(st.Mode), size)
	}
	return os.NewFile(uintptr(fd), base), nil
}

// WriteItem implements transfer.ItemWriter: a whole file goes to its
// temporary name, gets its metadata and is renamed into place; a block of a
// split file is written at its offset into the file's prepared temporary
// file (Commit puts it in place). On error the temporary file of a whole
// file is removed. A delta item is written the same way: r yields the
// rebuilt data, and fails rather than end if it does not match the
// sender's hash, so a bad delta never reaches the final name.
func (w *Writer) WriteItem(ctx context.Context, it *transfer.Item, r io.Reader) error {
	dirfd, base, err := w.parent(it.Entry.Path)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	tmp := tempName(base)
	flags := unix.O_WRONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if !it.Split {
		flags |= unix.O_CREAT | unix.O_TRUNC
	}
	fd, err := unix.Openat(dirfd, tmp, flags, 0o600)
	if err != nil {
		if it.Split && err == unix.ENOENT {
			return fmt.Errorf("block at %d: %w", it.Offset, transfer.ErrSplitGone)
		}
		return fmt.Errorf("create temporary file: %w", err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	err = w.copyData(f, it, r)
	if err == nil && !it.Split {
		err = w.applyMeta(fd, &it.Entry)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	if err == nil && !it.Split {
		if err = w.renameReplacing(dirfd, tmp, base); err != nil {
			err = fmt.Errorf("rename into place: %w", err)
		}
	}
	if err != nil && (!it.Split || !errors.Is(err, transfer.ErrDeltaFailed)) {
		// A split file with a failed block cannot be completed in this
		// run (a failed delta block is resent whole into it): its
		// temporary file goes now, so that a full disk gets its space
		// back for the next files.
		unix.Unlinkat(dirfd, tmp, 0)
	}
	return err
}

func (w *Writer) copyData(f *os.File, it *transfer.Item, r io.Reader) error {
	bw := w.bufs.Get().(*bufio.Writer)
	defer w.bufs.Put(bw)
	// writerOnly hides *os.File's ReadFrom: through it, bufio's ReadFrom
	// would hand each file to os.File.ReadFrom, whose generic path
	// allocates a fresh copy buffer per call (a GC cost per small file).
	var dst io.Writer = writerOnly{f}
	sparse := it.Entry.Sparse && !w.opts.NoSparse
	switch {
	case sparse:
		dst = &sparseWriter{f: f, off: it.Offset, punch: it.Split}
	case it.Split:
		dst = io.NewOffsetWriter(f, it.Offset)
	}
	bw.Reset(dst)
	n, err := io.Copy(bw, r)
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	if err != nil {
		return err
	}
	if n != it.Length {
		return fmt.Errorf("%w: got %d bytes, expected %d", transfer.ErrSizeMismatch, n, it.Length)
	}
	if sparse && !it.Split {
		if err := f.Truncate(it.Entry.Size); err != nil { // a trailing hole
			return fmt.Errorf("set size: %w", err)
		}
	}
	return nil
}

// writerOnly is an io.Writer with no other methods (no io.ReaderFrom).
type writerOnly struct{ io.Writer }

// Commit implements transfer.Sink: the split file e, all of whose blocks
// have been written, gets its metadata and is renamed into place.
func (w *Writer) Commit(ctx context.Context, e *treewalk.Entry) error {
	dirfd, base, err := w.parent(e.Path)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	tmp := tempName(base)
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open temporary file: %w", err)
	}
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	if err == nil && st.Size != e.Size {
		err = fmt.Errorf("%w: temporary file has %d bytes, expected %d", transfer.ErrSizeMismatch, st.Size, e.Size)
	}
	if err == nil {
		err = w.applyMeta(fd, e)
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err == nil {
		if err = w.renameReplacing(dirfd, tmp, base); err != nil {
			err = fmt.Errorf("rename into place: %w", err)
		}
	}
	if err != nil {
		unix.Unlinkat(dirfd, tmp, 0)
	}
	w.splitMu.Lock()
	delete(w.splitTemps, e.Path)
	w.splitMu.Unlock()
	return err
}

// prepareSplit creates (or truncates) the temporary file of the file rel
// (base in dirfd) that will arrive in blocks, at its full size. Close
// removes it unless Commit put it in place.
func (w *Writer) prepareSplit(dirfd int, rel, base string, size int64) error {
	fd, err := unix.Openat(dirfd, tempName(base), unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	w.splitMu.Lock()
	if w.splitTemps == nil {
		w.splitTemps = map[string]bool{}
	}
	w.splitTemps[rel] = true
	w.splitMu.Unlock()
	err = unix.Ftruncate(fd, size)
	unix.Close(fd)
	return err
}

// removeSplitTemps removes the temporary files of split files that were
// prepared but not committed: an interrupted run leaves none behind (they
// would be truncated and rewritten by a rerun anyway).
func (w *Writer) removeSplitTemps() {
	w.splitMu.Lock()
	left := w.splitTemps
	w.splitTemps = nil
	w.splitMu.Unlock()
	for rel := range left {
		if dirfd, base, err := w.parent(rel); err == nil {
			unix.Unlinkat(dirfd, tempName(base), 0)
			unix.Close(dirfd)
		}
	}
}

func octal(m uint32) string { return "0" + strconv.FormatUint(uint64(m), 8) }
