package dest

import (
	"context"
	"fmt"
	"path"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/treewalk"
)

// Delete implements transfer.Deleter (rsync's --delete): it removes from
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

// extras finds (and with act, removes) what DST has and the list lacks.
// Not safe for concurrent use.
type extras struct {
	w       *Writer
	act     bool
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
	names, err := readDirNames(fd)
	if err != nil {
		x.errs = append(x.errs, &treewalk.PathError{Path: rel, Err: fmt.Errorf("list for --delete: %w", err)})
		return nil
	}
	slices.Sort(names)
	for _, name := range names {
		if isTempName(name) {
			continue
		}
		child := path.Join(rel, name)
		st, err := lstatAt(fd, name)
		if err != nil {
			continue // gone meanwhile
		}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		if x.w.filter.Excluded(child, isDir) {
			continue // protected
		}
		kind, ok := x.listed[child]
		if !ok {
			if _, err := x.remove(ctx, fd, name, child, isDir); err != nil {
				return err
			}
			continue
		}
		if isDir && kind == treewalk.KindDir {
			sub, err := openDirBeneath(fd, name)
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
	names, err := readDirNames(sub)
	if err != nil {
		unix.Close(sub)
		x.errs = append(x.errs, &treewalk.PathError{Path: rel, Err: fmt.Errorf("delete: %w", err)})
		return false, nil
	}
	slices.Sort(names)
	empty := true
	for _, n := range names {
		child := rel + "/" + n
		st, err := lstatAt(sub, n)
		if err != nil {
			continue
		}
		d := st.Mode&unix.S_IFMT == unix.S_IFDIR
		if x.w.filter.Excluded(child, d) {
			empty = false // protected: the directory stays
			continue
		}
		gone, err := x.remove(ctx, sub, n, child, d)
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
