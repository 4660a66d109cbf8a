package bench

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// bufPool holds the scratch buffers of file writers: one per running writer,
// so memory stays at ioWorkers × ~320 KiB whatever the tree.
var bufPool = sync.Pool{New: func() any {
	b := make([]byte, 0, flushBytes+64<<10)
	return &b
}}

// writer creates a planned tree beneath one directory.
type writer struct {
	dir    string
	root   *os.Root
	p      *plan
	owners map[ownerClass]owner // nil: leave ownership alone
	stats  GenStats
	bytes  atomic.Int64
}

// errf wraps err with the full path of rel.
func (w *writer) errf(op, rel string, err error) error {
	return fmt.Errorf("generate: %s %s: %w", op, filepath.Join(w.dir, filepath.FromSlash(rel)), err)
}

// write creates the plan's tree in w.dir (which must exist and be empty):
// directories, then file contents in parallel, then links, then ownership,
// modes and times, deepest directories last so that nothing disturbs a time
// once it is set.
func (w *writer) write(ctx context.Context, rootMode uint32, rootMtimeNs int64) error {
	if err := w.mkdirs(ctx); err != nil {
		return err
	}
	if err := w.files(ctx); err != nil {
		return err
	}
	for i := range w.p.nodes {
		n := &w.p.nodes[i]
		switch n.kind {
		case nodeSymlink:
			if err := w.root.Symlink(n.data, n.path); err != nil {
				return w.errf("symlink", n.path, err)
			}
			w.stats.Symlinks++
		case nodeHardlink:
			if err := w.root.Link(n.data, n.path); err != nil {
				return w.errf("link", n.path, err)
			}
			w.stats.Hardlinks++
		}
	}
	if err := w.metadata(ctx, rootMode, rootMtimeNs); err != nil {
		return err
	}
	w.stats.Bytes = w.bytes.Load()
	return nil
}

// mkdirs creates the directories, one level of depth at a time and the
// directories of a level in parallel: creating an inode costs a journal
// write on most filesystems, and those overlap well.
func (w *writer) mkdirs(ctx context.Context) error {
	var levels [][]string
	for i := range w.p.nodes {
		n := &w.p.nodes[i]
		if n.kind != nodeDir {
			continue
		}
		d := depth(n.path)
		for len(levels) <= d {
			levels = append(levels, nil)
		}
		levels[d] = append(levels[d], n.path)
	}
	for _, level := range levels {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(ioWorkers())
		for _, d := range level {
			if gctx.Err() != nil {
				break
			}
			g.Go(func() error {
				if err := w.root.Mkdir(d, 0o700); err != nil {
					return w.errf("mkdir", d, err)
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		w.stats.Dirs += len(level)
	}
	return ctx.Err()
}

// ioWorkers is how many files and directories are created at once.
// Creating an inode mostly waits on the filesystem's journal and locks, not
// on the CPU, so several creators per CPU overlap those waits (on a 2-CPU VM
// with ext4, 8 creators instead of 2 made mkdir several times faster).
func ioWorkers() int { return max(8, runtime.GOMAXPROCS(0)) }

// files writes every regular file's contents, ioWorkers at a time, largest
// first so that a big dump does not start last and run alone.
func (w *writer) files(ctx context.Context) error {
	var order []int
	for i := range w.p.nodes {
		if w.p.nodes[i].kind == nodeFile {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(w.p.nodes[b].size, w.p.nodes[a].size)
	})
	w.stats.Files = len(order)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(ioWorkers())
	for _, i := range order {
		if gctx.Err() != nil {
			break
		}
		n := &w.p.nodes[i]
		g.Go(func() error { return w.file(gctx, n) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// file creates one regular file and writes its contents. Its randomness comes
// from its own stream, named by its path, so the order files are written in
// does not matter.
func (w *writer) file(ctx context.Context, n *node) error {
	f, err := w.root.OpenFile(n.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return w.errf("create", n.path, err)
	}
	bp := bufPool.Get().(*[]byte)
	k, err := writeContent(ctx, f, n, newRNG(w.p.seed, "file:"+n.path), *bp)
	bufPool.Put(bp)
	w.bytes.Add(k)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return w.errf("write", n.path, err)
	}
	return nil
}

// metadata sets owners, modes and times. Directories are visited deepest
// first; in each, the entries' owners, then modes (a chown clears setuid
// and setgid), then times are set through the directory's descriptor and
// without following symlinks. A directory's own turn comes with its parent's,
// after everything inside it is done, so no later change moves its mtime.
func (w *writer) metadata(ctx context.Context, rootMode uint32, rootMtimeNs int64) error {
	children := map[string][]*node{}
	dirs := []string{"."}
	for i := range w.p.nodes {
		n := &w.p.nodes[i]
		parent := path.Dir(n.path)
		children[parent] = append(children[parent], n)
		if n.kind == nodeDir {
			dirs = append(dirs, n.path)
		}
	}
	slices.SortStableFunc(dirs, func(a, b string) int {
		return cmp.Compare(depth(b), depth(a))
	})
	for _, d := range dirs {
		if err := ctx.Err(); err != nil {
			return err
		}
		fd, err := w.root.OpenFile(d, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		if err != nil {
			return w.errf("open", d, err)
		}
		for _, n := range children[d] {
			if err := w.setMeta(fd, path.Base(n.path), n.kind, n.mode, n.owner, n.mtimeNs); err != nil {
				fd.Close()
				return w.errf("set metadata of", n.path, err)
			}
		}
		if d == "." {
			err = w.setMeta(fd, ".", nodeDir, rootMode, ownerKeep, rootMtimeNs)
		}
		if cerr := fd.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return w.errf("set metadata of", d, err)
		}
	}
	return nil
}

// depth is the number of directories above a path ("." has -1).
func depth(p string) int {
	if p == "." {
		return -1
	}
	return strings.Count(p, "/")
}

// setMeta sets the owner, mode and times of the entry name in directory dir.
// Hardlinks share their inode with a file that gets its own turn.
func (w *writer) setMeta(dir *os.File, name string, kind nodeKind, mode uint32, oc ownerClass, mtimeNs int64) error {
	if kind == nodeHardlink {
		return nil
	}
	fd := int(dir.Fd())
	if o, ok := w.owners[oc]; ok && (o.uid >= 0 || o.gid >= 0) {
		if err := unix.Fchownat(fd, name, o.uid, o.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		w.stats.Chowned++
	}
	if kind != nodeSymlink {
		if err := unix.Fchmodat(fd, name, mode, 0); err != nil {
			return err
		}
	}
	ts := unix.NsecToTimespec(mtimeNs)
	return unix.UtimesNanoAt(fd, name, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}
