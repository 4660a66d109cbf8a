package dest

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// Tar extraction. A tar archive is untrusted input, whoever sent it: each
// entry is checked before anything is written, and everything is written by
// the safe writer, so nothing lands outside the destination and no symlink
// is followed whatever the archive holds. An entry that fails a check is
// recorded as a per-entry error and skipped:
//   - a name that is absolute, holds a ".." component or is otherwise not a
//     clean relative path (treewalk.ValidPath; a leading "./" and a
//     directory's trailing "/" are accepted, as tar writes them);
//   - an entry beneath, or in the place of, a symlink that came earlier in
//     the archive (symlinks are only created at the end, by Finish, and the
//     writer never follows one, but the archive is told it is wrong);
//   - a hardlink whose target is not an earlier regular file of the archive;
//   - on the agent's stream (never on an archive file, where a repeated
//     name replaces the earlier one, as with GNU tar), a path seen before;
//   - a device file when not running as root;
//   - anything the file system refuses (a name too long: ENAMETOOLONG).
//
// Regular files are written as they are read (each with WriteItem: a
// temporary name, metadata on the descriptor, rename), so memory stays
// bounded by the writer's buffer whatever the file sizes. Directories are
// created as they come (missing parents too, as tar does); their metadata,
// symlinks, special files and hardlinks are applied by Finish at the end.
//
// A regular file that the destination already holds with the same size and
// mtime (rsync's quick check) is not rewritten: its data is read past and
// only its owner and mode are corrected.

// ExtractOptions configure an Extractor. The zero value extracts archive
// files: any tar stream, "./" entry optional.
type ExtractOptions struct {
	// Agent says that every stream comes from restoresync's tar-sender:
	// each must end with its end marker (transfer.TarEnd), a path it lists
	// twice is refused, and what makes a stream unreadable wraps
	// transfer.ErrProtocol.
	Agent bool
	// ArchiveRoot gives DST, when the Writer created it and no entry of the
	// archive is "./", the metadata tar gives a directory it makes (mode
	// 0755, the current time, owned by the user running the restore). Off,
	// such a DST gets what Finish gives a created DST (0777 less the
	// umask), and a DST that existed is left alone either way.
	ArchiveRoot bool
	// OnFile, when not nil, is called after each regular file is put in
	// place, with its path (slash-separated, relative to DST) and size in
	// bytes, from the goroutine of the stream that carried it: it must be
	// safe for concurrent use and return quickly.
	OnFile func(path string, sizeBytes int64)
}

// ExtractStats counts what an Extractor did, as a restore's report
// counts it.
type ExtractStats struct {
	// Files and Bytes are the regular files written and their payload in
	// bytes (a file an agent marked incomplete is taken back out).
	Files int
	Bytes int64
	// Skipped is the number of regular files found up to date.
	Skipped int
	// Dirs (the root not included), Symlinks and Hardlinks count those
	// entries of the archive.
	Dirs, Symlinks, Hardlinks int
	// Errors are the entries that failed, in the order they failed.
	Errors []*treewalk.PathError
}

// Extractor extracts one or more tar streams into a destination through
// its own Writer. It is safe for concurrent use by one goroutine per
// stream; the streams share what has been seen (directories made,
// symlinks, regular files), so a sharded archive checks as one.
type Extractor struct {
	w      *Writer
	onFile func(path string, size int64)
	agent  bool
	// newRoot: DST was made by this restore and takes tar's metadata for a
	// directory it makes when the archive has no "./" entry
	// (ExtractOptions.ArchiveRoot).
	newRoot bool
	// protoErr, when not nil, wraps errors that make an archive unreadable
	// (transfer.ErrProtocol for an agent's stream).
	protoErr error

	mu       sync.Mutex
	stats    ExtractStats
	dirs     map[string]treewalk.Entry // every directory: from the archive or implicit
	explicit map[string]bool           // directories that had their own entry
	made     map[string]bool           // directories known to exist in the destination
	symlinks map[string]bool           // symlink entries of the archive
	files    map[string]fileRec        // regular files of the archive extracted or up to date, by path
	finish   []treewalk.Entry          // symlinks, special files and hardlinks, for Finish
	names    map[string]bool           // every entry's path, on an agent's stream only (protoErr set)
	lost     map[string]bool           // regular files of the archive that failed
}

// NewExtractor opens a Writer on dst with wo (see NewWriter: dst is
// created if missing) and returns an Extractor that writes through it.
// Errors are NewWriter's. The caller closes the Extractor.
func NewExtractor(dst string, wo WriterOptions, xo ExtractOptions) (*Extractor, error) {
	_, statErr := os.Lstat(dst)
	w, err := NewWriter(dst, wo)
	if err != nil {
		return nil, err
	}
	x := newExtractor(w)
	x.onFile, x.agent = xo.OnFile, xo.Agent
	if xo.Agent {
		x.protoErr = transfer.ErrProtocol
	}
	x.newRoot = xo.ArchiveRoot && statErr != nil
	return x, nil
}

func newExtractor(w *Writer) *Extractor {
	return &Extractor{
		w:    w,
		dirs: map[string]treewalk.Entry{}, explicit: map[string]bool{}, made: map[string]bool{".": true},
		symlinks: map[string]bool{}, files: map[string]fileRec{},
	}
}

// Close closes the Extractor's Writer (see Writer.Close), after the last
// Extract and Finish.
func (x *Extractor) Close() error { return x.w.Close() }

// Stats returns what the Extractor did so far. Safe for concurrent use.
func (x *Extractor) Stats() ExtractStats {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := x.stats
	s.Errors = slices.Clone(s.Errors)
	return s
}

// Fail records a per-entry error on name: an entry's path, or its name as
// in the archive when it could not be made a path. Safe for concurrent
// use.
func (x *Extractor) Fail(name string, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.stats.Errors = append(x.stats.Errors, &treewalk.PathError{Path: name, Err: err})
}

// readErr remembers the first error the archive's reader returned (while a
// file's data was copied, that error is the stream's, not the file's), and
// how many zero bytes ended what was read so far: an archive ends with two
// zero blocks, and one that stops without them was cut short (archive/tar
// takes an end of input at a block boundary for the end of the archive).
type readErr struct {
	r     io.Reader
	err   error
	zeros int64
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF && r.err == nil {
		r.err = err
	}
	i := n
	for i > 0 && p[i-1] == 0 {
		i--
	}
	if i == 0 {
		r.zeros += int64(n)
	} else {
		r.zeros = int64(n - i)
	}
	return n, err
}

// Extract reads one tar archive from r to its end and extracts it; call it
// once per stream; the calls for several streams may run at once, one
// goroutine each. The error is for what
// ends the archive early (a corrupt or truncated archive, a failing
// stream, ctx cancelled: then ctx.Err()); per-entry problems are recorded
// (Stats) and the archive goes on.
func (x *Extractor) Extract(ctx context.Context, r io.Reader) error {
	return x.extract(ctx, r, x.agent)
}

// extract is Extract; fromAgent says r is a tar-sender's stream, which
// must end with its end marker (transfer.TarEnd).
func (x *Extractor) extract(ctx context.Context, r io.Reader, fromAgent bool) error {
	src := &readErr{r: r}
	tr := tar.NewReader(src)
	sawEnd := false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			switch {
			case fromAgent && !sawEnd:
				return fmt.Errorf("%w: the tar stream ended before the sender's end marker", transfer.ErrProtocol)
			case !fromAgent && src.zeros < 2*512:
				return fmt.Errorf("read tar archive: %w (no end-of-archive blocks: the archive is truncated or empty)", io.ErrUnexpectedEOF)
			}
			return nil
		}
		if hdr != nil && hdr.Typeflag == tar.TypeXGlobalHeader && hdr.PAXRecords[transfer.TarEnd] != "" {
			sawEnd = true
			continue
		}
		if errors.Is(err, tar.ErrInsecurePath) && hdr != nil {
			err = nil // checked below, like every name
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if x.protoErr != nil {
				return fmt.Errorf("%w: read tar archive: %w", x.protoErr, err)
			}
			return fmt.Errorf("read tar archive: %w", err)
		}
		if err := x.entry(ctx, hdr, tr, src); err != nil {
			return err
		}
	}
}

// Finish completes the extraction once every stream has ended: it gives
// Writer.Finish the directories, symlinks, special files and hardlinks
// seen, and records its per-entry errors. Call it once, from one
// goroutine, after every Extract has returned. The error is for
// cancellation only, wrapped as "finish: ...".
func (x *Extractor) Finish(ctx context.Context) error {
	var root *treewalk.Entry
	if x.newRoot {
		root = &treewalk.Entry{Path: ".", Kind: treewalk.KindDir, Mode: 0o755, Uid: uint32(os.Geteuid()), Gid: uint32(os.Getegid()), MtimeNs: time.Now().UnixNano()}
	}
	return x.finishAll(ctx, root)
}

// finishAll gives Finish the directories, symlinks, special files and
// hardlinks seen, parents before children (sorted by path), and records
// its errors. root, when not nil, is the destination's metadata for an
// archive without a "./" entry.
func (x *Extractor) finishAll(ctx context.Context, root *treewalk.Entry) error {
	x.mu.Lock()
	list := slices.Clone(x.finish)
	for _, d := range x.dirs {
		list = append(list, d)
	}
	if _, ok := x.dirs["."]; !ok && root != nil {
		list = append(list, *root)
	}
	x.mu.Unlock()
	slices.SortStableFunc(list, func(a, b treewalk.Entry) int { return strings.Compare(a.Path, b.Path) })
	// A path listed twice (an archive may repeat a name): the last wins.
	out := list[:0]
	for i := range list {
		if n := len(out); n > 0 && out[n-1].Path == list[i].Path {
			out[n-1] = list[i]
			continue
		}
		out = append(out, list[i])
	}
	errs, err := x.w.Finish(ctx, out)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.stats.Errors = append(x.stats.Errors, errs...)
	if err != nil {
		return fmt.Errorf("finish: %w", err)
	}
	return nil
}
