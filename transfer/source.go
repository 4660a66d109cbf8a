package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/treewalk"
)

// LocalSource is a tree on this host seen as a sender: it lists the tree and
// opens ranges of its files. All access goes through os.Roots, so nothing
// outside the tree (or the bases of a selection) is read. It is safe for
// concurrent use.
type LocalSource struct {
	root   *os.Root // the first base (the tree itself, without a selection)
	dir    *os.File // root's directory, for OpenBeneath
	bases  []*os.Root
	dirs   []*os.File      // bases' directories, for OpenBeneath
	parts  []treewalk.Part // what List walks
	filter *treewalk.Filter
	failed []*treewalk.PathError // parts whose base could not be opened

	partBase []int // parts[i]'s base: an index in bases and dirs
}

// OpenLocalSource opens dir as a source: a directory's contents, or, when
// dir is a file (or a symlink, a fifo...), that one entry under its own
// name. The caller closes it.
func OpenLocalSource(dir string) (*LocalSource, error) {
	return OpenSelection(Selection{Roots: []SourceRoot{SingleRoot(dir, os.Stat)}}, OpenBase)
}

// OpenBase opens a selection's base directory on this host, symlinks in
// its path followed ("" is the current directory). It is OpenSelection's
// opener for a source that is not confined.
func OpenBase(base string) (*os.Root, error) {
	if base == "" {
		base = "."
	}
	return os.OpenRoot(base)
}

// SingleRoot is the root of a restore with one SRC p: its contents when it
// is a directory (stat follows symlinks), else p itself under its name.
func SingleRoot(p string, stat func(string) (fs.FileInfo, error)) SourceRoot {
	name := p
	if name == "" {
		name = "."
	}
	if fi, err := stat(name); err == nil && !fi.IsDir() {
		clean := path.Clean(p)
		if b := path.Base(clean); b != "." && b != "/" && b != ".." {
			return SourceRoot{Base: path.Dir(clean), Rel: b}
		}
	}
	return SourceRoot{Base: p, Rel: "."}
}

// OpenSelection opens the bases of sel with open (each distinct Base once)
// and compiles its filters. A base that cannot be opened fails its parts,
// which List reports as errors of the list (rsync's "some files could not
// be transferred"), except for a part that is the base itself (a tree
// restored as DST): that is an error, wrapped with the base's name, as are
// a bad Rel or filter rule (wrapping treewalk.ErrBadPath or
// treewalk.ErrBadPattern) and a selection whose parts all fail (bases
// that cannot be opened, parts that cannot be looked up). The caller
// closes the source.
func OpenSelection(sel Selection, open func(base string) (*os.Root, error)) (*LocalSource, error) {
	if len(sel.Roots) == 0 {
		return nil, fmt.Errorf("%w: a selection without sources", ErrProtocol)
	}
	f, err := treewalk.ParseFilter(sel.Filters)
	if err != nil {
		return nil, err
	}
	s := &LocalSource{filter: f}
	baseIdx := map[string]int{}
	for _, r := range sel.Roots {
		if err := treewalk.ValidPath(r.Rel); err != nil {
			s.Close()
			return nil, fmt.Errorf("source %q: %w", r.Rel, err)
		}
		i, ok := baseIdx[r.Base]
		if !ok {
			root, err := open(r.Base)
			if err == nil && r.Rel == "." {
				if fi, serr := root.Stat("."); serr == nil && !fi.IsDir() {
					root.Close()
					err = treewalk.ErrNotDir
				}
			}
			if err != nil && r.Rel != "." && len(sel.Roots) > 1 {
				s.failed = append(s.failed, &treewalk.PathError{Path: r.Rel, Err: fmt.Errorf("open %s: %w", r.Base, pathErrorCause(r.Base, err))})
				continue
			}
			if err != nil {
				s.Close()
				return nil, sourceError(r.Base, err)
			}
			d, err := root.Open(".")
			if err != nil {
				root.Close()
				s.Close()
				return nil, sourceError(r.Base, err)
			}
			i = len(s.bases)
			baseIdx[r.Base] = i
			s.bases = append(s.bases, root)
			s.dirs = append(s.dirs, d)
		}
		s.parts = append(s.parts, treewalk.Part{Base: s.bases[i], Rel: r.Rel, ImpliesRoot: r.ImpliesRoot})
		s.partBase = append(s.partBase, i)
	}
	if len(s.bases) == 0 {
		return nil, fmt.Errorf("open source: %w", s.failed[0].Err)
	}
	if err := s.somePartExists(len(sel.Roots)); err != nil {
		s.Close()
		return nil, err
	}
	s.root, s.dir = s.bases[0], s.dirs[0]
	return s, nil
}

// sourceError is the error of a source base that cannot be opened, said
// once: "open source /snap/x: no such file or directory", not the path and
// the operation twice as an *fs.PathError about base would add them.
// errors.Is still sees the cause (fs.ErrNotExist).
func sourceError(base string, err error) error {
	return fmt.Errorf("open source %s: %w", base, pathErrorCause(base, err))
}

// pathErrorCause returns the cause of err when err is an *fs.PathError
// about path itself (what the caller's message already names), else err.
func pathErrorCause(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == path && err == error(pe) {
		return pe.Err
	}
	return err
}

// somePartExists returns nil when at least one part can be looked up
// (lstat) beneath its base. When none can, the restore has nothing to
// send: like one missing SRC, that is an error of the whole run (before
// the receiver creates DST), not n per-file errors of an empty list. The
// error names how many of the n sources failed and wraps the first one's
// error. rsync exits 23 for several missing SRCs and for one, and creates
// no DST either way.
func (s *LocalSource) somePartExists(n int) error {
	var first error
	for _, pt := range s.parts {
		if pt.Rel == "." {
			return nil
		}
		_, err := pt.Base.Lstat(pt.Rel)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = s.failed[0]
	}
	if n == 1 {
		return fmt.Errorf("open source: %w", first)
	}
	return fmt.Errorf("open source: none of the %d sources can be read, nothing to restore: %w", n, first)
}

// NewLocalSource wraps an already opened root; closing the source closes it.
func NewLocalSource(r *os.Root) (*LocalSource, error) {
	return OpenSelection(Selection{Roots: []SourceRoot{{Rel: "."}}}, func(string) (*os.Root, error) { return r, nil })
}

// List walks the tree (treewalk.WalkRoot), or the selection's parts
// (treewalk.WalkParts, which merges parts of several bases as rsync does)
// through its filter.
func (s *LocalSource) List(ctx context.Context) (treewalk.List, error) {
	if len(s.parts) == 1 && s.parts[0].Rel == "." && s.filter == nil && len(s.failed) == 0 {
		return treewalk.WalkRoot(ctx, s.root)
	}
	list, err := treewalk.WalkParts(ctx, s.parts, s.filter)
	list.Errors = append(list.Errors, s.failed...)
	return list, err
}

// ListChunks is List as chunks (treewalk.Chunks), walked as they are
// read: one tree or one part chunk by chunk; several parts merged as
// they are walked (treewalk.WalkPartsChunks). The caller closes it.
func (s *LocalSource) ListChunks(ctx context.Context) *treewalk.Chunks {
	if len(s.parts) == 1 && s.parts[0].Rel == "." && s.filter == nil && len(s.failed) == 0 {
		return treewalk.WalkRootChunks(ctx, s.root)
	}
	return treewalk.WalkPartsChunks(ctx, s.parts, s.filter, s.failed)
}

// openFile opens the file-list path p beneath the base the list took it
// from, without following any symlink. With one base, that is the base.
// With several, it is the base of the first part (in the order given)
// whose walk reaches p, as treewalk.WalkParts keeps the first part's entry
// of a path: p is at or below the part's Rel, no directory from Rel down
// to p's parent is excluded by the filter, and p is there. This is worked
// out from the tree, not from a List of this source, so every connection
// of a restore reads the same file, whichever one listed the tree. A part
// where p, or a directory on its way, is missing (or is not a directory)
// is passed over; any other error is returned.
func (s *LocalSource) openFile(p string, flags int) (int, error) {
	if len(s.dirs) == 1 {
		return treewalk.OpenBeneath(int(s.dirs[0].Fd()), p, flags)
	}
	for i, pt := range s.parts {
		if !treewalk.IsUnder(p, pt.Rel) || s.excludedOnTheWay(pt.Rel, p) {
			continue
		}
		fd, err := treewalk.OpenBeneath(int(s.dirs[s.partBase[i]].Fd()), p, flags)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			continue
		}
		return fd, err
	}
	return -1, fmt.Errorf("%s: not in the selection", p)
}

// excludedOnTheWay reports whether the filter excludes a directory that
// the walk of a part rel passes on its way to p: rel itself (unless ".")
// and those below it, down to p's parent.
func (s *LocalSource) excludedOnTheWay(rel, p string) bool {
	for d := path.Dir(p); d != "." && treewalk.IsUnder(d, rel); d = path.Dir(d) {
		if s.filter.Excluded(d, true) {
			return true
		}
	}
	return false
}

// Open returns a reader of it.Length bytes at it.Offset of the regular file
// it.Entry.Path, read beneath its base (openFile). The path is resolved
// without following any symlink (one
// planted since the walk makes the item fail instead of sending another
// file's contents), and what it names must still be a regular file. After
// the last byte the reader checks, on the open descriptor (fstat), that the
// file still has the size and mtime of it.Entry: at its end it returns an
// error wrapping ErrSourceChanged instead of io.EOF if not.
func (s *LocalSource) Open(ctx context.Context, it *Item) (io.ReadCloser, error) {
	fd, err := s.openFile(it.Entry.Path, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return openedRange(fd, it)
}

// openedRange is Open's reader of it on fd, a descriptor just opened
// without following symlinks, which it takes over (and closes on error).
func openedRange(fd int, it *Item) (io.ReadCloser, error) {
	// The descriptor stays a plain one: an *os.File would cost an fcntl
	// and a failed registration with Go's poller (a regular file cannot
	// be polled) per file.
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("stat: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("no longer a regular file")
	}
	r := &rangeReader{fd: fd, entry: &it.Entry}
	r.r = *io.NewSectionReader(fdReaderAt(fd), it.Offset, it.Length)
	return r, nil
}

// readBatch returns a reader of the items of one read request, for one
// goroutine: Open as LocalSource.Open, but with one base each file is
// opened by its name beneath a descriptor of its directory, which is
// resolved beneath the base once for the consecutive items of that
// directory (with the same rules: no symlink followed, nothing outside
// the base), as tar reads a directory's files; the walk lists a
// directory's files together, so a batch of small files resolves each of
// its directories about once instead of every directory on the way to
// every file. The directory is held until the batch moves to another one
// or is closed, so it is resolved within the request, as a file opened by
// its whole path is. Close releases it.
func (s *LocalSource) readBatch() *sourceBatch {
	return &sourceBatch{s: s, dirfd: -1}
}

// sourceBatch is LocalSource.readBatch's reader; not safe for concurrent
// use.
type sourceBatch struct {
	s     *LocalSource
	dir   string // the directory dirfd holds ("" for none)
	dirfd int    // -1 for none
}

// Open implements ItemSource for the batch's items.
func (b *sourceBatch) Open(ctx context.Context, it *Item) (io.ReadCloser, error) {
	p := it.Entry.Path
	i := strings.LastIndexByte(p, '/')
	if len(b.s.dirs) != 1 || i <= 0 {
		return b.s.Open(ctx, it)
	}
	if dir := p[:i]; dir != b.dir {
		b.Close()
		fd, err := treewalk.OpenBeneath(int(b.s.dirs[0].Fd()), dir, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			// The whole path's resolution says what is in the way
			// (a symlink is ErrSymlinkInPath, not O_DIRECTORY's
			// ENOTDIR), by the same rules.
			return b.s.Open(ctx, it)
		}
		b.dir, b.dirfd = dir, fd
	}
	fd, err := treewalk.OpenBeneath(b.dirfd, p[i+1:], unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return openedRange(fd, it)
}

// Close releases the directory the batch holds; the batch can go on.
func (b *sourceBatch) Close() {
	if b.dirfd >= 0 {
		unix.Close(b.dirfd)
	}
	b.dir, b.dirfd = "", -1
}

// fdReaderAt reads a regular file's descriptor with pread(2).
type fdReaderAt int

// ReadAt implements io.ReaderAt: it fills p from off, or returns io.EOF
// with what there was before the end of the file.
func (f fdReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		k, err := unix.Pread(int(f), p[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if k == 0 {
			return n, io.EOF
		}
		n += k
	}
	return n, nil
}

// Close releases the bases.
func (s *LocalSource) Close() error {
	for _, d := range s.dirs {
		d.Close()
	}
	var err error
	for _, r := range s.bases {
		if cerr := r.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

type rangeReader struct {
	fd     int
	r      io.SectionReader
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

// Close closes the file; later calls do nothing (the descriptor number
// may belong to another file by then).
func (r *rangeReader) Close() error {
	if r.fd < 0 {
		return nil
	}
	fd := r.fd
	r.fd = -1
	return unix.Close(fd)
}

// unchanged checks the open file against the file list's size and mtime
// (see finishRead).
func (r *rangeReader) unchanged() error {
	var st unix.Stat_t
	if err := unix.Fstat(r.fd, &st); err != nil {
		return fmt.Errorf("stat after reading: %w", err)
	}
	if st.Size != r.entry.Size || st.Mtim.Nano() != r.entry.MtimeNs {
		return fmt.Errorf("%w (now %d bytes, mtime %s; listed with %d bytes, mtime %s): not restored, rerun to get it",
			ErrSourceChanged, st.Size, time.Unix(0, st.Mtim.Nano()).UTC().Format(time.RFC3339Nano),
			r.entry.Size, time.Unix(0, r.entry.MtimeNs).UTC().Format(time.RFC3339Nano))
	}
	return nil
}
