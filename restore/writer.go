package restore

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
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
	Owner OwnerOptions `json:"owner"`
	// BlockSizeBytes: files larger than this are split into blocks of this
	// size that may arrive on different streams; 0 means 16 MiB.
	BlockSizeBytes int64 `json:"block_size"`
	// WriteBufferBytes is the buffer between the network and each file
	// write; 0 means 1 MiB.
	WriteBufferBytes int `json:"write_buffer"`
	// Force deletes a non-empty directory that is in the way of a file or
	// symlink (rsync's --force); without it that entry fails with
	// ErrNonEmptyDir.
	Force bool `json:"force,omitempty"`
	// Delta makes Plan compute the signatures of the destination's copies
	// of needed files, so that they can be sent as deltas (the raw method
	// over a network sets it). Off: every needed file is sent whole.
	Delta bool `json:"delta,omitempty"`
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
}

// NewWriter creates dst if missing (mode 0700 until Finish gives it its
// final mode) and opens it. The caller closes the Writer.
func NewWriter(dst string, o WriterOptions) (*Writer, error) {
	o.applyDefaults()
	policy, err := NewOwnerPolicy(o.Owner, SystemIDs())
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return nil, fmt.Errorf("create destination %s: %w", dst, err)
	}
	fd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open destination %s: %w", dst, err)
	}
	w := &Writer{dst: dst, rootFd: fd, opts: o, policy: policy, chown: os.Geteuid() == 0}
	w.bufs.New = func() any { return bufio.NewWriterSize(nil, o.WriteBufferBytes) }
	return w, nil
}

// NewSink is transfer.ServerConfig.NewSink for a push: it decodes the
// client's WriterOptions from opts and opens a Writer on dst.
func NewSink(ctx context.Context, dst string, opts json.RawMessage) (transfer.Sink, error) {
	var o WriterOptions
	if len(opts) > 0 {
		if err := json.Unmarshal(opts, &o); err != nil {
			return nil, fmt.Errorf("receiver options: %w", err)
		}
	}
	return NewWriter(dst, o)
}

// Close releases the destination's descriptor.
func (w *Writer) Close() error { return unix.Close(w.rootFd) }

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

// applyMeta sets owner, mode and mtime on the open descriptor fd, in that
// order (chown clears setuid bits, so chmod comes after it).
func (w *Writer) applyMeta(fd int, e *treewalk.Entry) error {
	uid, gid, mode := w.policy.Resolve(e)
	if w.chown {
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return fmt.Errorf("chown %d:%d: %w", uid, gid, err)
		}
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return fmt.Errorf("chmod %04o: %w", mode, err)
	}
	if err := futimens(fd, e.MtimeNs); err != nil {
		return fmt.Errorf("set mtime: %w", err)
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
			return fmt.Errorf("block at %d: temporary file is gone (was the destination changed?)", it.Offset)
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
	if err != nil && !it.Split {
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
	if it.Split {
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
	return err
}

// prepareSplit creates (or truncates) the temporary file of a file that
// will arrive in blocks, at its full size.
func (w *Writer) prepareSplit(dirfd int, base string, size int64) error {
	fd, err := unix.Openat(dirfd, tempName(base), unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	err = unix.Ftruncate(fd, size)
	unix.Close(fd)
	return err
}

func octal(m uint32) string { return "0" + strconv.FormatUint(uint64(m), 8) }
