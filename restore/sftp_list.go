package restore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/pkg/sftp"
	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/treewalk"
)

// sftpList lists SRC srcPath on an SFTP server as a file list, in the
// order treewalk.Walk gives (the root ".", then each directory followed by
// its contents, names in byte order), and sets cs.root to the server
// directory its paths are beneath. A directory SRC (followed if it is a
// symlink, as a lone SRC is) is listed as ".", its contents below it; any
// other SRC under its name. The directories are read with READDIR,
// sftpDirsPerConn at a time on each connection; symlinks' targets with
// READLINK. Names a server should not send (empty, with a slash or a NUL,
// "." or "..") and device nodes (SFTP v3 carries no device number) are
// errors of the list; sockets are left out, as treewalk does. f drops what
// it excludes (a directory is not read). An unreadable directory or entry
// is an error of the list; a SRC that cannot be looked up, or a connection
// failure, is the error.
func sftpList(ctx context.Context, cs *sftpConns, srcPath string, f *treewalk.Filter) (treewalk.List, error) {
	root := srcPath
	if root == "" {
		root = "."
	}
	defer cs.c[0].wait()()
	c := cs.c[0].c
	fi, err := c.Stat(root)
	if err != nil {
		return treewalk.List{}, fmt.Errorf("SRC %s: %w", root, remoteErr(err))
	}
	if !fi.IsDir() {
		clean := path.Clean(root)
		cs.root = path.Dir(clean)
		name := path.Base(clean)
		lfi, err := c.Lstat(clean)
		if err != nil {
			return treewalk.List{}, fmt.Errorf("SRC %s: %w", root, remoteErr(err))
		}
		var list treewalk.List
		e, ok, err := sftpEntry(c, name, sftpJoin(cs.root, name), lfi)
		switch {
		case errors.Is(err, errConnLost):
			return treewalk.List{}, err
		case err != nil:
			list.Errors = append(list.Errors, &treewalk.PathError{Path: name, Err: err})
		case ok && !f.Excluded(name, false):
			list.Entries = append(list.Entries, e)
		}
		return list, nil
	}
	cs.root = path.Clean(root)
	top, _, err := sftpEntry(c, ".", cs.root, fi)
	if err != nil {
		return treewalk.List{}, fmt.Errorf("SRC %s: %w", root, err)
	}
	w := &sftpWalker{f: f, queue: []string{"."}, children: map[string][]treewalk.Entry{}}
	w.cond = sync.NewCond(&w.mu)
	var wg sync.WaitGroup
	for k := range len(cs.c) * sftpDirsPerConn {
		wg.Go(func() { w.work(ctx, cs, cs.c[k%len(cs.c)]) })
	}
	wg.Wait()
	if w.fatal != nil {
		return treewalk.List{}, w.fatal
	}
	if err := ctx.Err(); err != nil {
		return treewalk.List{}, err
	}
	list := treewalk.List{Entries: []treewalk.Entry{top}, Errors: w.errs}
	w.emit(&list.Entries, ".")
	slices.SortFunc(list.Errors, func(a, b *treewalk.PathError) int { return strings.Compare(a.Path, b.Path) })
	return list, nil
}

// sftpWalker is the shared state of a parallel walk: the directories left
// to read, and what each one read holds.
type sftpWalker struct {
	f        *treewalk.Filter
	mu       sync.Mutex
	cond     *sync.Cond
	queue    []string // directories to read, file-list paths
	busy     int      // directories being read
	children map[string][]treewalk.Entry
	errs     []*treewalk.PathError
	fatal    error
}

// work reads directories with c until none is left or the walk fails.
func (w *sftpWalker) work(ctx context.Context, cs *sftpConns, c *sftpConn) {
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && w.busy > 0 && w.fatal == nil {
			w.cond.Wait()
		}
		if len(w.queue) == 0 || w.fatal != nil {
			w.mu.Unlock()
			w.cond.Broadcast()
			return
		}
		dir := w.queue[len(w.queue)-1] // depth first: the queue stays short
		w.queue = w.queue[:len(w.queue)-1]
		w.busy++
		w.mu.Unlock()

		done := c.wait()
		entries, subdirs, errs, fatal := w.readDir(ctx, c.c, cs.root, dir)
		done()

		w.mu.Lock()
		w.busy--
		w.children[dir] = entries
		w.errs = append(w.errs, errs...)
		w.queue = append(w.queue, subdirs...)
		if fatal != nil && w.fatal == nil {
			w.fatal = fatal
			if errors.Is(fatal, errConnLost) {
				w.fatal = c.connLost(fatal)
			}
		}
		w.mu.Unlock()
		w.cond.Broadcast()
	}
}

// readDir reads the directory dir (a file-list path) beneath root.
func (w *sftpWalker) readDir(ctx context.Context, c *sftp.Client, root, dir string) (entries []treewalk.Entry, subdirs []string, errs []*treewalk.PathError, fatal error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, nil, err
	}
	fis, err := c.ReadDirContext(ctx, sftpJoin(root, dir))
	if err != nil {
		if err = remoteErr(err); errors.Is(err, errConnLost) {
			return nil, nil, nil, err
		}
		return nil, nil, []*treewalk.PathError{{Path: dir, Err: err}}, nil
	}
	seen := make(map[string]bool, len(fis))
	for _, fi := range fis {
		name := fi.Name()
		child := name
		if dir != "." {
			child = dir + "/" + name
		}
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || treewalk.ValidPath(child) != nil {
			errs = append(errs, &treewalk.PathError{Path: dir, Err: fmt.Errorf("the server listed a bad name %q: left out", name)})
			continue
		}
		if seen[name] {
			continue // a server listing a name twice: the first one counts
		}
		seen[name] = true
		isDir := fi.IsDir()
		if w.f.Excluded(child, isDir) {
			continue
		}
		e, ok, err := sftpEntry(c, child, sftpJoin(root, child), fi)
		if errors.Is(err, errConnLost) {
			return nil, nil, nil, err
		}
		if err != nil {
			errs = append(errs, &treewalk.PathError{Path: child, Err: err})
			continue
		}
		if !ok {
			continue
		}
		entries = append(entries, e)
		if e.Kind == treewalk.KindDir {
			subdirs = append(subdirs, child)
		}
	}
	return entries, subdirs, errs, nil
}

// emit appends dir's contents to out in tree order, each directory
// followed by its own.
func (w *sftpWalker) emit(out *[]treewalk.Entry, dir string) {
	kids := w.children[dir]
	slices.SortFunc(kids, func(a, b treewalk.Entry) int { return strings.Compare(a.Path, b.Path) })
	for _, e := range kids {
		*out = append(*out, e)
		if e.Kind == treewalk.KindDir {
			w.emit(out, e.Path)
		}
	}
}

// sftpEntry is the file-list entry p for fi, an SFTP name's attributes
// (remote is its server path, for READLINK). ok is false for what a file
// list leaves out (sockets). Owners are numeric (User and Group empty),
// MtimeNs whole seconds.
func sftpEntry(c *sftp.Client, p, remote string, fi os.FileInfo) (e treewalk.Entry, ok bool, err error) {
	st, isStat := fi.Sys().(*sftp.FileStat)
	if !isStat {
		return e, false, fmt.Errorf("the server sent no attributes")
	}
	e = treewalk.Entry{Path: p, Mode: st.Mode & 07777, Uid: st.UID, Gid: st.GID, MtimeNs: int64(st.Mtime) * 1e9}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		e.Kind, e.Size = treewalk.KindFile, int64(st.Size)
	case unix.S_IFDIR:
		e.Kind = treewalk.KindDir
	case unix.S_IFLNK:
		e.Kind = treewalk.KindSymlink
		if e.LinkTarget, err = c.ReadLink(remote); err != nil {
			return e, false, fmt.Errorf("readlink: %w", remoteErr(err))
		}
		if e.LinkTarget == "" {
			return e, false, fmt.Errorf("readlink: the server sent an empty target")
		}
	case unix.S_IFIFO:
		e.Kind = treewalk.KindFifo
	case unix.S_IFCHR, unix.S_IFBLK:
		return e, false, fmt.Errorf("a device node: SFTP version 3 carries no device number, so it is not restored (--method raw restores it)")
	case unix.S_IFSOCK:
		return e, false, nil
	default:
		return e, false, fmt.Errorf("the server sent an unknown file type (mode %#o)", st.Mode)
	}
	return e, true, nil
}

// sftpJoin is the server path of the file-list path rel beneath root.
func sftpJoin(root, rel string) string {
	if rel == "." {
		return root
	}
	return path.Join(root, rel)
}
