package treewalk

import (
	"errors"
	"fmt"
	"path"
	"strconv"
)

// ErrBadList is wrapped by CheckList's errors: a file list that no walk
// makes, which a receiver must refuse as a whole.
var ErrBadList = errors.New("invalid file list")

// CheckList checks the shape of a whole file list received from a peer,
// beyond what ValidPath and the per-entry checks see:
//   - no path is listed twice;
//   - a hardlink (LinkTo) names an earlier entry of the list of the same
//     kind, not a directory and not itself a hardlink (its group's
//     leader), so no link can reach a file of the destination that the
//     list does not restore;
//   - an entry whose parent directory is in the list has a directory
//     there (no entry beneath a listed file or symlink).
//
// Walk, WalkParts and the tar readers only make lists that pass. The
// error is a *PathError naming the first offending entry and wrapping
// ErrBadList. Memory is one map entry per listed path. It is a pure
// function, safe for concurrent use on a list nobody modifies.
func CheckList(entries []Entry) error {
	kinds := make(map[string]int, len(entries)) // path → index
	for i := range entries {
		e := &entries[i]
		bad := func(format string, args ...any) error {
			return &PathError{Path: e.Path, Err: fmt.Errorf("%w: "+format, append([]any{ErrBadList}, args...)...)}
		}
		if _, dup := kinds[e.Path]; dup {
			return bad("listed twice")
		}
		if e.Path != "." {
			if j, ok := kinds[path.Dir(e.Path)]; ok && entries[j].Kind != KindDir {
				return bad("beneath %s, which the list makes a %s", strconv.Quote(entries[j].Path), entries[j].Kind)
			}
		}
		if e.LinkTo != "" {
			j, ok := kinds[e.LinkTo]
			if !ok || e.Kind == KindDir || entries[j].Kind != e.Kind || entries[j].LinkTo != "" {
				what := e.Kind.String()
				if e.Kind == KindFile {
					what = "regular file"
				}
				return bad("hardlink to %s, which is not an earlier %s of the list", strconv.Quote(e.LinkTo), what)
			}
		}
		kinds[e.Path] = i
	}
	return nil
}

// ListChecker checks a file list received chunk by chunk (Chunks on the
// sender) as CheckList checks a whole one, with memory that does not grow
// with the list: it holds the listed directories above the last entry
// and the hardlink leaders, nothing else. For that it asks more of the
// list than CheckList: its entries come in tree order (each directory
// before its contents, names in byte order: the order of every walk), so
// no path can come twice; nothing is listed beneath a listed file or
// symlink, at any depth; and a hardlink names a leader of its chunk or
// an earlier one (Chunk.Leaders, which must be entries of a kind that can
// be linked, not hardlinks themselves). The zero value is ready for the
// first chunk. Not safe for concurrent use.
type ListChecker struct {
	last    string
	started bool
	closed  string         // the outermost directory a chunk's Closed completed, until an entry leaves it
	above   []checkedEntry // the last entry and its listed ancestors, outermost first
	leaders map[string]Kind
}

type checkedEntry struct {
	path string
	kind Kind
}

// Check checks the next chunk; its error is a *PathError naming the
// first offending entry and wrapping ErrBadList, after which the list is
// to be refused as a whole.
func (c *ListChecker) Check(ch Chunk) error {
	next := 0 // the next index of ch.Leaders
	for i := range ch.Leaders {
		j := ch.Leaders[i]
		if j < 0 || j >= len(ch.Entries) || i > 0 && j <= ch.Leaders[i-1] {
			return &PathError{Path: ".", Err: fmt.Errorf("%w: hardlink leader %d of a chunk of %d entries", ErrBadList, j, len(ch.Entries))}
		}
	}
	for i := range ch.Entries {
		e := &ch.Entries[i]
		bad := func(format string, args ...any) error {
			return &PathError{Path: e.Path, Err: fmt.Errorf("%w: "+format, append([]any{ErrBadList}, args...)...)}
		}
		if c.started && treeCompare(c.last, e.Path) >= 0 {
			return bad("listed twice or out of order, after %s", strconv.Quote(c.last))
		}
		c.started, c.last = true, e.Path
		if c.closed != "" && IsUnder(e.Path, c.closed) {
			return bad("beneath %s, whose listing a chunk said was complete", strconv.Quote(c.closed))
		}
		c.closed = ""
		for len(c.above) > 0 && !IsUnder(e.Path, c.above[len(c.above)-1].path) {
			c.above = c.above[:len(c.above)-1]
		}
		if n := len(c.above); n > 0 && c.above[n-1].kind != KindDir {
			return bad("beneath %s, which the list makes a %s", strconv.Quote(c.above[n-1].path), c.above[n-1].kind)
		}
		if e.LinkTo != "" {
			if k, ok := c.leaders[e.LinkTo]; !ok || k != e.Kind {
				what := e.Kind.String()
				if e.Kind == KindFile {
					what = "regular file"
				}
				return bad("hardlink to %s, which is not an earlier leader of a %s of the list", strconv.Quote(e.LinkTo), what)
			}
		}
		if next < len(ch.Leaders) && ch.Leaders[next] == i {
			next++
			if e.Kind == KindDir || e.LinkTo != "" {
				return bad("a hardlink leader that is a %s", map[bool]string{true: "hardlink", false: "directory"}[e.LinkTo != ""])
			}
			if c.leaders == nil {
				c.leaders = map[string]Kind{}
			}
			c.leaders[e.Path] = e.Kind
		}
		c.above = append(c.above, checkedEntry{e.Path, e.Kind})
	}
	dirs := c.above
	if n := len(dirs); n > 0 && dirs[n-1].kind != KindDir {
		dirs = dirs[:n-1]
	}
	if ch.Closed < 0 || ch.Closed > len(dirs) {
		return &PathError{Path: c.last, Err: fmt.Errorf("%w: a chunk completes %d directories, %d are open", ErrBadList, ch.Closed, len(dirs))}
	}
	if ch.Closed > 0 {
		c.closed = dirs[len(dirs)-ch.Closed].path
		c.above = dirs[:len(dirs)-ch.Closed]
	}
	return nil
}
