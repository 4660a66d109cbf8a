package transfer

import (
	"context"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/treewalk"
)

// LocalSource is a tree on this host seen as a sender: it lists the tree and
// opens ranges of its files. All access goes through an os.Root, so nothing
// outside the tree is read. It is safe for concurrent use.
type LocalSource struct {
	root *os.Root
	dir  *os.File // the root directory, for OpenBeneath
}

// OpenLocalSource opens the directory dir as a source. The caller closes it.
func OpenLocalSource(dir string) (*LocalSource, error) {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("source %s: %w: SRC must be a directory, whose contents are restored", dir, treewalk.ErrNotDir)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open source %s: %w", dir, err)
	}
	return NewLocalSource(r)
}

// NewLocalSource wraps an already opened root; closing the source closes it.
func NewLocalSource(r *os.Root) (*LocalSource, error) {
	d, err := r.Open(".")
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("open source %s: %w", r.Name(), err)
	}
	return &LocalSource{root: r, dir: d}, nil
}

// List walks the tree (treewalk.WalkRoot).
func (s *LocalSource) List(ctx context.Context) (treewalk.List, error) {
	return treewalk.WalkRoot(ctx, s.root)
}

// Open returns a reader of it.Length bytes at it.Offset of the regular file
// it.Entry.Path. The path is resolved without following any symlink (one
// planted since the walk makes the item fail instead of sending another
// file's contents), and what it names must still be a regular file.
func (s *LocalSource) Open(ctx context.Context, it *Item) (io.ReadCloser, error) {
	fd, err := treewalk.OpenBeneath(int(s.dir.Fd()), it.Entry.Path, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), it.Entry.Path)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("no longer a regular file")
	}
	return &rangeReader{f: f, r: io.NewSectionReader(f, it.Offset, it.Length)}, nil
}

// Close releases the tree's root.
func (s *LocalSource) Close() error {
	s.dir.Close()
	return s.root.Close()
}

type rangeReader struct {
	f *os.File
	r *io.SectionReader
}

func (r *rangeReader) Read(p []byte) (int, error) { return r.r.Read(p) }
func (r *rangeReader) Close() error               { return r.f.Close() }
