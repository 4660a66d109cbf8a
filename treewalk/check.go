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
