package transfer

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/restoresync/restoresync/treewalk"
)

// LocalSource is a tree on this host seen as a sender: it lists the tree and
// opens ranges of its files. All access goes through an os.Root, so nothing
// outside the tree is read. It is safe for concurrent use.
type LocalSource struct {
	root *os.Root
	// ReadBufferBytes is the size of the buffer each Open's reader uses
	// for disk reads; 0 means 256 KiB.
	ReadBufferBytes int
}

// OpenLocalSource opens the directory dir as a source. The caller closes it.
func OpenLocalSource(dir string) (*LocalSource, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open source %s: %w", dir, err)
	}
	return &LocalSource{root: r}, nil
}

// NewLocalSource wraps an already opened root; closing the source closes it.
func NewLocalSource(r *os.Root) *LocalSource { return &LocalSource{root: r} }

// List walks the tree (treewalk.WalkRoot).
func (s *LocalSource) List(ctx context.Context) (treewalk.List, error) {
	return treewalk.WalkRoot(ctx, s.root)
}

// Open returns a reader of it.Length bytes at it.Offset of the regular file
// it.Entry.Path. A path that is not a regular file any more (a symlink
// planted since the walk, say) is refused.
func (s *LocalSource) Open(ctx context.Context, it *Item) (io.ReadCloser, error) {
	f, err := s.root.OpenFile(it.Entry.Path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
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
func (s *LocalSource) Close() error { return s.root.Close() }

type rangeReader struct {
	f *os.File
	r *io.SectionReader
}

func (r *rangeReader) Read(p []byte) (int, error) { return r.r.Read(p) }
func (r *rangeReader) Close() error               { return r.f.Close() }
