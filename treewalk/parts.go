package treewalk

import (
	"context"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Part is one piece of a selection walked by WalkParts: the entry Rel
// (a file, a directory and everything below it, a symlink...) beneath the
// directory Base. Rel is also the entry's path in the file list, so the
// directories between Base and Rel ("implied directories", as rsync's
// --relative calls them) are listed too. Rel "." is Base itself, which
// then is the root "." of the list.
type Part struct {
	// Base is the directory Rel is resolved beneath; the walk never
	// leaves it and never follows a symlink beneath it.
	Base *os.Root
	// Rel is slash-separated and valid for ValidPath.
	Rel string
	// ImpliesRoot lists Base itself as the root "." of the list, before
	// everything else, as an implied directory (rsync's -R and
	// --files-from do so for a path that starts with "./").
	ImpliesRoot bool
}

// IsUnder reports whether p is q or below q (both clean, relative,
// slash-separated; everything is under ".").
func IsUnder(p, q string) bool {
	return q == "." || p == q || strings.HasPrefix(p, q+"/")
}

// WalkParts lists several parts into one list, merged as rsync merges
// the trees of several SRCs: the parts are walked in the order given, each
// with its implied directories (not filtered, as rsync sends them) and
// then the part itself, unless f excludes it, followed by its contents as
// Walk lists them, filtered by f (an excluded directory is not descended
// into). When several parts give the same path, the first one given wins,
// except that a directory wins over a non-directory (it may have
// contents); the contents of every directory given at a path are listed
// there, so directories combine. The first part that is Rel "." or
// ImpliesRoot gives "." (an ImpliesRoot part lists its Base as an implied
// directory). The list is in tree order (each directory followed by its
// contents, names in byte order), as Walk's, with each path once. A part
// at or below one already walked from the same Base adds nothing and is
// skipped. Hardlinks are found across parts, and each group's leader is
// its first member in the list. A part or implied directory that cannot
// be read (missing, a symlink where a directory is implied) is a PathError
// of the list; errors of a Base are returned. Cancelling ctx returns
// ctx.Err(). Memory: Walk's per entry, and with several parts, while
// merging, a second copy of the entries and a map of their paths.
func WalkParts(ctx context.Context, parts []Part, f *Filter) (List, error) {
	w := newWalker(f)
	type walkedPart struct {
		base *os.Root
		rel  string
	}
	var walked []walkedPart
	rootGiven := false
	for _, pt := range parts {
		if err := ValidPath(pt.Rel); err != nil {
			return List{}, fmt.Errorf("walk %s: %w", pt.Rel, err)
		}
		if !rootGiven && pt.ImpliesRoot && pt.Rel != "." {
			if err := w.impliedRoot(pt.Base); err != nil {
				return List{}, err
			}
		}
		rootGiven = rootGiven || pt.Rel == "." || pt.ImpliesRoot
		if slices.ContainsFunc(walked, func(q walkedPart) bool { return q.base == pt.Base && IsUnder(pt.Rel, q.rel) }) {
			continue
		}
		walked = append(walked, walkedPart{pt.Base, pt.Rel})
		d, err := pt.Base.Open(".")
		if err != nil {
			return List{}, fmt.Errorf("walk %s: %w", pt.Base.Name(), err)
		}
		err = w.part(ctx, int(d.Fd()), pt.Rel, map[string]bool{})
		d.Close()
		if err != nil {
			return List{}, err
		}
	}
	if len(parts) > 1 { // several walks, or an implied "." listed after a walk
		w.list.Entries = mergeWalks(w.list.Entries)
	}
	return w.list, nil
}

// impliedRoot lists base as the root "." of the list.
func (w *walker) impliedRoot(base *os.Root) error {
	d, err := base.Open(".")
	if err != nil {
		return fmt.Errorf("walk %s: %w", base.Name(), err)
	}
	defer d.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(d.Fd()), &st); err != nil {
		w.fail(".", err)
		return nil
	}
	w.rootFd = int(d.Fd())
	defer func() { w.rootFd = -1 }()
	if err := w.add(".", &st, -1); err != nil {
		w.fail(".", err)
	}
	return nil
}

// part lists one part beneath rootFd.
func (w *walker) part(ctx context.Context, rootFd int, rel string, implied map[string]bool) error {
	w.rootFd = rootFd
	if rel == "." {
		var st unix.Stat_t
		if err := unix.Fstat(rootFd, &st); err != nil {
			w.fail(".", err)
			return nil
		}
		if err := w.add(".", &st, -1); err != nil {
			w.fail(".", err)
			return nil
		}
		return w.dir(ctx, ".")
	}
	var dirs []string
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		dirs = append(dirs, d)
	}
	slices.Reverse(dirs)
	for _, d := range dirs {
		if implied[d] {
			continue
		}
		st, pfd, err := w.lstat(d)
		if err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			unix.Close(pfd)
			err = fmt.Errorf("implied directory of %s is not a directory", rel)
		}
		if err != nil {
			w.fail(d, err)
			return nil
		}
		implied[d] = true
		// Its own xattrs and ACLs, read in its parent (pfd), not the base's.
		err = w.add(d, &st, pfd)
		unix.Close(pfd)
		if err != nil {
			w.fail(d, err)
			return nil
		}
	}
	st, pfd, err := w.lstat(rel)
	if err != nil {
		w.fail(rel, err)
		return nil
	}
	defer unix.Close(pfd)
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if w.filter.Excluded(rel, isDir) {
		return nil
	}
	if err := w.add(rel, &st, pfd); err != nil {
		w.fail(rel, err)
		return nil
	}
	if isDir {
		return w.dir(ctx, rel)
	}
	return nil
}

// lstat stats rel beneath the walker's root without following symlinks,
// and returns the descriptor of its directory, which the caller closes.
func (w *walker) lstat(rel string) (unix.Stat_t, int, error) {
	var st unix.Stat_t
	pfd, err := OpenBeneath(w.rootFd, path.Dir(rel), unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return st, -1, err
	}
	if err := unix.Fstatat(pfd, path.Base(rel), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		unix.Close(pfd)
		return st, -1, err
	}
	return st, pfd, nil
}

// walkPart lists one part as WalkParts lists a selection of one part.
func (w *walker) walkPart(ctx context.Context, pt Part) error {
	if err := ValidPath(pt.Rel); err != nil {
		return fmt.Errorf("walk %s: %w", pt.Rel, err)
	}
	if pt.ImpliesRoot && pt.Rel != "." {
		if err := w.impliedRoot(pt.Base); err != nil {
			return err
		}
	}
	d, err := pt.Base.Open(".")
	if err != nil {
		return fmt.Errorf("walk %s: %w", pt.Base.Name(), err)
	}
	defer d.Close()
	return w.part(ctx, int(d.Fd()), pt.Rel, map[string]bool{})
}
