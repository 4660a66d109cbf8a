package dest

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

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

// ExtractStats counts what an Extractor did, in Report's terms.
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

// Close closes the Extractor's Writer (see Writer.Close).
func (x *Extractor) Close() error { return x.w.Close() }

// Stats returns what the Extractor did so far. Safe for concurrent use.
func (x *Extractor) Stats() ExtractStats {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := x.stats
	s.Errors = slices.Clone(s.Errors)
	return s
}

// fileRec is what the extractor keeps of a regular file of the archive.
type fileRec struct {
	leader  string // a hardlink follower's group leader; "" for a leader
	written bool   // written by this run (not found up to date)
	size    int64  // bytes written
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
// once per stream, from one goroutine per stream. The error is for what
// ends the archive early (a corrupt or truncated archive, a failing
// stream, ctx cancelled: then ctx.Err()); per-entry problems are recorded
// (Stats) and the archive goes on.
func (x *Extractor) Extract(ctx context.Context, r io.Reader) error {
	return x.extract(ctx, r, x.agent)
}

// extract reads one tar archive from r to its end and extracts it. The
// error is for what ends the archive early (a corrupt or truncated
// archive, a failing stream, ctx cancelled); per-entry problems go into
// the report. fromAgent says r is a tar-sender's stream, which must end
// with its end marker (transfer.TarEnd).
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

// tarPath turns an archive name into a file-list path: "./" prefixes and a
// trailing slash are dropped, and what is left must pass
// treewalk.ValidPath.
func tarPath(name string) (string, error) {
	p := name
	for strings.HasPrefix(p, "./") {
		p = p[2:]
	}
	p = strings.TrimSuffix(p, "/")
	if p == "" && name != "" {
		p = "."
	}
	if err := treewalk.ValidPath(p); err != nil {
		return "", fmt.Errorf("tar entry name %q: %w", name, err)
	}
	return p, nil
}

// entryOf converts a tar header into a file-list entry.
func entryOf(hdr *tar.Header, p string) (treewalk.Entry, error) {
	e := treewalk.Entry{
		Path:    p,
		Mode:    uint32(hdr.Mode) & 0o7777,
		User:    hdr.Uname,
		Group:   hdr.Gname,
		MtimeNs: hdr.ModTime.UnixNano(),
	}
	if hdr.Mode < 0 || hdr.Uid < 0 || hdr.Gid < 0 || int64(hdr.Uid) > 1<<32-1 || int64(hdr.Gid) > 1<<32-1 {
		return e, fmt.Errorf("mode or owner out of range (mode %o, uid %d, gid %d)", hdr.Mode, hdr.Uid, hdr.Gid)
	}
	e.Uid, e.Gid = uint32(hdr.Uid), uint32(hdr.Gid)
	switch hdr.Typeflag {
	case tar.TypeDir:
		e.Kind = treewalk.KindDir
	case tar.TypeReg, tar.TypeRegA, tar.TypeCont, tar.TypeGNUSparse:
		e.Kind, e.Size = treewalk.KindFile, hdr.Size
		if e.Size < 0 {
			return e, fmt.Errorf("negative size %d", e.Size)
		}
	case tar.TypeLink:
		lp, err := tarPath(hdr.Linkname)
		if err != nil || lp == "." {
			return e, fmt.Errorf("hardlink target %q leaves the archive's tree or is not a clean relative path", hdr.Linkname)
		}
		e.Kind, e.LinkTo = treewalk.KindFile, lp
	case tar.TypeSymlink:
		if hdr.Linkname == "" || strings.IndexByte(hdr.Linkname, 0) >= 0 {
			return e, errors.New("symlink without a valid target")
		}
		e.Kind, e.LinkTarget = treewalk.KindSymlink, hdr.Linkname
	case tar.TypeFifo:
		e.Kind = treewalk.KindFifo
	case tar.TypeChar, tar.TypeBlock:
		e.Kind = treewalk.KindCharDev
		if hdr.Typeflag == tar.TypeBlock {
			e.Kind = treewalk.KindBlkDev
		}
		if hdr.Devmajor < 0 || hdr.Devmajor > 1<<32-1 || hdr.Devminor < 0 || hdr.Devminor > 1<<32-1 {
			return e, fmt.Errorf("device number %d,%d out of range", hdr.Devmajor, hdr.Devminor)
		}
		e.Rdev = unix.Mkdev(uint32(hdr.Devmajor), uint32(hdr.Devminor))
	default:
		return e, fmt.Errorf("unsupported tar entry type %q", hdr.Typeflag)
	}
	if p == "." && e.Kind != treewalk.KindDir {
		return e, fmt.Errorf("a %s cannot replace the destination directory", e.Kind)
	}
	return e, tarMeta(hdr, &e)
}

// entry handles one header; data is the archive's reader, positioned at
// the entry's data.
func (x *Extractor) entry(ctx context.Context, hdr *tar.Header, data io.Reader, src *readErr) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		x.marker(hdr)
		return nil
	}
	p, err := tarPath(hdr.Name)
	if err != nil {
		x.Fail(hdr.Name, err)
		return nil
	}
	e, err := entryOf(hdr, p)
	if err == nil {
		err = x.check(&e)
	}
	if err == nil && p != "." {
		err = x.mkdirParents(p)
	}
	if err != nil {
		x.Fail(p, err)
		return nil
	}
	switch {
	case e.Kind == treewalk.KindDir:
		return x.dir(&e)
	case e.HasData():
		return x.file(ctx, &e, data, src)
	default:
		x.mu.Lock()
		defer x.mu.Unlock()
		switch {
		case e.IsHardlink():
			x.files[e.Path] = fileRec{leader: e.LinkTo}
			x.stats.Hardlinks++
		case e.Kind == treewalk.KindSymlink:
			x.symlinks[e.Path] = true
			x.stats.Symlinks++
		}
		x.finish = append(x.finish, e)
		return nil
	}
}

// check applies the rules that need the rest of the archive: no entry
// beneath or in the place of an earlier symlink, no symlink in the place
// of an earlier directory, hardlinks only to earlier regular files, device
// files only as root.
func (x *Extractor) check(e *treewalk.Entry) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.protoErr != nil {
		// The agent's tar-sender lists each path once; an archive file
		// may repeat a name (tar --append), and there the last one wins.
		if x.names[e.Path] {
			return errors.New("listed twice in the agent's stream: refused")
		}
		if x.names == nil {
			x.names = map[string]bool{}
		}
		x.names[e.Path] = true
	}
	for d := path.Dir(e.Path); d != "." && d != "/"; d = path.Dir(d) {
		if x.symlinks[d] {
			return fmt.Errorf("path goes through %s, a symlink earlier in the archive: refused", d)
		}
	}
	if x.symlinks[e.Path] && e.Kind != treewalk.KindSymlink {
		return fmt.Errorf("would replace %s, a symlink earlier in the archive: refused", e.Path)
	}
	if e.Kind == treewalk.KindSymlink {
		if _, ok := x.dirs[e.Path]; ok {
			return fmt.Errorf("a symlink would replace the directory %s of the archive: refused", e.Path)
		}
	}
	if e.IsHardlink() {
		rec, ok := x.files[e.LinkTo]
		if !ok && x.lost[e.LinkTo] {
			return fmt.Errorf("hardlink to %s, which could not be restored", e.LinkTo)
		}
		if !ok {
			return fmt.Errorf("hardlink to %s, which is not an earlier regular file of the archive", e.LinkTo)
		}
		if rec.leader != "" {
			e.LinkTo = rec.leader // tar links to the first name; keep one leader per group
		}
		if e.LinkTo == e.Path {
			return fmt.Errorf("hardlink to itself")
		}
	}
	if (e.Kind == treewalk.KindCharDev || e.Kind == treewalk.KindBlkDev) && !x.w.chown && !x.w.opts.NoDevices {
		return fmt.Errorf("%s: device files can only be created by root", e.Kind)
	}
	return nil
}

// mkdirParents creates the missing parent directories of p (tar archives
// need not list them), recording them with mode 0755 and the current time.
func (x *Extractor) mkdirParents(p string) error {
	var missing []string
	x.mu.Lock()
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if x.made[d] {
			break
		}
		missing = append(missing, d)
	}
	x.mu.Unlock()
	for i := len(missing) - 1; i >= 0; i-- {
		d := missing[i]
		e := treewalk.Entry{Path: d, Kind: treewalk.KindDir, Mode: 0o755, Uid: uint32(os.Geteuid()), Gid: uint32(os.Getegid()), MtimeNs: time.Now().UnixNano()}
		if err := x.mkdir(&e, false); err != nil {
			return fmt.Errorf("create parent directory %s: %w", d, err)
		}
	}
	return nil
}

// mkdir creates the directory e once per run and records it; an explicit
// entry's metadata wins over an implicit one's.
func (x *Extractor) mkdir(e *treewalk.Entry, explicit bool) error {
	x.mu.Lock()
	defer x.mu.Unlock() // directories are few: creating them one at a time costs little
	if !x.made[e.Path] {
		cur := &dirCursor{w: x.w}
		err := x.w.mkdir(cur, e)
		cur.close()
		if err != nil {
			return err
		}
		x.made[e.Path] = true
	}
	if _, seen := x.dirs[e.Path]; !seen || explicit {
		x.dirs[e.Path] = *e
	}
	if explicit && !x.explicit[e.Path] {
		x.explicit[e.Path] = true
		if e.Path != "." {
			x.stats.Dirs++
		}
	}
	return nil
}

func (x *Extractor) dir(e *treewalk.Entry) error {
	if err := x.mkdir(e, true); err != nil {
		x.Fail(e.Path, err)
	}
	return nil
}

// file writes a regular file from the archive, unless the destination
// already holds it (quick check).
func (x *Extractor) file(ctx context.Context, e *treewalk.Entry, data io.Reader, src *readErr) error {
	upToDate, err := x.w.upToDate(e)
	if err == nil && upToDate {
		x.mu.Lock()
		x.files[e.Path] = fileRec{}
		x.stats.Skipped++
		x.mu.Unlock()
		return nil
	}
	if err == nil {
		err = x.w.WriteItem(ctx, &transfer.Item{Entry: *e, Length: e.Size}, data)
	}
	if src.err != nil {
		return fmt.Errorf("read tar archive at %s: %w", e.Path, src.err)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		x.mu.Lock()
		if x.lost == nil {
			x.lost = map[string]bool{}
		}
		x.lost[e.Path] = true
		x.mu.Unlock()
		x.Fail(e.Path, err)
		return nil
	}
	x.mu.Lock()
	x.files[e.Path] = fileRec{written: true, size: e.Size}
	x.stats.Files++
	x.stats.Bytes += e.Size
	x.mu.Unlock()
	if x.onFile != nil {
		x.onFile(e.Path, e.Size)
	}
	return nil
}

// marker handles a tar-sender's error marker (transfer.TarErrorPath).
func (x *Extractor) marker(hdr *tar.Header) {
	p, msg := hdr.PAXRecords[transfer.TarErrorPath], hdr.PAXRecords[transfer.TarErrorMessage]
	if msg == "" {
		return // another global header: nothing for us
	}
	if hdr.PAXRecords[transfer.TarErrorIncomplete] != "" && treewalk.ValidPath(p) == nil && p != "." {
		x.mu.Lock()
		rec, ok := x.files[p]
		ok = ok && rec.written
		if ok {
			delete(x.files, p)
			x.stats.Files--
			x.stats.Bytes -= rec.size
		}
		x.mu.Unlock()
		if ok {
			x.w.removeFile(p)
		}
	}
	x.Fail(p, &transfer.RemoteError{Msg: msg})
}

// Finish completes the extraction once every stream has ended: it gives
// Writer.Finish the directories, symlinks, special files and hardlinks
// seen, and records its per-entry errors. The error is for cancellation
// only, wrapped as "finish: ...".
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

// upToDate is the quick check of a regular file from an archive: the
// destination holds a regular file of the same size and mtime (its owner
// and mode are then corrected).
func (w *Writer) upToDate(e *treewalk.Entry) (bool, error) {
	dirfd, base, err := w.parent(e.Path)
	if err != nil {
		return false, err
	}
	defer unix.Close(dirfd)
	st, err := lstatAt(dirfd, base)
	if err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == e.Size && st.Mtim.Nano() == e.MtimeNs {
		return true, w.fixMeta(dirfd, base, &st, e)
	}
	return false, nil
}

// removeFile removes the regular file rel, which a restore wrote but must
// not keep (its data came out incomplete).
func (w *Writer) removeFile(rel string) error {
	dirfd, base, err := w.parent(rel)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	if st, err := lstatAt(dirfd, base); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return err
	}
	return unix.Unlinkat(dirfd, base, 0)
}
