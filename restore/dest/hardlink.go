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
// e, a regular file with data) that DST holds as a regular file passing
// the quick check against e (same size, same mtime to the nanosecond),
// with its Lstat; ok is false when none does. A new name for a file DST
// already has is then linked to it, as rsync -H does, and no data is
// sent.
func (w *Writer) upToDateMember(e *treewalk.Entry, members []string) (member string, st unix.Stat_t, ok bool) {
	for _, m := range members {
		dirfd, base, err := w.parent(m)
		if err != nil {
			continue
		}
		st, err = lstatAt(dirfd, base)
		unix.Close(dirfd)
		if err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == e.Size && st.Mtim.Nano() == e.MtimeNs {
			return m, st, true
		}
	}
	return "", st, false
}

// quickMatch reports whether st, what DST holds at e's path, is a regular
// file that passes the quick check against e.
func quickMatch(st *unix.Stat_t, e *treewalk.Entry) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == e.Size && st.Mtim.Nano() == e.MtimeNs
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

// linkLeader makes leader e's name on DST a link to the inode of member, a
// follower that DST holds up to date, when DST's name for e does not pass
// the quick check itself (Plan sent no data for it): under a temporary
// name, then renamed over whatever is there.
func (w *Writer) linkLeader(cur *dirCursor, e *treewalk.Entry, members []string) error {
	dirfd, base, err := cur.parent(e.Path)
	if err != nil {
		return err
	}
	if st, err := lstatAt(dirfd, base); err == nil && quickMatch(&st, e) {
		return nil
	}
	member, _, ok := w.upToDateMember(e, members)
	if !ok {
		return nil // its data failed: reported by the stream
	}
	mdir, mbase, err := w.parent(member)
	if err != nil {
		return err
	}
	defer unix.Close(mdir)
	return w.linkInto(mdir, mbase, dirfd, base, member)
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
