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

// WriteItem implements transfer.ItemWriter: a whole file is written to an
// unnamed temporary file (O_TMPFILE) in its directory, or where the file
// system has none, or the file replaces one DST has, to its temporary
// name; it gets its metadata on the descriptor and only then its final
// name (linkat, which fails rather than replace anything, or rename). A
// block of a split file is written at its offset into the file's prepared
// temporary file (Commit puts it in place). On error the temporary file of
// a whole file is removed. A delta item is written the same way: r yields
// the rebuilt data, and fails rather than end if it does not match the
// sender's hash, so a bad delta never reaches the final name.
func (w *Writer) WriteItem(ctx context.Context, it *transfer.Item, r io.Reader) error {
	dir, base := splitPath(it.Entry.Path)
	d, err := w.dirs.get(w, dir)
	if err != nil {
		return err
	}
	defer w.dirs.release(d)
	if it.Split {
		return w.writeBlock(d.fd, base, it, r)
	}
	return w.writeWhole(d, base, it, r)
}

// writeBlock writes a block of a split file into its temporary file.
func (w *Writer) writeBlock(dirfd int, base string, it *transfer.Item, r io.Reader) error {
	tmp := tempName(base)
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ENOENT {
			return fmt.Errorf("block at %d: %w", it.Offset, transfer.ErrSplitGone)
		}
		return fmt.Errorf("open temporary file: %w", err)
	}
	err = w.copyData(fdFile(fd), it, r)
	if cerr := unix.Close(fd); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	if err != nil && !errors.Is(err, transfer.ErrDeltaFailed) {
		// A split file with a failed block cannot be completed in this
		// run (a failed delta block is resent whole into it): its
		// temporary file goes now, so that a full disk gets its space
		// back for the next files.
		unix.Unlinkat(dirfd, tmp, 0)
	}
	return err
}

// writeWhole writes a whole file and puts it in place.
func (w *Writer) writeWhole(d *cachedDir, base string, it *transfer.Item, r io.Reader) error {
	tmp := tempName(base)
	// A delta's basis is the file at base: the new file replaces it.
	ft, err := w.createTemp(d, tmp, it.Delta == nil, w.createMode(d, &it.Entry))
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	err = w.copyData(fdFile(ft.fd), it, r)
	if err == nil {
		// A file just made has no xattrs, unless its directory's
		// default ACL gave it an access ACL.
		err = w.setMeta(ft.fd, &it.Entry, !ft.fresh || d.defaultACL, !ft.modeSet)
	}
	if err == nil && ft.unnamed {
		m := w.tmpLink.Load()
		if err = linkTmpfile(ft.fd, d.fd, base, m); err == unix.EEXIST {
			// DST has base: the file takes its temporary name (a
			// killed run's is replaced), and the rename below
			// replaces base.
			if err = linkTmpfile(ft.fd, d.fd, tmp, m); err == unix.EEXIST {
				unix.Unlinkat(d.fd, tmp, 0)
				err = linkTmpfile(ft.fd, d.fd, tmp, m)
			}
			if err == nil {
				ft.unnamed = false
			} else {
				err = fmt.Errorf("link under its temporary name: %w", err)
			}
		} else if err != nil {
			err = fmt.Errorf("link into place: %w", err)
		} else {
			ft.placed = true
		}
	}
	if cerr := unix.Close(ft.fd); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
		if ft.placed { // the data may not all be there: the name goes
			unix.Unlinkat(d.fd, base, 0)
		}
	}
	if err == nil && !ft.placed {
		if err = w.renameReplacing(d.fd, tmp, base); err != nil {
			err = fmt.Errorf("rename into place: %w", err)
		}
	}
	if err != nil && !ft.unnamed {
		unix.Unlinkat(d.fd, tmp, 0)
	}
	return err
}

// tempFile is the temporary file of a whole file being written.
type tempFile struct {
	fd      int
	unnamed bool // an O_TMPFILE file, not linked yet
	fresh   bool // made by this call: it has no xattrs of its own
	placed  bool // linked under its final name
	modeSet bool // made with its final mode
}

// createMode returns the mode an unnamed temporary file for e in d can be
// made with so that it needs no chmod, or 0 if it needs one: the umask
// is known and takes nothing from e's mode, no default ACL of d replaces
// the umask and no ACL of e rewrites the group bits, and the mode has no
// setuid or setgid bit (a chown as root clears them). An unnamed file is
// seen by no one before it has its metadata; a named one is made 0600.
func (w *Writer) createMode(d *cachedDir, e *treewalk.Entry) uint32 {
	umask, ok := w.umaskBits()
	if !ok || d.defaultACL || !w.opts.NoACLs && len(e.ACL) > 0 {
		return 0
	}
	_, _, mode := w.policy.Resolve(e)
	if mode&umask != 0 || mode&0o6000 != 0 || mode == 0 {
		return 0
	}
	return mode
}

// createTemp makes the temporary file of a whole file in d: unnamed
// (O_TMPFILE) when unnamed is asked, the file system supports it and the
// Writer can link such files, with mode when it is not 0 (see
// createMode), else 0600 under its temporary name tmp (created
// exclusively, or truncated when a killed run left it).
func (w *Writer) createTemp(d *cachedDir, tmp string, unnamed bool, mode uint32) (tempFile, error) {
	if m := w.tmpLink.Load(); unnamed && !d.noTmpfile.Load() && m != linkNone {
		perm := uint32(0o600)
		if m == linkUnknown {
			mode = 0 // the first is named at once (below): 0600
		} else if mode != 0 {
			perm = mode
		}
		fd, err := unix.Openat(d.fd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, perm)
		switch {
		case err == nil && m != linkUnknown:
			return tempFile{fd: fd, unnamed: true, fresh: true, modeSet: mode != 0}, nil
		case err == nil:
			// The first one: which way of linking it works here is
			// found by giving it its temporary name.
			unix.Unlinkat(d.fd, tmp, 0)
			m := probeTmpfileLink(fd, d.fd, tmp)
			if m != linkUnknown {
				w.tmpLink.Store(m)
			}
			if m != linkNone && m != linkUnknown {
				return tempFile{fd: fd, fresh: true}, nil
			}
			unix.Close(fd)
		case err == unix.EOPNOTSUPP || err == unix.EISDIR || err == unix.EINVAL:
			d.noTmpfile.Store(true)
		}
	}
	flags := unix.O_WRONLY | unix.O_CREAT | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(d.fd, tmp, flags|unix.O_EXCL, 0o600)
	if err == nil {
		return tempFile{fd: fd, fresh: true}, nil
	}
	if err != unix.EEXIST {
		return tempFile{fd: -1}, err
	}
	fd, err = unix.Openat(d.fd, tmp, flags|unix.O_TRUNC, 0o600)
	return tempFile{fd: fd}, err
}

func (w *Writer) copyData(f fdFile, it *transfer.Item, r io.Reader) error {
	bw := w.bufs.Get().(*bufio.Writer)
	defer w.bufs.Put(bw)
	var dst io.Writer = f
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
		if err := unix.Ftruncate(int(f), it.Entry.Size); err != nil { // a trailing hole
			return fmt.Errorf("set size: %w", err)
		}
	}
	return nil
}

// fdFile is the descriptor of a regular file being written, written with
// plain system calls: unlike an *os.File it costs no fcntl when made and
// no attempt to register it with Go's poller, and it has no ReadFrom,
// through which bufio's ReadFrom would reach os.File.ReadFrom's generic
// path and its fresh copy buffer per call (a GC cost per small file).
type fdFile int

// Write implements io.Writer; it writes all of p or fails.
func (f fdFile) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k, err := unix.Write(int(f), p[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if k == 0 {
			return n, io.ErrShortWrite
		}
		n += k
	}
	return n, nil
}

// WriteAt implements io.WriterAt; it writes all of p at off or fails.
func (f fdFile) WriteAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		k, err := unix.Pwrite(int(f), p[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if k == 0 {
			return n, io.ErrShortWrite
		}
		n += k
	}
	return n, nil
}

// Commit implements transfer.Sink: the split file e, all of whose blocks
// have been written, gets its metadata and is renamed into place.
func (w *Writer) Commit(ctx context.Context, e *treewalk.Entry) error {
	dir, base := splitPath(e.Path)
	d, err := w.dirs.get(w, dir)
	if err != nil {
		return err
	}
	defer w.dirs.release(d)
	dirfd := d.fd
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
