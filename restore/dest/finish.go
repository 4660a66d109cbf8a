package dest

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/treewalk"
)

// settleRoot settles the metadata of a DST that this Writer created
// before any file is written into it: with a "." entry in entries (the
// whole file list), DST gets that entry's owner and interim mode (ownRoot);
// without one (several SRCs, -R, --files-from, a file SRC), it gets back
// the mode mkdir gave it (NewWriter's rootMode: 0777 less the umask, or
// what the parent's default ACL makes, with the parent's setgid bit), as
// rsync leaves it. Plan calls it before any file is written, so that an
// interrupted run leaves no owner-only or root-owned DST behind (a rerun,
// which finds DST there, would not change it); Finish calls it too, for
// the methods without a Plan. It acts once. Not safe for concurrent use.
func (w *Writer) settleRoot(entries []treewalk.Entry) error {
	if !w.created || w.rootSettled {
		return nil
	}
	if i := slices.IndexFunc(entries, func(e treewalk.Entry) bool { return e.Path == "." }); i >= 0 {
		return w.ownRoot(&entries[i])
	}
	w.rootSettled = true
	if !w.rootNarrowed {
		return nil
	}
	if err := unix.Fchmod(w.rootFd, w.rootMode); err != nil {
		return fmt.Errorf("set the mode of the destination: %w", err)
	}
	return nil
}

// ownRoot gives a DST that this Writer created the owner and interim mode
// of the list's "." entry e (see mkdirOwned), once; Finish sets its final
// mode and mtime. A DST that existed is left alone until Finish.
func (w *Writer) ownRoot(e *treewalk.Entry) error {
	if !w.created || w.rootSettled {
		return nil
	}
	w.rootSettled = true
	if err := w.ownDir(w.rootFd, e, false); err != nil {
		return fmt.Errorf("set the owner and mode of the destination: %w", err)
	}
	return nil
}

// Finish implements transfer.Sink. First, in list order, it creates
// symlinks, special files (unless NoSpecials, NoDevices) and hardlinks of
// every kind (each under a temporary name, with its metadata, then renamed
// over whatever is there; a follower is linked to its leader with
// linkat(2), which links a symlink itself), and links a group's leader
// that DST does not hold up to date to the follower DST already holds up
// to date (see upToDateMember: a file's data is not sent); then, deepest first,
// it removes stale temporary files from each directory and sets the
// directory's owner, mode and mtime, so that writing the children cannot
// disturb them afterwards.
func (w *Writer) Finish(ctx context.Context, entries []treewalk.Entry) ([]*treewalk.PathError, error) {
	groups := linkGroups(entries)
	errs, err := w.pass(ctx, entries, func(cur *dirCursor, _ int, e *treewalk.Entry) error {
		switch {
		case e.Kind == treewalk.KindFifo && w.opts.NoSpecials,
			(e.Kind == treewalk.KindCharDev || e.Kind == treewalk.KindBlkDev) && w.opts.NoDevices:
		case e.IsHardlink():
			return w.hardlink(cur, e)
		case e.Kind == treewalk.KindDir:
		default:
			if linked, err := w.linkLeader(cur, e, groups[e.Path]); linked || err != nil {
				return err
			}
			switch e.Kind {
			case treewalk.KindSymlink:
				return w.symlink(cur, e)
			case treewalk.KindFifo, treewalk.KindCharDev, treewalk.KindBlkDev:
				return w.special(cur, e)
			}
		}
		return nil
	})
	if err != nil {
		return errs, err
	}
	fail := func(e *treewalk.Entry, err error) {
		errs = append(errs, &treewalk.PathError{Path: e.Path, Err: err})
	}
	if err := w.settleRoot(entries); err != nil {
		fail(&treewalk.Entry{Path: "."}, err)
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if e := &entries[i]; e.Kind == treewalk.KindDir {
			if err := w.finishDir(e); err != nil {
				fail(e, err)
			}
		}
	}
	return errs, nil
}

func (w *Writer) symlink(cur *dirCursor, e *treewalk.Entry) error {
	dirfd, base, err := cur.parent(e.Path)
	if err != nil {
		return err
	}
	uid, gid, _ := w.policy.Resolve(e)
	if st, err := lstatAt(dirfd, base); err == nil && w.nodeUpToDate(dirfd, base, &st, e) {
		return nil
	}
	tmp := tempName(base)
	unix.Unlinkat(dirfd, tmp, 0)
	if err := unix.Symlinkat(e.LinkTarget, dirfd, tmp); err != nil {
		return fmt.Errorf("create symlink: %w", err)
	}
	return w.placeNode(dirfd, tmp, base, e, uid, gid, 0)
}

// placeNode gives a freshly made node (symlink or special file) its owner,
// ACLs, mode (not a symlink's), xattrs and mtime without following it, in
// applyMeta's order, then renames it into place.
func (w *Writer) placeNode(dirfd int, tmp, base string, e *treewalk.Entry, uid, gid int, mode uint32) error {
	err := func() error {
		if w.chown {
			if err := unix.Fchownat(dirfd, tmp, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return fmt.Errorf("chown %d:%d: %w", uid, gid, err)
			}
		}
		// A new node may inherit its directory's default ACL: listed, so
		// that it is removed if the source has none.
		err := w.syncMeta(pathTarget(dirfd, tmp), e, func() error {
			if e.Kind == treewalk.KindSymlink {
				return nil // a symlink's mode is not its own
			}
			if err := unix.Fchmodat(dirfd, tmp, mode, 0); err != nil {
				return fmt.Errorf("chmod %s: %w", octal(mode), err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := lutimensAt(dirfd, tmp, e.MtimeNs); err != nil {
			return fmt.Errorf("set mtime: %w", err)
		}
		return w.renameReplacing(dirfd, tmp, base)
	}()
	if err != nil {
		unix.Unlinkat(dirfd, tmp, 0)
	}
	return err
}

func (w *Writer) special(cur *dirCursor, e *treewalk.Entry) error {
	dirfd, base, err := cur.parent(e.Path)
	if err != nil {
		return err
	}
	uid, gid, mode := w.policy.Resolve(e)
	typ := kindMode(e.Kind) // a fifo or a device: special is called for no other kind
	if typ != unix.S_IFIFO && !w.chown {
		return errors.New("device files can only be created by root")
	}
	if st, err := lstatAt(dirfd, base); err == nil && w.nodeUpToDate(dirfd, base, &st, e) {
		return nil
	}
	tmp := tempName(base)
	unix.Unlinkat(dirfd, tmp, 0)
	if err := unix.Mknodat(dirfd, tmp, typ|0o600, int(e.Rdev)); err != nil {
		return fmt.Errorf("create %s: %w", e.Kind, err)
	}
	return w.placeNode(dirfd, tmp, base, e, uid, gid, mode)
}

func (w *Writer) hardlink(cur *dirCursor, e *treewalk.Entry) error {
	ldir, lbase, err := w.parent(e.LinkTo)
	if err != nil {
		return err
	}
	defer unix.Close(ldir)
	lst, err := lstatAt(ldir, lbase)
	if err != nil {
		return fmt.Errorf("hardlink to %s: %w", e.LinkTo, err)
	}
	if lst.Mode&unix.S_IFMT != kindMode(e.Kind) {
		return fmt.Errorf("hardlink to %s: not a %s", e.LinkTo, e.Kind)
	}
	dirfd, base, err := cur.parent(e.Path)
	if err != nil {
		return err
	}
	if st, err := lstatAt(dirfd, base); err == nil && st.Dev == lst.Dev && st.Ino == lst.Ino {
		return nil // already linked
	}
	return w.linkInto(ldir, lbase, dirfd, base, e.LinkTo)
}

// finishDir sweeps stale temporary files out of the directory e, unless
// this Writer created it (a killed run's temporary files are only in
// directories that were there before this run), and sets its metadata.
func (w *Writer) finishDir(e *treewalk.Entry) error {
	fd, err := openDirBeneath(w.rootFd, e.Path)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if w.takeMade(e.Path) {
		return w.applyMeta(fd, e)
	}
	names, err := readDirNames(fd)
	if err != nil {
		return err
	}
	for _, n := range names {
		if isTempName(n) {
			if err := removeTempAt(fd, n); err != nil {
				return fmt.Errorf("remove stale temporary file %s: %w", n, err)
			}
		}
	}
	return w.applyMeta(fd, e)
}

// addMade records that this Writer created the directory rel (a path
// relative to DST). Safe for concurrent use.
func (w *Writer) addMade(rel string) {
	w.madeMu.Lock()
	if w.madeDirs == nil {
		w.madeDirs = map[string]struct{}{}
	}
	w.madeDirs[rel] = struct{}{}
	w.madeMu.Unlock()
}

// takeMade reports whether this Writer's Plan created the directory rel
// (DST itself is not among them) and forgets rel: it is asked once, as
// the directory is finished. Safe for concurrent use.
func (w *Writer) takeMade(rel string) bool {
	w.madeMu.Lock()
	defer w.madeMu.Unlock()
	_, ok := w.madeDirs[rel]
	delete(w.madeDirs, rel)
	return ok
}
