package transfer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"runtime"
	"strings"

	"github.com/restoresync/restoresync/transport"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// RoleSizes asks the server to size each of Hello.SizePaths: the bytes
// and the count of its regular files (a file with several links counted
// once), walked where they are, without sending any list
// (helloReply.Sizes, one per path, in order); after the reply the server
// awaits another handshake on the stream, or its end. Protocol version 8
// and later.
const RoleSizes = "sizes"

// maxSizePaths bounds the paths of one sizes request.
const maxSizePaths = 100000

// PathSize is one path's size in a RoleSizes reply: the payload bytes and
// the number of its regular files, or Error when it could not be walked
// (then Bytes and Files are 0). A wire type: explicit JSON names.
type PathSize struct {
	Bytes int64  `json:"bytes"`
	Files int64  `json:"files"`
	Error string `json:"error,omitempty"`
}

// Sizes dials d and asks the agent to size each of paths (RoleSizes):
// one request, one stream, however many paths, walked on the agent's host
// without a file list crossing the link. It returns one PathSize per
// path, in order; a path that cannot be walked has its Error set. An agent
// of an older protocol fails the handshake (ErrProtocol). Safe for
// concurrent use.
func Sizes(ctx context.Context, d transport.Dialer, paths []string, version string, t Timeouts) ([]PathSize, error) {
	if len(paths) > maxSizePaths {
		return nil, fmt.Errorf("%d paths to size: more than %d in one request", len(paths), maxSizePaths)
	}
	_, c, err := Open(ctx, d, Hello{Role: RoleSizes, SizePaths: paths, Version: version, Compression: "none"}, t)
	if err != nil {
		return nil, err
	}
	// The agent awaits another handshake after the reply: a stream on a
	// shared connection serves the next Open to the host (the first
	// restore of restore --accounts), any other ends.
	c.idle.Stop()
	if !transport.Park(c.raw) {
		c.s.Close()
	}
	if len(c.sizes) != len(paths) {
		return nil, fmt.Errorf("%w: %d sizes for %d paths", ErrProtocol, len(c.sizes), len(paths))
	}
	return c.sizes, nil
}

// sizes walks each of the client's paths, confined beneath cfg.Root when
// it is set (through an os.Root, so that no symlink leads out of it).
func (s *server) sizes(ctx context.Context) ([]PathSize, error) {
	if len(s.hello.SizePaths) > maxSizePaths {
		return nil, fmt.Errorf("%w: %d paths to size: more than %d", ErrProtocol, len(s.hello.SizePaths), maxSizePaths)
	}
	var served *os.Root
	if s.cfg.Root != "" {
		r, err := os.OpenRoot(s.cfg.Root)
		if err != nil {
			return nil, fmt.Errorf("open served root: %w", err)
		}
		defer r.Close()
		served = r
	}
	out := make([]PathSize, len(s.hello.SizePaths))
	// The paths are walked a few at a time: a walk waits on the file
	// system for every directory and inode it reads (from the disk, on a
	// cold backup server), and the paths are independent.
	var g errgroup.Group
	g.SetLimit(min(max(runtime.GOMAXPROCS(0), 2), 4))
	for i, p := range s.hello.SizePaths {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			n, files, err := s.sizeOf(ctx, served, p)
			if err != nil {
				out[i] = PathSize{Error: err.Error()}
				return nil
			}
			out[i] = PathSize{Bytes: n, Files: files}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// sizeOf is p's regular files' bytes and count: p itself when it is a
// file, everything beneath it when it is a directory (symlinks are not
// followed below p; p itself is, as a SRC is). A file with several
// links is counted once.
func (s *server) sizeOf(ctx context.Context, served *os.Root, p string) (int64, int64, error) {
	if _, err := s.resolve(p); err != nil {
		return 0, 0, err
	}
	var fsys fs.FS
	if served != nil {
		rel := strings.TrimPrefix(path.Clean("/"+p), "/")
		if rel == "" {
			rel = "."
		}
		fi, err := served.Stat(rel)
		if err != nil {
			return 0, 0, err
		}
		if !fi.IsDir() {
			return regularSize(fi), boolCount(fi.Mode().IsRegular()), nil
		}
		sub, err := served.OpenRoot(rel)
		if err != nil {
			return 0, 0, err
		}
		defer sub.Close()
		fsys = sub.FS()
	} else {
		if p == "" {
			p = "."
		}
		fi, err := os.Stat(p)
		if err != nil {
			return 0, 0, err
		}
		if !fi.IsDir() {
			return regularSize(fi), boolCount(fi.Mode().IsRegular()), nil
		}
		r, err := os.OpenRoot(p)
		if err != nil {
			return 0, 0, err
		}
		defer r.Close()
		fsys = r.FS()
	}
	return sizeWalk(ctx, fsys)
}

// SizeOf is the local path p's regular files' bytes and count, as the
// agent sizes a path (RoleSizes): p itself when it is a file, everything
// beneath it when it is a directory, without following symlinks below p;
// a file with several links counted once.
func SizeOf(ctx context.Context, p string) (bytes, files int64, err error) {
	return (&server{}).sizeOf(ctx, nil, p)
}

// sizeWalk sums the regular files beneath the directory fsys's root,
// each inode once.
func sizeWalk(ctx context.Context, fsys fs.FS) (int64, int64, error) {
	f, err := fsys.Open(".")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	dir, ok := f.(*os.File)
	if !ok {
		return 0, 0, fmt.Errorf("size: %T is not a directory file", f)
	}
	w := sizer{ctx: ctx, seen: map[sizeInode]bool{}}
	err = w.dir(dir)
	return w.bytes, w.files, err
}

type sizeInode struct{ dev, ino uint64 }

// sizer sums regular files by directory descriptor: each subdirectory is
// opened beneath its parent's descriptor (openat with O_NOFOLLOW, so no
// symlink is followed and nothing outside the tree is reached: the
// names come from the directory itself, never "..") and each file is
// stat'ed by name in it (fstatat, AT_SYMLINK_NOFOLLOW). That is one
// system call per entry plus a few per directory, where a walk by path
// through an os.Root resolves every path from the top, component by
// component: sizing 100 accounts of 420 files took 0.70 s that way.
// A directory that cannot be read, for want of permission, is skipped,
// as the walk of a restore reports it per entry.
type sizer struct {
	ctx          context.Context
	seen         map[sizeInode]bool // inodes of files with several links
	bytes, files int64
}

func (w *sizer) dir(d *os.File) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	ents, err := d.ReadDir(-1)
	if err != nil && len(ents) == 0 {
		if errors.Is(err, fs.ErrPermission) {
			return nil
		}
		return err
	}
	fd := int(d.Fd())
	for _, e := range ents {
		switch t := e.Type(); {
		case t.IsDir():
			sfd, err := unix.Openat(fd, e.Name(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				if err == unix.EACCES || err == unix.ENOENT || err == unix.ENOTDIR || err == unix.ELOOP {
					continue // unreadable, or gone or replaced since it was listed
				}
				return &fs.PathError{Op: "openat", Path: e.Name(), Err: err}
			}
			sub := os.NewFile(uintptr(sfd), e.Name())
			err = w.dir(sub)
			sub.Close()
			if err != nil {
				return err
			}
		case t.IsRegular():
			var st unix.Stat_t
			if err := unix.Fstatat(fd, e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue // gone since it was listed
			}
			if st.Mode&unix.S_IFMT != unix.S_IFREG {
				continue
			}
			if st.Nlink > 1 {
				k := sizeInode{uint64(st.Dev), st.Ino}
				if w.seen[k] {
					continue
				}
				w.seen[k] = true
			}
			w.bytes += st.Size
			w.files++
		}
	}
	return nil
}

func regularSize(fi fs.FileInfo) int64 {
	if fi.Mode().IsRegular() {
		return fi.Size()
	}
	return 0
}

func boolCount(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
