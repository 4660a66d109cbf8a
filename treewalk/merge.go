package treewalk

import (
	"slices"
)

// mergeWalks turns the entries of several walks, appended in the order
// their parts were given, into one list as rsync merges the file lists of several SRCs: each path once,
// the first given winning except that a directory replaces a
// non-directory; then in tree order (treeCompare); then each hardlink
// group led by its first member in that order, which carries the group's
// metadata (the walk's leader, if after it, becomes a follower).
func mergeWalks(raw []Entry) []Entry {
	at := make(map[string]int, len(raw)) // path → index in kept
	var kept []int                       // indexes in raw
	for i := range raw {
		j, dup := at[raw[i].Path]
		switch {
		case !dup:
			at[raw[i].Path] = len(kept)
			kept = append(kept, i)
		case raw[kept[j]].Kind != KindDir && raw[i].Kind == KindDir:
			kept[j] = i
		}
	}
	slices.SortStableFunc(kept, func(a, b int) int { return treeCompare(raw[a].Path, raw[b].Path) })
	group, follower := linkGroups(raw)
	entries := make([]Entry, len(kept))
	leaders := map[int]string{} // group → the path that leads it in the list
	for k, i := range kept {
		e := raw[i]
		if g, linked := group[i]; linked {
			switch lead, ok := leaders[g]; {
			case !ok && i == g: // the walk's leader comes first and stays
				leaders[g] = e.Path
			case !ok: // a follower comes first: it takes the leader's metadata
				e = raw[g]
				e.Path = raw[i].Path
				leaders[g] = e.Path
			case i == g: // the walk's leader, after another member: a follower
				e = raw[follower[g]]
				e.Path, e.LinkTo = raw[i].Path, lead
			default:
				e.LinkTo = lead
			}
		}
		entries[k] = e
	}
	return entries
}

// linkGroups finds the hardlink groups of raw, the appended entries of
// several walks, where one path may be listed more than once: group maps
// the index of each leader and follower to its leader's index, follower
// each leader to its first follower. A follower's LinkTo names its
// leader's path; its leader is the last entry before it of that path that
// is not itself a follower and has the follower's inode metadata (kind,
// size, mtime, mode, owner), the same path being possibly another file of
// another part.
func linkGroups(raw []Entry) (group, follower map[int]int) {
	group, follower = map[int]int{}, map[int]int{}
	byPath := map[string][]int{} // leaders so far (entries without LinkTo), by path
	for i := range raw {
		e := &raw[i]
		if e.LinkTo == "" {
			byPath[e.Path] = append(byPath[e.Path], i)
			continue
		}
		cands := byPath[e.LinkTo]
		if len(cands) == 0 {
			continue
		}
		g := cands[len(cands)-1]
		for _, c := range slices.Backward(cands) {
			if sameInode(&raw[c], e) {
				g = c
				break
			}
		}
		group[i], group[g] = g, g
		if _, ok := follower[g]; !ok {
			follower[g] = i
		}
	}
	return group, follower
}

// sameInode reports whether a and b have the metadata that hardlinked
// names of one inode share.
func sameInode(a, b *Entry) bool {
	return a.Kind == b.Kind && a.Size == b.Size && a.MtimeNs == b.MtimeNs && a.Mode == b.Mode && a.Uid == b.Uid && a.Gid == b.Gid
}

// treeCompare orders two clean relative paths as a walk lists them: a
// directory before its contents, and the names in one directory in byte
// order ("a", "a/x", "a-b": "/" sorts before every other byte); the root
// "." comes first of all.
func treeCompare(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == ".":
		return -1
	case b == ".":
		return 1
	}
	for i := 0; i < len(a) && i < len(b); i++ {
		ca, cb := a[i], b[i]
		if ca == cb {
			continue
		}
		if ca == '/' {
			return -1
		}
		if cb == '/' {
			return 1
		}
		if ca < cb {
			return -1
		}
		return 1
	}
	return len(a) - len(b)
}
