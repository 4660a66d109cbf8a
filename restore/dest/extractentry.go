package dest

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// One entry of an archive: the checks that need the rest of the archive,
// directories, regular files, and the tar-sender's error markers.

// fileRec is what the extractor keeps of a regular file of the archive.
type fileRec struct {
	leader  string // a hardlink follower's group leader; "" for a leader
	written bool   // written by this run (not found up to date)
	size    int64  // bytes written
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
		if e.HasData() {
			x.lose(p) // its hardlinks say so, not that it is not in the archive
		}
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
		x.lose(e.Path)
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

// lose records that the regular file p of the archive could not be
// restored, so that a later hardlink to it says so. Safe for concurrent
// use.
func (x *Extractor) lose(p string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.lost == nil {
		x.lost = map[string]bool{}
	}
	x.lost[p] = true
}
