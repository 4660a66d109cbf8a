package dest

import (
	"context"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/treewalk"
)

// Itemize does --dry-run and --itemize-changes on a whole list (sftp): it
// compares entries, the restore's file list, with DST and returns one line
// per change a restore would make, in rsync's --itemize-changes format
// (rsync(1), "--itemize-changes": "YXcstpoguax NAME", Y the update type,
// X the file type, then a letter per changed attribute, "+" for all of
// them on a new entry): first, with del, the deletions ("*deleting
// NAME", as Delete would make them), then the entries in list order.
// Directories' names end in "/", the root is "./", symlinks add
// " -> TARGET" and hardlinks of every kind " => LEADER" ("hL", "hS", "hD"
// for symlinks, fifos and devices, as "hf" for files). A leader DST
// lacks, or holds out of date, is listed "hf... LEADER => MEMBER" ("hL",
// "hS", "hD" likewise) when a follower of its group, MEMBER, is up to
// date on DST (a file by the quick check: it is linked to it, no data is
// sent), and MEMBER then has no line of its own unless its mode or owner
// differ. A hardlink follower is listed
// as rsync -H lists it (rsync's hlink.c, maybe_hard_link): "hf" and its
// own changed attributes (spaces when none) with " => LEADER" when it
// will be (re)linked, that is when DST's name is not already a link to
// the leader's inode, or, on a real run, when the leader gets a new inode
// (its data is sent); a follower already linked to the leader has no
// line on a real run, and on a dry run a line without " => LEADER" only
// when its attributes differ (as rsync -n, which compares it with the
// leader DST has now). Where DST holds a file's or symlink's place with a
// directory, the "*deleting" lines of the directory's contents (with
// Force) follow the other deletions, before the entries' lines, as rsync
// lists them before those of the directory they are in; without Force
// the entry has no line and is returned as a per-entry ErrNonEmptyDir
// (the restore would fail on it); see inTheWay.
// Nothing is written. The error is for cancellation only; an entry that
// cannot be looked at reads as missing.
func (w *Writer) Itemize(ctx context.Context, entries []treewalk.Entry, del bool) ([]string, []*treewalk.PathError, error) {
	var lines []string
	if del {
		x := &extras{w: w}
		if err := x.run(ctx, entries); err != nil {
			return nil, nil, err
		}
		for _, p := range x.deleted {
			lines = append(lines, "*deleting   "+p)
		}
	}
	changes, errs, err := w.NewItemizer().Lines(ctx, entries, nil)
	if err != nil {
		return nil, nil, err
	}
	return append(lines, changes...), errs, nil
}

// Itemizer is Itemize for a file list streamed in chunks: Lines gives
// each chunk's lines in turn, as Itemize gives the entries' lines of a
// whole list, remembering across chunks only what the lines of later
// hardlink followers depend on (per leader: whether it gets a new inode,
// which follower's inode it is linked to), so its memory grows with the
// hardlink groups, not with the tree. A leader is linked to a follower
// DST holds up to date only when that follower is in the leader's chunk,
// as Plan does chunk by chunk. Not safe for concurrent use.
type Itemizer struct {
	w *Writer
	// resent: the hardlink leaders, true once their line says that
	// they get a new inode on DST (a file's data is sent, another kind
	// is made again).
	resent map[string]bool
	// via: a leader DST lacks (or holds out of date) that will be linked
	// to a follower DST holds up to date, which is then itemized as the
	// source of the link, as rsync -H does.
	via map[string]string
}

// NewItemizer returns an Itemizer on w's DST.
func (w *Writer) NewItemizer() *Itemizer {
	return &Itemizer{w: w, resent: map[string]bool{}, via: map[string]string{}}
}

// Lines returns the change lines of entries, the next chunk of the list
// (leaders: the indices of its hardlink leaders, treewalk.Chunk's
// Leaders; the leaders of entries' followers count without it), in list
// order, and the entries a restore could not change (see Itemize); the
// "*deleting" lines of a directory in the way (with Force) come before
// the others, as in Itemize. The error is for cancellation only.
func (it *Itemizer) Lines(ctx context.Context, entries []treewalk.Entry, leaders []int) ([]string, []*treewalk.PathError, error) {
	w := it.w
	var lines []string
	var changes []string // the entries' lines, after all deletions
	groups := linkGroups(entries)
	for leader := range groups {
		if _, ok := it.resent[leader]; !ok {
			it.resent[leader] = false
		}
	}
	for _, i := range leaders {
		if _, ok := it.resent[entries[i].Path]; !ok {
			it.resent[entries[i].Path] = false
		}
	}
	resent, via := it.resent, it.via
	errs, err := w.pass(ctx, entries, func(cur *dirCursor, _ int, e *treewalk.Entry) error {
		way, err := w.inTheWay(cur, e)
		if err != nil {
			return err // the restore would fail on e: no line
		}
		lines = append(lines, way...) // with the deletions, as rsync lists them
		l := w.itemizeLinked(cur, e, groups, via)
		if l == "-" {
			l = w.itemize(cur, e, resent, via)
		}
		if _, leader := resent[e.Path]; leader && via[e.Path] == "" && l != "" && (l[0] == '>' || e.Kind != treewalk.KindFile) {
			resent[e.Path] = true
		}
		if l != "" {
			changes = append(changes, l)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return append(lines, changes...), errs, nil
}

// itemizeLinked returns the line of a hardlink leader that will be linked
// to a follower DST holds up to date (recorded in via), "" for that
// follower when its attributes match, or "-" when e is neither (itemize
// says).
func (w *Writer) itemizeLinked(cur *dirCursor, e *treewalk.Entry, groups map[string][]string, via map[string]string) string {
	typ := itemType(e.Kind)
	switch {
	case e.Kind != treewalk.KindDir && !e.IsHardlink() && len(groups[e.Path]) > 0:
		st, dirfd, base, ok := w.itemStat(cur, e)
		if ok && w.holds(dirfd, base, &st, e) {
			return "-"
		}
		m, mst, found := w.upToDateMember(e, groups[e.Path])
		if !found {
			return "-"
		}
		via[e.Path] = m
		if !ok || st.Mode&unix.S_IFMT != kindMode(e.Kind) {
			return "h" + string(typ) + "+++++++++ " + e.Path + " => " + m
		}
		flags := w.attrFlags(&mst, dirfd, base, e, typ)
		flags[0] = 'h'
		if string(flags[2:]) == "........." {
			copy(flags[2:], "         ")
		}
		return string(flags) + " " + e.Path + " => " + m
	case e.IsHardlink() && via[e.LinkTo] == e.Path:
		st, dirfd, base, ok := w.itemStat(cur, e)
		if !ok {
			return "-"
		}
		flags := w.attrFlags(&st, dirfd, base, e, typ)
		if string(flags[2:]) == "........." {
			return ""
		}
		return string(flags) + " " + e.Path
	}
	return "-"
}

// itemType is rsync's itemize letter for a kind: f, d, L, D, S.
func itemType(k treewalk.Kind) byte {
	return map[treewalk.Kind]byte{treewalk.KindFile: 'f', treewalk.KindDir: 'd', treewalk.KindSymlink: 'L',
		treewalk.KindCharDev: 'D', treewalk.KindBlkDev: 'D', treewalk.KindFifo: 'S'}[k]
}

// itemize returns e's change line, or "" when DST has it as it is.
// resent says which hardlink leaders have their data sent; via, which
// leaders are linked to the inode of which follower.
func (w *Writer) itemize(cur *dirCursor, e *treewalk.Entry, resent map[string]bool, via map[string]string) string {
	name := e.Path
	switch {
	case e.Path == ".":
		name = "./"
	case e.Kind == treewalk.KindDir:
		name += "/"
	case e.IsHardlink(): // rsync names the leader, not a symlink's target
		name += " => " + e.LinkTo
	case e.Kind == treewalk.KindSymlink:
		name += " -> " + e.LinkTarget
	}
	typ := itemType(e.Kind)
	st, dirfd, base, ok := w.itemStat(cur, e)
	if e.Path == "." && w.created {
		ok = false // made by this run (its interim mode until Finish): new, as rsync says
	}
	if !ok || st.Mode&unix.S_IFMT != kindMode(e.Kind) {
		y := byte('c')
		switch {
		case e.IsHardlink():
			y = 'h'
		case e.Kind == treewalk.KindFile:
			y = '>'
		}
		return string([]byte{y, typ}) + "+++++++++ " + name
	}
	flags := w.attrFlags(&st, dirfd, base, e, typ)
	if e.IsHardlink() {
		flags[0] = 'h'
		lst, err := w.leaderStat(e.LinkTo)
		if m := via[e.LinkTo]; m != "" {
			lst, err = w.leaderStat(m) // the inode the leader will be linked to
		}
		linked := err == nil && lst.Dev == st.Dev && lst.Ino == st.Ino
		changed := string(flags[2:]) != "........."
		switch {
		case linked && w.opts.DryRun && changed:
			return string(flags) + " " + e.Path
		case linked && (w.opts.DryRun || !resent[e.LinkTo]):
			return ""
		}
		if !changed {
			copy(flags[2:], "         ") // rsync's spaces for "no attribute changed"
		}
		return string(flags) + " " + name
	}
	if string(flags[2:]) == "........." && flags[0] == '.' {
		return ""
	}
	return string(flags) + " " + name
}

// attrFlags compares e with st, what DST has at its path (dirfd and base
// name it there), and returns rsync's 11 itemize characters: the update
// type ('>' data sent, 'c' a symlink or device changed, '.' otherwise),
// typ, then 'c' (target or device number), 's' (size), 't' (mtime), 'p'
// (mode), 'o', 'g' (owner, group, as root), '.' for the access time
// (not compared), 'a' (POSIX ACLs), 'x' (extended attributes) or '.'
// each.
func (w *Writer) attrFlags(st *unix.Stat_t, dirfd int, base string, e *treewalk.Entry, typ byte) []byte {
	flags := []byte("...........")
	flags[1] = typ
	uid, gid, mode := w.policy.Resolve(e)
	y := byte('.')
	switch e.Kind {
	case treewalk.KindFile:
		if st.Size != e.Size {
			flags[3], y = 's', '>'
		}
		if !w.sameMtime(st, e) {
			y = '>'
		}
	case treewalk.KindSymlink:
		if t, err := treewalk.ReadlinkAt(dirfd, base); err != nil || t != e.LinkTarget {
			flags[2], y = 'c', 'c'
		}
	case treewalk.KindCharDev, treewalk.KindBlkDev:
		if uint64(st.Rdev) != e.Rdev {
			flags[2], y = 'c', 'c'
		}
	}
	if !w.sameMtime(st, e) {
		flags[4] = 't'
	}
	t := pathTarget(dirfd, base)
	if e.Path == "." {
		t = fdTarget(dirfd)
	}
	access, def, xattrs := w.xattrChanges(t, e)
	// Setting the access ACL sets the permission bits too: after it, a
	// real run (rsync reports what remains to change once the ACL is
	// set) changes the mode only for the setuid, setgid and sticky bits.
	permBits := uint32(07777)
	if access && !w.opts.DryRun {
		permBits = 07000
	}
	if e.Kind != treewalk.KindSymlink && st.Mode&permBits != mode&permBits {
		flags[5] = 'p'
	}
	if w.chown && int(st.Uid) != uid {
		flags[6] = 'o'
	}
	if w.chown && int(st.Gid) != gid {
		flags[7] = 'g'
	}
	if access || def {
		flags[9] = 'a'
	}
	if xattrs {
		flags[10] = 'x'
	}
	flags[0] = y
	return flags
}

// itemStat lstats e's path on DST; ok is false when there is nothing
// there (or its directory cannot be reached without a symlink). dirfd
// (owned by cur) and base name the entry for readlinkat.
func (w *Writer) itemStat(cur *dirCursor, e *treewalk.Entry) (st unix.Stat_t, dirfd int, base string, ok bool) {
	if w.rootFd < 0 {
		return st, -1, "", false
	}
	if e.Path == "." {
		if err := unix.Fstat(w.rootFd, &st); err != nil {
			return st, -1, "", false
		}
		return st, w.rootFd, ".", true
	}
	dirfd, base, err := cur.parent(e.Path)
	if err != nil {
		return st, -1, "", false
	}
	st, err = lstatAt(dirfd, base)
	return st, dirfd, base, err == nil
}

// leaderStat lstats rel, the leader of a hardlink, on DST.
func (w *Writer) leaderStat(rel string) (unix.Stat_t, error) {
	ldir, lbase, err := w.parent(rel)
	if err != nil {
		return unix.Stat_t{}, err
	}
	defer unix.Close(ldir)
	return lstatAt(ldir, lbase)
}

// kindMode is the S_IFMT type of a kind.
func kindMode(k treewalk.Kind) uint32 {
	switch k {
	case treewalk.KindFile:
		return unix.S_IFREG
	case treewalk.KindDir:
		return unix.S_IFDIR
	case treewalk.KindSymlink:
		return unix.S_IFLNK
	case treewalk.KindFifo:
		return unix.S_IFIFO
	case treewalk.KindCharDev:
		return unix.S_IFCHR
	case treewalk.KindBlkDev:
		return unix.S_IFBLK
	}
	return 0
}

// ItemizedChanges counts the lines of Itemize (each a change): deletions,
// and the rest. A pure function.
func ItemizedChanges(lines []string) (deletions, others int) {
	for _, l := range lines {
		if strings.HasPrefix(l, "*deleting") {
			deletions++
		} else {
			others++
		}
	}
	return deletions, others
}
