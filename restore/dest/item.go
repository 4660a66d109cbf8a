package dest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// The data path of the Writer, called by every stream at once: whole
// files and blocks of split files (WriteItem), the completion of split
// files (Commit), and the basis of a delta (OpenBasis).

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
