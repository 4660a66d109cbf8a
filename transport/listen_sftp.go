package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"

	"github.com/pkg/sftp"
)

// sessionHandler is the handler ListenAndServe runs for every session it
// accepts: cfg.Handler for "serve --stdio", the read-only SFTP server
// beneath cfg.SFTPRoot for the "sftp" subsystem, a refusal for any other
// subsystem. root is cfg.SFTPRoot opened (nil when it is "").
func sessionHandler(cfg ListenConfig, root *os.Root) func(context.Context, ServerSession) error {
	return func(ctx context.Context, s ServerSession) error {
		switch {
		case s.Subsystem == "":
			return cfg.Handler(ctx, s)
		case s.Subsystem == "sftp" && root != nil:
			return serveSFTP(ctx, s, root)
		case s.Subsystem == "sftp":
			return errors.New("this endpoint does not serve the sftp subsystem; it only runs \"restoresync serve --stdio\"")
		}
		return fmt.Errorf("subsystem %q is not supported; this endpoint runs \"restoresync serve --stdio\" and the sftp subsystem", s.Subsystem)
	}
}

// openSFTPRoot opens ListenConfig.SFTPRoot; nil for "".
func openSFTPRoot(dir string) (*os.Root, error) {
	if dir == "" {
		return nil, nil
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("listen: sftp root: %w", err)
	}
	return r, nil
}

// serveSFTP serves one SFTP session (pkg/sftp's RequestServer, SFTP
// version 3) read-only beneath root until the client ends it or ctx ends.
// Every path is resolved through root, so neither a path nor a symlink
// beneath it leads out (os.Root); every request that would change
// anything (open for writing, setstat, remove, rename, mkdir, rmdir,
// link, symlink) fails with "permission denied".
func serveSFTP(ctx context.Context, s ServerSession, root *os.Root) error {
	h := sftpFS{root: root}
	rwc := &sessionRWC{s: s}
	rs := sftp.NewRequestServer(rwc, sftp.Handlers{FileGet: h, FilePut: h, FileCmd: h, FileList: h})
	stop := context.AfterFunc(ctx, func() { rs.Close() })
	defer stop()
	err := rs.Serve()
	rwc.end()
	if errors.Is(err, io.EOF) || ctx.Err() != nil {
		return nil
	}
	return err
}

// sessionRWC is a session's channel as pkg/sftp's io.ReadWriteCloser.
// Its Writes are serialized with end: pkg/sftp's packet manager may
// still be sending a reply when Serve returns, and the session's
// CloseWrite, which follows, must not run beside a Write on the channel
// (x/crypto/ssh's channel does not guard its EOF flag against one).
type sessionRWC struct {
	s     ServerSession
	mu    sync.Mutex
	ended bool // end was called: Writes fail with io.ErrClosedPipe
}

func (c *sessionRWC) Read(p []byte) (int, error) { return c.s.Stdin.Read(p) }

func (c *sessionRWC) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return 0, io.ErrClosedPipe
	}
	return c.s.Stdout.Write(p)
}

// end waits for a Write under way and fails every later one.
func (c *sessionRWC) end() {
	c.mu.Lock()
	c.ended = true
	c.mu.Unlock()
}

func (c *sessionRWC) Close() error {
	if cl, ok := c.s.Stdin.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}

// sftpFS is the read-only file system of serveSFTP: pkg/sftp's request
// handlers over an os.Root.
type sftpFS struct{ root *os.Root }

// rel is the path beneath the root of an SFTP request's path (cleaned and
// absolute, "/" being the root).
func (sftpFS) rel(p string) string {
	r := strings.TrimPrefix(path.Clean("/"+p), "/")
	if r == "" {
		return "."
	}
	return r
}

// Fileread opens a regular file for reading (symlinks beneath the root
// followed, as sftp-server does, never out of it). Anything else is
// refused: a fifo would block the session, a device is not a backup's.
func (h sftpFS) Fileread(r *sftp.Request) (io.ReaderAt, error) {
	f, err := h.root.OpenFile(h.rel(r.Filepath), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s: not a regular file: %w", r.Filepath, os.ErrPermission)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Filewrite refuses: the endpoint is read-only.
func (sftpFS) Filewrite(*sftp.Request) (io.WriterAt, error) {
	return nil, sftp.ErrSSHFxPermissionDenied
}

// Filecmd refuses every command (setstat, rename, rmdir, mkdir, link,
// symlink, remove): the endpoint is read-only.
func (sftpFS) Filecmd(*sftp.Request) error { return sftp.ErrSSHFxPermissionDenied }

// Filelist answers "List" (a directory's entries, each as lstat sees it),
// "Stat" (following symlinks beneath the root) and, through Lstat,
// "Lstat".
func (h sftpFS) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	rel := h.rel(r.Filepath)
	switch r.Method {
	case "List":
		d, err := h.root.Open(rel)
		if err != nil {
			return nil, err
		}
		defer d.Close()
		fis, err := d.Readdir(-1) // lstat'ed beneath the directory's descriptor
		if err != nil {
			return nil, err
		}
		return listerAt(fis), nil
	case "Stat":
		fi, err := h.root.Stat(rel)
		if err != nil {
			return nil, err
		}
		return listerAt{fi}, nil
	}
	return nil, sftp.ErrSSHFxOpUnsupported
}

// Lstat answers "Lstat" without following a final symlink.
func (h sftpFS) Lstat(r *sftp.Request) (sftp.ListerAt, error) {
	fi, err := h.root.Lstat(h.rel(r.Filepath))
	if err != nil {
		return nil, err
	}
	return listerAt{fi}, nil
}

// Readlink returns a symlink's target as stored (a target that points out
// of the root is only text: nothing follows it).
func (h sftpFS) Readlink(p string) (string, error) {
	return h.root.Readlink(h.rel(p))
}

// listerAt is a listing held in memory.
type listerAt []os.FileInfo

// ListAt implements sftp.ListerAt.
func (l listerAt) ListAt(ls []os.FileInfo, off int64) (int, error) {
	if off >= int64(len(l)) {
		return 0, io.EOF
	}
	n := copy(ls, l[off:])
	if n < len(ls) {
		return n, io.EOF
	}
	return n, nil
}
