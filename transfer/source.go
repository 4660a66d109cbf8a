package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

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

// ErrSourceChanged is the item error for a source file whose size or mtime
// differ, after its data was read, from the file list's: it was written to
// since it was listed, so the bytes read may mix two versions. The file is
// not put in place (it would carry the listed mtime, and the quick check
// would then take the mixed content for up to date); the other files go on,
// and a rerun sends it. rsync's wording for the same is "file has vanished"
// (for a deleted file) or a warning that it changed.
var ErrSourceChanged = errors.New("file changed while it was being read")

// Open returns a reader of it.Length bytes at it.Offset of the regular file
// it.Entry.Path. The path is resolved without following any symlink (one
// planted since the walk makes the item fail instead of sending another
// file's contents), and what it names must still be a regular file. After
// the last byte the reader checks, on the open descriptor (fstat), that the
// file still has the size and mtime of it.Entry: at its end it returns an
// error wrapping ErrSourceChanged instead of io.EOF if not.
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
	return &rangeReader{f: f, r: io.NewSectionReader(f, it.Offset, it.Length), entry: &it.Entry}, nil
}

// Close releases the tree's root.
func (s *LocalSource) Close() error {
	s.dir.Close()
	return s.root.Close()
}

type rangeReader struct {
	f      *os.File
	r      *io.SectionReader
	entry  *treewalk.Entry
	served int64
}

func (r *rangeReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.served += int64(n)
	// A file that shrank ends early: the caller reports the short read.
	if err == io.EOF && r.served == r.r.Size() {
		if cerr := r.unchanged(); cerr != nil {
			return n, cerr
		}
	}
	return n, err
}

func (r *rangeReader) Close() error { return r.f.Close() }

// unchanged checks the open file against the file list's size and mtime
// (see finishRead).
func (r *rangeReader) unchanged() error {
	var st unix.Stat_t
	if err := unix.Fstat(int(r.f.Fd()), &st); err != nil {
		return fmt.Errorf("stat after reading: %w", err)
	}
	if st.Size != r.entry.Size || st.Mtim.Nano() != r.entry.MtimeNs {
		return fmt.Errorf("%w (now %d bytes, mtime %s; listed with %d bytes, mtime %s): not restored, rerun to get it",
			ErrSourceChanged, st.Size, time.Unix(0, st.Mtim.Nano()).UTC().Format(time.RFC3339Nano),
			r.entry.Size, time.Unix(0, r.entry.MtimeNs).UTC().Format(time.RFC3339Nano))
	}
	return nil
}
