package dest

import (
	"context"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// Plan implements transfer.Sink. In list order it creates missing
// directories, each with its final owner and its interim mode (see
// mkdirOwned; anything else in the way, a planted symlink included, is
// replaced), runs rsync's quick check on regular files
// (same size and mtime to the nanosecond, or to the second with
// WriterOptions.MtimeSeconds: up to date, only its owner and
// mode are corrected), and prepares the temporary files of needed files
// larger than the block size. It returns the indices of the needed files
// and, with WriterOptions.Delta, the signatures of those that DST holds as
// a non-empty regular file (see signatures).
func (w *Writer) Plan(ctx context.Context, entries []treewalk.Entry) (transfer.PlanResult, error) {
	var res transfer.PlanResult
	if err := w.settleRoot(entries); err != nil {
		res.Errors = append(res.Errors, &treewalk.PathError{Path: ".", Err: err})
	}
	var bases []basisFile
	groups := linkGroups(entries)
	errs, err := w.pass(ctx, entries, func(cur *dirCursor, i int, e *treewalk.Entry) error {
		switch {
		case e.Kind == treewalk.KindDir && e.Path != ".":
			return w.mkdir(cur, e)
		case e.HasData():
			need, basisSize, err := w.check(cur, e, groups[e.Path])
			if need && err == nil {
				res.Need = append(res.Need, i)
				if basisSize > 0 && e.Size > 0 && w.opts.Delta {
					bases = append(bases, basisFile{i, basisSize})
				}
			}
			return err
		}
		return nil
	})
	res.Errors = append(res.Errors, errs...)
	if err != nil {
		return res, err
	}
	res.Signatures, err = w.signatures(ctx, entries, bases)
	return res, err
}

func (w *Writer) mkdir(cur *dirCursor, e *treewalk.Entry) error {
	if e.Path == "." {
		return w.ownRoot(e)
	}
	dirfd, base, err := cur.parent(e.Path)
	if err != nil {
		return err
	}
	err = w.mkdirOwned(dirfd, base, e)
	if err == nil {
		cur.markMade(e.Path)
		w.addMade(e.Path)
	}
	if err != unix.EEXIST {
		return err
	}
	st, err := lstatAt(dirfd, base)
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return nil
	}
	if err := removeAllAt(dirfd, base); err != nil {
		return fmt.Errorf("replace %s with a directory: %w", fileType(st.Mode), err)
	}
	if err := w.mkdirOwned(dirfd, base, e); err != nil {
		return err
	}
	w.addMade(e.Path)
	return nil
}

// mkdirOwned creates the directory base in dirfd (EEXIST when a name is
// there) with the owner the policy gives e from the start, and its interim
// mode (interimDirMode), so that a run interrupted before Finish leaves
// no directory owned by root, or by nobody the list names, in the
// account's tree: the account can use it, and no one else gets more
// access than the finished tree gives them. Its mtime is set by Finish.
//
// When the directory's owner is not the process's (a root restore of an
// account's tree), it is made under its temporary name (tempName), given
// its owner and mode there, and renamed into place without replacing
// anything (RENAME_NOREPLACE): even a process killed between the mkdir
// and the chown leaves no root-owned 0700 directory under a name of the
// tree, only a temporary one that the rerun's Plan or Finish removes.
func (w *Writer) mkdirOwned(dirfd int, base string, e *treewalk.Entry) error {
	if !w.chown {
		return w.mkdirAt(dirfd, base, e)
	}
	if uid, gid, _ := w.policy.Resolve(e); uid == os.Geteuid() && gid == os.Getegid() {
		return w.mkdirAt(dirfd, base, e)
	}
	tmp := tempName(base)
	err := w.mkdirAt(dirfd, tmp, e)
	if err == unix.EEXIST {
		// A killed run's: an empty directory or a temporary file.
		if err := removeTempAt(dirfd, tmp); err != nil {
			return fmt.Errorf("remove stale temporary %s: %w", tmp, err)
		}
		err = w.mkdirAt(dirfd, tmp, e)
	}
	if err != nil {
		return err
	}
	if err := unix.Renameat2(dirfd, tmp, dirfd, base, unix.RENAME_NOREPLACE); err != nil {
		unix.Unlinkat(dirfd, tmp, unix.AT_REMOVEDIR)
		return err // EEXIST: a name is there
	}
	return nil
}

// mkdirAt makes the directory name in dirfd with mode 0700, then gives it
// e's owner and interim mode (ownDir).
func (w *Writer) mkdirAt(dirfd int, name string, e *treewalk.Entry) error {
	if err := unix.Mkdirat(dirfd, name, 0o700); err != nil {
		return err
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the new directory: %w", err)
	}
	defer unix.Close(fd)
	return w.ownDir(fd, e, true)
}

// ownDir gives the directory fd e's owner (when running as root) and its
// interim mode. made says that fd was just made by mkdir(2) with mode
// 0700, which the chmod can then skip when it is already right.
func (w *Writer) ownDir(fd int, e *treewalk.Entry, made bool) error {
	uid, gid, mode := w.policy.Resolve(e)
	if w.chown {
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return fmt.Errorf("chown %d:%d: %w", uid, gid, err)
		}
	}
	interim := interimDirMode(mode)
	if umask, known := w.umaskBits(); made && interim == 0o700 && known && umask&0o700 == 0 {
		return nil
	}
	if err := unix.Fchmod(fd, interim); err != nil {
		return fmt.Errorf("chmod %04o: %w", interim, err)
	}
	return nil
}

// interimDirMode is the mode a directory has from its creation until
// Finish sets its final one (mode): the final mode with full access for
// its owner, who is the final owner already, so that this writer can fill
// it without root and an interrupted run leaves it readable by its owner.
// Group and others get what the final mode gives them and no more; the
// files written into it are not reachable under their final names before
// they are complete (unnamed or owner-only temporary files).
func interimDirMode(mode uint32) uint32 { return mode | 0o700 }

// check is the quick check of one regular file, the leader of the
// hardlink group of followers when there are any; it reports whether the
// file must be sent, the size of the regular file DST holds there (0 if
// none), and, for a large one, prepares its temporary file. A leader
// whose follower DST already holds up to date is not sent: Finish links
// it to that follower.
func (w *Writer) check(cur *dirCursor, e *treewalk.Entry, followers []string) (need bool, basisSize int64, err error) {
	dirfd, base, err := cur.parent(e.Path)
	if err != nil {
		return false, 0, err
	}
	var st unix.Stat_t
	if cur.inMade() {
		err = unix.ENOENT // a directory this Plan made holds nothing of the list yet
	} else {
		st, err = lstatAt(dirfd, base)
	}
	if err == nil && w.quickMatch(&st, e) {
		return false, 0, w.fixMeta(dirfd, base, &st, e)
	}
	if err != nil && err != unix.ENOENT {
		return false, 0, err
	}
	if m, mst, ok := w.upToDateMember(e, followers); ok {
		return false, 0, w.fixMember(m, &mst, e)
	}
	if err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
		basisSize = st.Size
	}
	if e.Size > w.opts.BlockSizeBytes {
		return true, basisSize, w.prepareSplit(dirfd, e.Path, base, e.Size)
	}
	return true, basisSize, nil
}

// fixMeta corrects the owner and mode of an up-to-date file.
func (w *Writer) fixMeta(dirfd int, base string, st *unix.Stat_t, e *treewalk.Entry) error {
	if w.hasMeta(st, e) {
		if ok, err := w.xattrsMatch(pathTarget(dirfd, base), e); err != nil || ok {
			return err
		}
	}
	fd, err := unix.Openat(dirfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return w.applyMeta(fd, e)
}

// hasMeta reports whether st already has the mode, and (when running as
// root) the owner and group, that the policy gives e.
func (w *Writer) hasMeta(st *unix.Stat_t, e *treewalk.Entry) bool {
	uid, gid, mode := w.policy.Resolve(e)
	return st.Mode&07777 == mode && (!w.chown || int(st.Uid) == uid && int(st.Gid) == gid)
}

func fileType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symlink"
	}
	return "special file"
}
