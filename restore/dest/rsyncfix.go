package dest

import (
	"context"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/treewalk"
)

// The rsync method's receiver (gokrazy/rsync) writes regular files and
// directories into DST itself, not through the Writer: every path it
// touches goes through an os.Root opened on DST, so nothing outside DST is
// written (a symlink leading out is refused by os.Root), and it replaces a
// non-directory where a directory belongs, or a non-file where a file
// belongs, instead of writing through it. What it leaves undone is done
// here, through the Writer's descriptor-based, symlink-proof operations:
// FixRsync gives each regular file its owner, full mode and nanosecond
// mtime, then Writer.Finish makes symlinks, special files and hardlinks and
// sets directory metadata.

// RsyncMakeDirs creates, before the rsync transfer, the directories of
// entries (the whole file list) that DST lacks, as Plan does: each with
// its final owner and interim mode (see mkdirOwned), and a DST this
// Writer created gets the "." entry's. gokrazy's receiver then finds them
// in place and only sets their mode and mtime, so an interrupted transfer
// leaves no directory owned by root that the list gives to someone else.
// It returns per-directory errors, and an error only when ctx ends.
func (w *Writer) RsyncMakeDirs(ctx context.Context, entries []treewalk.Entry) ([]*treewalk.PathError, error) {
	var errs []*treewalk.PathError
	if err := w.settleRoot(entries); err != nil {
		errs = append(errs, &treewalk.PathError{Path: ".", Err: err})
	}
	perrs, err := w.pass(ctx, entries, func(cur *dirCursor, _ int, e *treewalk.Entry) error {
		if e.Kind == treewalk.KindDir && e.Path != "." {
			return w.mkdir(cur, e)
		}
		return nil
	})
	return append(errs, perrs...), err
}

// ClearForRsync clears, before an rsync transfer, what would stop
// gokrazy/rsync's receiver, which ends its whole run at the first entry it
// cannot replace: for each entry that is not a directory where DST holds a
// non-empty directory, that directory is deleted with everything in it
// when the options say Force (rsync's --force), as the raw method's writer
// replaces it; without Force it is kept and the entry is returned as a
// per-entry error wrapping ErrNonEmptyDir, which the caller keeps out of
// the transfer and out of FixRsync and Finish. An empty directory in the
// way is removed, as the transfer or Finish would remove it. Nothing
// is followed: each directory is opened beneath DST without symlinks. The
// error is ctx's only.
func (w *Writer) ClearForRsync(ctx context.Context, entries []treewalk.Entry) ([]*treewalk.PathError, error) {
	return w.pass(ctx, entries, func(cur *dirCursor, _ int, e *treewalk.Entry) error {
		if e.Kind == treewalk.KindDir || e.Path == "." {
			return nil
		}
		dirfd, base, err := cur.parent(e.Path)
		if err != nil {
			return nil // no parent yet: nothing in the way
		}
		st, err := lstatAt(dirfd, base)
		if err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return nil
		}
		if err := unix.Unlinkat(dirfd, base, unix.AT_REMOVEDIR); err == nil || err == unix.ENOENT {
			return nil
		} else if err != unix.ENOTEMPTY && err != unix.EEXIST {
			return fmt.Errorf("replace the directory in the way: %w", err)
		}
		if !w.opts.Force {
			return ErrNonEmptyDir
		}
		if err := removeAllAt(dirfd, base); err != nil {
			return fmt.Errorf("replace the directory in the way (--force): %w", err)
		}
		return nil
	})
}

// RsyncQuickCheck counts the regular files that the rsync transfer is
// about to send (and their bytes): those that DST does not hold as a
// regular file of the same size and the same mtime to the second, which is
// what protocol 27 compares. It writes nothing; the error is ctx's only.
func (w *Writer) RsyncQuickCheck(ctx context.Context, entries []treewalk.Entry) (files int, bytes int64, err error) {
	_, err = w.pass(ctx, entries, func(cur *dirCursor, _ int, e *treewalk.Entry) error {
		if !e.HasData() {
			return nil
		}
		if dirfd, base, err := cur.parent(e.Path); err == nil {
			st, err := lstatAt(dirfd, base)
			if err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == e.Size && st.Mtim.Sec == floorSec(e.MtimeNs) {
				return nil
			}
		}
		files++
		bytes += e.Size
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return files, bytes, nil
}

// floorSec is ns in whole seconds, rounded down (as rsync sends times).
func floorSec(ns int64) int64 {
	s := ns / 1e9
	if ns%1e9 < 0 {
		s--
	}
	return s
}

// FixRsync completes the regular files that an rsync transfer placed in
// the destination: each file that has data (hardlink followers are made by
// Finish) is opened beneath the destination without following symlinks,
// checked to be a regular file of the listed size, and gets the owner and
// mode that the owner policy resolves and e's mtime to the nanosecond, on
// its descriptor. Files whose metadata is already right are left alone.
// It returns per-file errors (a file the transfer did not place, or placed
// with another size, is one) and an error only when ctx ends. Call Finish
// with the same entries afterwards. Not for concurrent use with other
// writes to the same files.
func (w *Writer) FixRsync(ctx context.Context, entries []treewalk.Entry) ([]*treewalk.PathError, error) {
	return w.pass(ctx, entries, func(cur *dirCursor, _ int, e *treewalk.Entry) error {
		if !e.HasData() {
			return nil
		}
		return w.fixPlaced(cur, e)
	})
}

// fixPlaced sets the metadata of one regular file placed by rsync.
func (w *Writer) fixPlaced(cur *dirCursor, e *treewalk.Entry) error {
	dirfd, base, err := cur.parent(e.Path)
	if err != nil {
		return err
	}
	fd, err := unix.Openat(dirfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("not restored by rsync: %w", err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("rsync left a %s here", fileType(st.Mode))
	}
	if st.Size != e.Size {
		return fmt.Errorf("rsync left %d bytes, the source has %d (did the source change during the restore?)", st.Size, e.Size)
	}
	if e.Sparse && !w.opts.NoSparse && st.Blocks*512 >= st.Size {
		// gokrazy writes every byte. Reopened for writing through the
		// descriptor (the same inode, whatever the path holds now).
		wfd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("reopen to punch holes: %w", err)
		}
		err = digHoles(wfd, st.Size)
		unix.Close(wfd)
		if err != nil {
			return err
		}
	}
	if st.Mtim.Nano() == e.MtimeNs && w.hasMeta(&st, e) {
		if ok, err := w.xattrsMatch(fdTarget(fd), e); err != nil || ok {
			return err
		}
	}
	return w.applyMeta(fd, e)
}
