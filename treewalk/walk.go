package treewalk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"

	"golang.org/x/sys/unix"
)

// ErrNotDir is returned by Walk when the root is not a directory.
var ErrNotDir = errors.New("not a directory")

// PathError is a problem with one entry of the tree, reported while the walk
// goes on (rsync's "some files could not be transferred", exit 23).
type PathError struct {
	Path string // slash-separated, relative to the root
	Err  error  // what went wrong
}

// Error returns "PATH: ERR".
func (e *PathError) Error() string { return e.Path + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *PathError) Unwrap() error { return e.Err }

// List is the outcome of a walk: the entries found, in walk order, and the
// per-entry errors met on the way (those entries are left out).
type List struct {
	Entries []Entry      // in walk order, the root "." first
	Errors  []*PathError // entries that could not be listed
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
// clients beneath a directory). Every directory is opened with OpenBeneath
// and every entry is stat'ed relative to its directory's descriptor, so a
// symlink planted during the walk is listed as a symlink, never followed.
// Errors name r.Name().
func WalkRoot(ctx context.Context, r *os.Root) (List, error) {
	d, err := r.Open(".")
	if err != nil {
		return List{}, fmt.Errorf("walk %s: %w", r.Name(), err)
	}
	defer d.Close()
	w := newWalker(nil)
	w.rootFd = int(d.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(w.rootFd, &st); err != nil {
		return List{}, fmt.Errorf("walk %s: %w", r.Name(), err)
	}
	if err := w.add(".", &st, -1); err != nil {
		return List{}, fmt.Errorf("walk %s: %w", r.Name(), err)
	}
	if err := w.dir(ctx, "."); err != nil {
		return List{}, err
	}
	return w.list, nil
}

type devIno struct{ dev, ino uint64 }

type walker struct {
	rootFd int     // the directory paths are resolved beneath
	filter *Filter // nil: everything
	names  *nameCache
	// links maps the inode of each entry listed with more than one link
	// to its path, its group's leader: nothing else outlives its chunk.
	links map[devIno]string
	list  List
	// leaders are the indices in list.Entries of the leaders added since
	// the last chunk (Chunk.Leaders).
	leaders []int
	// emit, when not nil, takes each chunk of at least ChunkEntries
	// entries as the walk goes (a chunked walk); nil keeps the whole
	// list in list. An error from it (cancellation) ends the walk.
	emit func(Chunk) error
	// atLast says, for each directory being listed (dir's frames,
	// outermost first), whether its last name is the one at hand.
	atLast []bool
	// merge, for a walk whose entries a merge of several parts links
	// (mergechunks.go), leaves LinkTo empty and reads every entry's
	// extended metadata, keeping in inodes, beside list.Entries, the
	// inode of each entry with more than one link (zero for the others);
	// emitMerge then takes its chunks instead of emit.
	merge     bool
	inodes    []devIno
	emitMerge func(mergeChunk) error
}

func newWalker(f *Filter) *walker {
	return &walker{filter: f, names: newNameCache(), links: map[devIno]string{}}
}

func (w *walker) fail(p string, err error) {
	w.list.Errors = append(w.list.Errors, &PathError{Path: p, Err: err})
}

// dir lists directory p (already added) and recurses into its subdirectories.
func (w *walker) dir(ctx context.Context, p string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	fd, err := OpenBeneath(w.rootFd, p, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		w.fail(p, err)
		return nil
	}
	f := os.NewFile(uintptr(fd), p)
	names, err := f.Readdirnames(-1)
	if err != nil {
		f.Close()
		w.fail(p, err)
		return nil
	}
	slices.Sort(names)
	defer f.Close() // open while the subtree is walked: one descriptor per level
	w.atLast = append(w.atLast, false)
	defer func() { w.atLast = w.atLast[:len(w.atLast)-1] }()
	for i, name := range names {
		w.atLast[len(w.atLast)-1] = i == len(names)-1
		child := name
		if p != "." {
			child = p + "/" + name
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			w.fail(child, err)
			continue
		}
		if w.filter.Excluded(child, st.Mode&unix.S_IFMT == unix.S_IFDIR) {
			continue
		}
		if err := w.add(child, &st, fd); err != nil {
			w.fail(child, err)
			continue
		}
		if err := w.flush(false); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if err := w.dir(ctx, child); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush hands the entries and errors gathered so far to w.emit as one
// chunk, when there are ChunkEntries of them or with last (the end of
// the walk, even if empty); without emit it keeps them.
func (w *walker) flush(last bool) error {
	if w.emitMerge != nil {
		if !last && len(w.list.Entries) < ChunkEntries {
			return nil
		}
		c := mergeChunk{entries: w.list.Entries, inodes: w.inodes, errors: w.list.Errors}
		w.list, w.inodes = List{}, nil
		return w.emitMerge(c)
	}
	if w.emit == nil || !last && len(w.list.Entries) < ChunkEntries {
		return nil
	}
	c := Chunk{Entries: w.list.Entries, Errors: w.list.Errors, Leaders: w.leaders, Last: last, Closed: w.closed()}
	w.list, w.leaders = List{}, nil
	return w.emit(c)
}

// closed is Chunk.Closed for a chunk cut after the last entry added: the
// directories being listed, innermost first, that are at their last name
// when that entry is not a directory (whose own listing is to come).
func (w *walker) closed() int {
	n := len(w.list.Entries)
	if n == 0 || w.list.Entries[n-1].Kind == KindDir {
		return 0
	}
	k := 0
	for i := len(w.atLast) - 1; i >= 0 && w.atLast[i]; i-- {
		k++
	}
	return k
}

// add appends the entry for p, described by st; dirfd is p's directory
// (for reading a symlink), or -1 for the root.
func (w *walker) add(p string, st *unix.Stat_t, dirfd int) error {
	e := Entry{
		Path:    p,
		Mode:    st.Mode & 07777,
		Uid:     st.Uid,
		Gid:     st.Gid,
		User:    w.names.user(st.Uid),
		Group:   w.names.group(st.Gid),
		MtimeNs: st.Mtim.Nano(),
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		e.Kind = KindFile
		e.Size = st.Size
	case unix.S_IFDIR:
		e.Kind = KindDir
	case unix.S_IFLNK:
		e.Kind = KindSymlink
		target, err := ReadlinkAt(dirfd, path.Base(p))
		if err != nil {
			return err
		}
		e.LinkTarget = target
	case unix.S_IFIFO:
		e.Kind = KindFifo
	case unix.S_IFCHR:
		e.Kind = KindCharDev
		e.Rdev = st.Rdev
	case unix.S_IFBLK:
		e.Kind = KindBlkDev
		e.Rdev = st.Rdev
	default: // sockets and anything unknown
		return nil
	}
	// Every kind but a directory can be hardlinked (rsync -H links
	// devices, fifos and symlinks too).
	linked := e.Kind != KindDir && st.Nlink > 1
	var ino devIno
	if linked && w.merge {
		ino = devIno{st.Dev, st.Ino}
	} else if linked {
		if leader, ok := w.links[devIno{st.Dev, st.Ino}]; ok {
			e.LinkTo = leader
		}
	}
	e.Sparse = e.Kind == KindFile && st.Blocks*512 < st.Size
	switch {
	case e.LinkTo != "" && e.Kind == KindFile: // its leader carries the inode's xattrs
		// (other kinds' followers carry them too: the tar method sends
		// them as nodes of their own)
	case dirfd < 0:
		if err := w.readMeta(&e, w.rootFd, ""); err != nil {
			return err
		}
	default:
		if err := w.readMeta(&e, dirfd, path.Base(p)); err != nil {
			return err
		}
	}
	if linked && e.LinkTo == "" && !w.merge {
		// The group's leader is the first of its paths that is listed:
		// one that failed above is not, and links to it would dangle.
		w.links[devIno{st.Dev, st.Ino}] = p
		w.leaders = append(w.leaders, len(w.list.Entries))
	}
	w.list.Entries = append(w.list.Entries, e)
	if w.merge {
		w.inodes = append(w.inodes, ino)
	}
	return nil
}

// ReadlinkAt returns the target of the symlink name in the directory open
// at dirfd, whatever its length (readlinkat(2) with a growing buffer). It
// returns the system error for anything but a symlink. Safe for concurrent
// use.
func ReadlinkAt(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}
