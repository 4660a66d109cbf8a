package dest

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/treewalk"
)

// Delete is rsync's --delete on a whole list (sftp): it removes from
// DST what entries, the restore's file list, lack, within the restored
// scope only: below the WriterOptions.Roots that entries has as
// directories (a SRC that is a file, or that is missing on the source,
// deletes nothing), never an entry that WriterOptions.Filters exclude (nor
// anything below an excluded directory), never our temporary files. A
// directory that holds a protected entry is kept. Every path is resolved
// beneath DST without following symlinks: a symlink is removed as a link,
// its target untouched. It returns the deleted paths (a directory's with a
// trailing "/", after its contents), the entries that could not be
// deleted, and an error only for cancellation.
func (w *Writer) Delete(ctx context.Context, entries []treewalk.Entry) ([]string, []*treewalk.PathError, error) {
	x := &extras{w: w, act: true}
	err := x.run(ctx, entries)
	return x.deleted, x.errs, err
}

// DeleteIn is Delete for one directory of a list streamed in chunks
// (rsync's --delete-during): dir is a directory of the list whose
// listing is complete, names the base names the list has in it (a nil
// map: none). It removes from DST's dir what names lack, as Delete
// does: only when dir is at or below one of WriterOptions.Roots, never
// what the filters exclude, never our temporary files, never through a
// symlink; the listed subdirectories are left to their own DeleteIn.
// Entries go in rsync's order (readChildren), a directory's after its
// contents, with a trailing "/". It returns the deleted paths, the
// entries that could not be deleted, and an error only for
// cancellation. Not safe for concurrent use with itself.
func (w *Writer) DeleteIn(ctx context.Context, dir string, names map[string]bool) ([]string, []*treewalk.PathError, error) {
	x := &extras{w: w, act: true, shallow: true}
	err := x.in(ctx, dir, names)
	return x.deleted, x.errs, err
}

// ItemizeDeletesIn returns the "*deleting" lines of what DeleteIn would
// delete in dir (Itemize's lines for --delete, for a list streamed in
// chunks); nothing is written. The error is for cancellation only.
func (w *Writer) ItemizeDeletesIn(ctx context.Context, dir string, names map[string]bool) ([]string, error) {
	x := &extras{w: w, shallow: true}
	if err := x.in(ctx, dir, names); err != nil {
		return nil, err
	}
	lines := make([]string, len(x.deleted))
	for i, p := range x.deleted {
		lines[i] = "*deleting   " + p
	}
	return lines, nil
}

// in runs a shallow pass over the listed directory dir, whose listed
// names are names.
func (x *extras) in(ctx context.Context, dir string, names map[string]bool) error {
	if x.w.rootFd < 0 || treewalk.ValidPath(dir) != nil {
		return nil
	}
	if !slices.ContainsFunc(x.w.opts.Roots, func(r string) bool { return treewalk.ValidPath(r) == nil && treewalk.IsUnder(dir, r) }) {
		return nil // above the restored scope (an implied directory of -R)
	}
	x.listed = make(map[string]treewalk.Kind, len(names))
	for n := range names {
		x.listed[path.Join(dir, n)] = treewalk.KindFile // any kind: it is kept
	}
	fd, err := openDirBeneath(x.w.rootFd, dir)
	if err != nil {
		return nil // not a directory on DST: nothing to delete there
	}
	defer unix.Close(fd)
	return x.dir(ctx, fd, dir)
}

// extras finds (and with act, removes) what DST has and the list lacks.
// Not safe for concurrent use.
type extras struct {
	w   *Writer
	act bool
	// shallow: dir does not go down into the listed directories (each
	// gets its own pass once its listing is complete: DeleteIn).
	shallow bool
	listed  map[string]treewalk.Kind
	deleted []string
	errs    []*treewalk.PathError
}

func (x *extras) run(ctx context.Context, entries []treewalk.Entry) error {
	if x.w.rootFd < 0 {
		return nil // a dry run into a DST that does not exist yet
	}
	x.listed = make(map[string]treewalk.Kind, len(entries))
	for i := range entries {
		x.listed[entries[i].Path] = entries[i].Kind
	}
	roots := slices.Clone(x.w.opts.Roots)
	slices.Sort(roots)
	var scopes []string
	for _, r := range roots {
		if x.listed[r] != treewalk.KindDir || treewalk.ValidPath(r) != nil {
			continue
		}
		if slices.ContainsFunc(scopes, func(q string) bool { return treewalk.IsUnder(r, q) }) {
			continue
		}
		scopes = append(scopes, r)
	}
	for _, r := range scopes {
		fd, err := openDirBeneath(x.w.rootFd, r)
		if err != nil {
			continue // not a directory on DST yet: nothing to delete there
		}
		err = x.dir(ctx, fd, r)
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	return nil
}

// dir looks through directory rel, open at fd, which the list has.
func (x *extras) dir(ctx context.Context, fd int, rel string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	kids, err := readChildren(fd, rel)
	if err != nil {
		x.errs = append(x.errs, &treewalk.PathError{Path: rel, Err: fmt.Errorf("list for --delete: %w", err)})
		return nil
	}
	for _, c := range kids {
		child := path.Join(rel, c.name)
		if x.w.filter.Excluded(child, c.isDir) {
			continue // protected
		}
		kind, ok := x.listed[child]
		if !ok {
			if _, err := x.remove(ctx, fd, c.name, child, c.isDir); err != nil {
				return err
			}
			continue
		}
		if c.isDir && kind == treewalk.KindDir && !x.shallow {
			sub, err := openDirBeneath(fd, c.name)
			if err != nil {
				continue
			}
			err = x.dir(ctx, sub, child)
			unix.Close(sub)
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// child is a name in a directory of DST, and whether it is a directory.
type child struct {
	name  string
	isDir bool
}

// readChildren returns the names in the directory open at fd (rel in
// the list's terms) but our temporary files, in the order rsync deletes
// them (its delete_in_dir and delete_dir_contents): the reverse of its
// sorted order, where a directory's files come before its
// subdirectories, each by name. A name gone meanwhile is left out.
func readChildren(fd int, rel string) ([]child, error) {
	names, err := readDirNames(fd)
	if err != nil {
		return nil, err
	}
	kids := make([]child, 0, len(names))
	for _, name := range names {
		if isTempName(name) {
			continue
		}
		st, err := lstatAt(fd, name)
		if err != nil {
			continue // gone meanwhile
		}
		kids = append(kids, child{name: name, isDir: st.Mode&unix.S_IFMT == unix.S_IFDIR})
	}
	slices.SortFunc(kids, func(a, b child) int {
		switch {
		case a.isDir != b.isDir && a.isDir:
			return -1
		case a.isDir != b.isDir:
			return 1
		}
		return strings.Compare(b.name, a.name)
	})
	return kids, nil
}

// remove deletes name (rel in the list's terms) from the directory at fd,
// a directory's unprotected contents first; it reports whether name is
// gone (or would be, in a dry run).
func (x *extras) remove(ctx context.Context, fd int, name, rel string, isDir bool) (bool, error) {
	if !isDir {
		if x.act {
			if err := unix.Unlinkat(fd, name, 0); err != nil && err != unix.ENOENT {
				x.errs = append(x.errs, &treewalk.PathError{Path: rel, Err: fmt.Errorf("delete: %w", err)})
				return false, nil
			}
		}
		x.deleted = append(x.deleted, rel)
		return true, nil
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	sub, err := openDirBeneath(fd, name)
	if err != nil {
		x.errs = append(x.errs, &treewalk.PathError{Path: rel, Err: fmt.Errorf("delete: %w", err)})
		return false, nil
	}
	kids, err := readChildren(sub, rel)
	if err != nil {
		unix.Close(sub)
		x.errs = append(x.errs, &treewalk.PathError{Path: rel, Err: fmt.Errorf("delete: %w", err)})
		return false, nil
	}
	empty := true
	for _, c := range kids {
		child := rel + "/" + c.name
		if x.w.filter.Excluded(child, c.isDir) {
			empty = false // protected: the directory stays
			continue
		}
		gone, err := x.remove(ctx, sub, c.name, child, c.isDir)
		if err != nil {
			unix.Close(sub)
			return false, err
		}
		empty = empty && gone
	}
	unix.Close(sub)
	if !empty {
		return false, nil
	}
	if x.act {
		if err := unix.Unlinkat(fd, name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
			x.errs = append(x.errs, &treewalk.PathError{Path: rel, Err: fmt.Errorf("delete: %w", err)})
			return false, nil
		}
	}
	x.deleted = append(x.deleted, rel+"/")
	return true, nil
}
