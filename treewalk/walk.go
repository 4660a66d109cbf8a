package treewalk

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"syscall"
)

// ErrNotDir is returned by Walk when the root is not a directory.
var ErrNotDir = errors.New("not a directory")

// PathError is a problem with one entry of the tree, reported while the walk
// goes on (rsync's "some files could not be transferred", exit 23).
type PathError struct {
	Path string // slash-separated, relative to the root
	Err  error
}

// Error returns "PATH: ERR".
func (e *PathError) Error() string { return e.Path + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *PathError) Unwrap() error { return e.Err }

// List is the outcome of a walk: the entries found, in walk order, and the
// per-entry errors met on the way (those entries are left out).
type List struct {
	Entries []Entry
	Errors  []*PathError
}

// Walk lists the tree under root. It never follows symlinks, and reads the
// tree through an os.Root so that nothing outside root is looked at even if
// the tree changes during the walk. Unreadable directories and entries that
// vanish are recorded in List.Errors and skipped; a root that cannot be
// opened, or that is not a directory, is an error (ErrNotDir wrapped for the
// latter). Sockets are skipped silently, like rsync does without
// --specials. Walk returns ctx.Err() when ctx is cancelled.
//
// Memory: about 200 bytes per entry plus the paths.
func Walk(ctx context.Context, root string) (List, error) {
	st, err := os.Stat(root)
	if err != nil {
		return List{}, fmt.Errorf("walk %s: %w", root, err)
	}
	if !st.IsDir() {
		return List{}, fmt.Errorf("walk %s: %w", root, ErrNotDir)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return List{}, fmt.Errorf("walk %s: %w", root, err)
	}
	defer r.Close()
	return WalkRoot(ctx, r)
}

// WalkRoot is Walk on an already opened root (for a server that confines
// clients beneath a directory). Errors name r.Name().
func WalkRoot(ctx context.Context, r *os.Root) (List, error) {
	root := r.Name()
	w := &walker{root: r, names: newNameCache(), links: map[devIno]string{}}
	rootInfo, err := r.Lstat(".")
	if err != nil {
		return List{}, fmt.Errorf("walk %s: %w", root, err)
	}
	if err := w.add(".", rootInfo); err != nil {
		return List{}, err
	}
	if err := w.dir(ctx, "."); err != nil {
		return List{}, err
	}
	return w.list, nil
}

type devIno struct{ dev, ino uint64 }

type walker struct {
	root  *os.Root
	names *nameCache
	links map[devIno]string
	list  List
}

func (w *walker) fail(p string, err error) {
	w.list.Errors = append(w.list.Errors, &PathError{Path: p, Err: err})
}

// dir lists directory p (already added) and recurses into its subdirectories.
func (w *walker) dir(ctx context.Context, p string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := w.root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_DIRECTORY, 0)
	if err != nil {
		w.fail(p, err)
		return nil
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		w.fail(p, err)
		return nil
	}
	sortStrings(names)
	for _, name := range names {
		child := name
		if p != "." {
			child = path.Join(p, name)
		}
		fi, err := w.root.Lstat(child)
		if err != nil {
			w.fail(child, err)
			continue
		}
		if err := w.add(child, fi); err != nil {
			w.fail(child, err)
			continue
		}
		if fi.IsDir() {
			if err := w.dir(ctx, child); err != nil {
				return err
			}
		}
	}
	return nil
}

// add appends the entry for p, described by fi.
func (w *walker) add(p string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("no stat data for %s", p)
	}
	e := Entry{
		Path:    p,
		Mode:    uint32(st.Mode) & 07777,
		Uid:     st.Uid,
		Gid:     st.Gid,
		User:    w.names.user(st.Uid),
		Group:   w.names.group(st.Gid),
		MtimeNs: st.Mtim.Nano(),
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		e.Kind = KindFile
		e.Size = st.Size
		if st.Nlink > 1 {
			key := devIno{uint64(st.Dev), st.Ino}
			if leader, ok := w.links[key]; ok {
				e.LinkTo = leader
			} else {
				w.links[key] = p
			}
		}
	case syscall.S_IFDIR:
		e.Kind = KindDir
	case syscall.S_IFLNK:
		e.Kind = KindSymlink
		target, err := w.root.Readlink(p)
		if err != nil {
			return err
		}
		e.LinkTarget = target
	case syscall.S_IFIFO:
		e.Kind = KindFifo
	case syscall.S_IFCHR:
		e.Kind = KindCharDev
		e.Rdev = uint64(st.Rdev)
	case syscall.S_IFBLK:
		e.Kind = KindBlkDev
		e.Rdev = uint64(st.Rdev)
	default: // sockets and anything unknown
		return nil
	}
	w.list.Entries = append(w.list.Entries, e)
	return nil
}
