package dest

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/treewalk"
)

// linkGroups maps each hardlink leader of entries (a file list) to the
// paths of its followers, in list order. A pure function.
func linkGroups(entries []treewalk.Entry) map[string][]string {
	groups := map[string][]string{}
	for i := range entries {
		if e := &entries[i]; e.IsHardlink() {
			groups[e.LinkTo] = append(groups[e.LinkTo], e.Path)
		}
	}
	return groups
}

// upToDateMember returns the first of members (the followers of leader
// e) that DST holds up to date for e (holds), with its Lstat; ok is
// false when none does. A new name for a file DST already has is then
// linked to it, as rsync -H does, and no data is sent.
func (w *Writer) upToDateMember(e *treewalk.Entry, members []string) (member string, st unix.Stat_t, ok bool) {
	for _, m := range members {
		dirfd, base, err := w.parent(m)
		if err != nil {
			continue
		}
		st, err = lstatAt(dirfd, base)
		ok = err == nil && w.holds(dirfd, base, &st, e)
		unix.Close(dirfd)
		if ok {
			return m, st, true
		}
	}
	return "", st, false
}

// holds reports whether st, what DST holds as base in dirfd, is e as
// a restore leaves it: a regular file passing the quick check (size and
// mtime; Plan corrects its other metadata), a symlink or special file
// with all its metadata (nodeUpToDate).
func (w *Writer) holds(dirfd int, base string, st *unix.Stat_t, e *treewalk.Entry) bool {
	if e.Kind == treewalk.KindFile {
		return w.quickMatch(st, e)
	}
	return w.nodeUpToDate(dirfd, base, st, e)
}

// quickMatch reports whether st, what DST holds at e's path, is a regular
// file that passes the quick check against e.
func (w *Writer) quickMatch(st *unix.Stat_t, e *treewalk.Entry) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == e.Size && w.sameMtime(st, e)
}

// sameMtime reports whether st has e's mtime: to the nanosecond, or to
// the second with WriterOptions.MtimeSeconds.
func (w *Writer) sameMtime(st *unix.Stat_t, e *treewalk.Entry) bool {
	if w.opts.MtimeSeconds {
		return st.Mtim.Sec == floorSec(e.MtimeNs)
	}
	return st.Mtim.Nano() == e.MtimeNs
}

// nodeUpToDate reports whether st, what DST holds as base in dirfd, is
// the symlink or special file e with its target or device number, mode
// (not a symlink's), owner (as root), mtime and extended metadata, so
// that Finish leaves it alone.
func (w *Writer) nodeUpToDate(dirfd int, base string, st *unix.Stat_t, e *treewalk.Entry) bool {
	uid, gid, mode := w.policy.Resolve(e)
	if st.Mode&unix.S_IFMT != kindMode(e.Kind) || !w.sameMtime(st, e) || w.chown && (int(st.Uid) != uid || int(st.Gid) != gid) {
		return false
	}
	switch e.Kind {
	case treewalk.KindSymlink:
		if target, err := treewalk.ReadlinkAt(dirfd, base); err != nil || target != e.LinkTarget {
			return false
		}
	case treewalk.KindFifo, treewalk.KindCharDev, treewalk.KindBlkDev:
		if uint64(st.Rdev) != e.Rdev || st.Mode&07777 != mode {
			return false
		}
	default:
		return false
	}
	ok, _ := w.xattrsMatch(pathTarget(dirfd, base), e)
	return ok
}

// fixMember gives member, a follower of e that DST holds up to date, e's
// owner, mode and extended metadata (they are the group's inode's).
func (w *Writer) fixMember(member string, st *unix.Stat_t, e *treewalk.Entry) error {
	dirfd, base, err := w.parent(member)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	if err := w.fixMeta(dirfd, base, st, e); err != nil {
		return fmt.Errorf("%s: %w", member, err)
	}
	return nil
}

// linkLeader makes leader e's name on DST a link to the inode of one of
// members, its followers, that DST holds up to date (upToDateMember),
// when DST does not hold e's own name up to date (for a file: Plan sent
// no data for it), under a temporary name then renamed over whatever is
// there; linked says it did. Not a leader, or no such follower: nothing
// is done.
func (w *Writer) linkLeader(cur *dirCursor, e *treewalk.Entry, members []string) (linked bool, err error) {
	if len(members) == 0 {
		return false, nil
	}
	dirfd, base, err := cur.parent(e.Path)
	if err != nil {
		return false, err
	}
	if st, err := lstatAt(dirfd, base); err == nil && w.holds(dirfd, base, &st, e) {
		return false, nil
	}
	member, _, ok := w.upToDateMember(e, members)
	if !ok {
		return false, nil
	}
	mdir, mbase, err := w.parent(member)
	if err != nil {
		return false, err
	}
	defer unix.Close(mdir)
	return true, w.linkInto(mdir, mbase, dirfd, base, member)
}

// linkInto links the entry mbase of directory mdir (named member in
// errors) as base in dirfd, through a temporary name renamed over
// whatever is there. linkat(2) without AT_SYMLINK_FOLLOW links a symlink
// itself, not its target.
func (w *Writer) linkInto(mdir int, mbase string, dirfd int, base, member string) error {
	tmp := tempName(base)
	unix.Unlinkat(dirfd, tmp, 0)
	if err := unix.Linkat(mdir, mbase, dirfd, tmp, 0); err != nil {
		return fmt.Errorf("hardlink to %s: %w", member, err)
	}
	if err := w.renameReplacing(dirfd, tmp, base); err != nil {
		unix.Unlinkat(dirfd, tmp, 0)
		return err
	}
	return nil
}
