package transfer

import (
	"archive/tar"
	"bufio"
	"container/heap"
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/treewalk"
)

// RoleTarSender asks the server for its tree as a POSIX pax tar archive
// (IEEE Std 1003.1-2001 "pax Interchange Format", written by archive/tar
// with FormatPAX, so mtimes keep their nanoseconds), or for one shard of it
// (Hello.Shard of Hello.Shards), framed and compressed like every stream.
// After the handshake the server sends the archive, closes its frames, then
// waits for the client to close its side; the client sends nothing.
const RoleTarSender = "tar-sender"

// MaxTarShards bounds Hello.Shards.
const MaxTarShards = 256

// PAX record keys of the error markers a tar-sender puts in its archive, as
// global headers (typeflag 'g'): an entry the sender could not read. A
// marker with TarErrorIncomplete set follows a regular file whose data came
// out short (the file shrank or a read failed); the sender padded it with
// zeros, and the receiver must not keep it.
const (
	TarErrorPath       = "RESTORESYNC.path"
	TarErrorMessage    = "RESTORESYNC.error"
	TarErrorIncomplete = "RESTORESYNC.incomplete"
	// TarEnd marks, in a global header of its own, the end of a
	// tar-sender's shard: an archive that stops before it was cut short.
	TarEnd = "RESTORESYNC.end"
)

func init() { extraRoles[RoleTarSender] = serveTar }

// serveTar sends shard Hello.Shard of the tree as a tar archive. Every
// stream walks the tree itself and picks its share with TarShards, so the
// shards are disjoint and complete as long as the tree does not change
// between the walks (a backup snapshot does not). Directories, symlinks,
// special files and walk errors go on shard 0; regular files are spread by
// size; a hardlink follower travels right after its leader.
func serveTar(ctx context.Context, s *server, in *bufio.Reader, out io.Writer, comp Compression) error {
	shards := max(s.hello.Shards, 1)
	shard := s.hello.Shard
	if shards > MaxTarShards || shard < 0 || shard >= shards {
		return fmt.Errorf("%w: tar shard %d of %d", ErrProtocol, shard, shards)
	}
	list, err := s.src.List(ctx)
	if err != nil {
		return err
	}
	fw, err := newFrameWriter(out, comp)
	if err != nil {
		return err
	}
	ts := &tarSender{src: s.src, tw: tar.NewWriter(fw), buf: s.readBuffer()}
	err = ts.send(ctx, list, shard, shards)
	if err == nil {
		err = ts.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Format: tar.FormatPAX, PAXRecords: map[string]string{TarEnd: "1"}})
	}
	if err == nil {
		err = ts.tw.Close()
	}
	if cerr := fw.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// The client closes its side once it has read everything.
	_, err = io.Copy(io.Discard, in)
	return err
}

type tarSender struct {
	src *LocalSource
	tw  *tar.Writer
	buf []byte
}

func (ts *tarSender) send(ctx context.Context, list treewalk.List, shard, shards int) error {
	entries := list.Entries
	assign := TarShards(entries, shards)
	followers := map[string][]int{}
	for i := range entries {
		if e := &entries[i]; e.IsHardlink() {
			followers[e.LinkTo] = append(followers[e.LinkTo], i)
		}
	}
	if shard == 0 {
		for _, pe := range list.Errors {
			if err := ts.marker(pe.Path, pe.Err.Error(), false); err != nil {
				return err
			}
		}
	}
	for i := range entries {
		if i%256 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		e := &entries[i]
		if assign[i] != shard || e.IsHardlink() {
			continue
		}
		if err := ts.entry(ctx, e); err != nil {
			return err
		}
		for _, j := range followers[e.Path] {
			if err := ts.entry(ctx, &entries[j]); err != nil {
				return err
			}
		}
	}
	return nil
}

// TarShards assigns each entry of a file list to one of shards tar
// streams: regular files with data by size (largest first, each to the
// shard with the least bytes so far, counting 8 KiB per file for its
// creation), hardlink followers to their leader's shard, everything else
// to shard 0. It is a pure function of its arguments, so every stream of
// a restore computes the same assignment from the same list.
func TarShards(entries []treewalk.Entry, shards int) []int {
	assign := make([]int, len(entries))
	if shards <= 1 {
		return assign
	}
	var files []int
	for i := range entries {
		if entries[i].HasData() {
			files = append(files, i)
		}
	}
	// Stable order: largest first, then list order.
	sortBySizeDesc(files, entries)
	h := make(shardHeap, shards)
	for k := range h {
		h[k] = shardLoad{shard: k}
	}
	const perFileBytes = 8 << 10
	for _, i := range files {
		assign[i] = h[0].shard
		h[0].bytes += entries[i].Size + perFileBytes
		heap.Fix(&h, 0)
	}
	index := make(map[string]int, len(files))
	for _, i := range files {
		index[entries[i].Path] = i
	}
	for i := range entries {
		if entries[i].IsHardlink() {
			if l, ok := index[entries[i].LinkTo]; ok {
				assign[i] = assign[l]
			}
		}
	}
	return assign
}

func sortBySizeDesc(files []int, entries []treewalk.Entry) {
	slices.SortFunc(files, func(a, b int) int {
		switch sa, sb := entries[a].Size, entries[b].Size; {
		case sa > sb:
			return -1
		case sa < sb:
			return 1
		}
		return a - b
	})
}

type shardLoad struct {
	shard int
	bytes int64
}

// shardHeap is a min-heap of shards by load, ties to the lower shard.
type shardHeap []shardLoad

func (h shardHeap) Len() int { return len(h) }
func (h shardHeap) Less(i, j int) bool {
	if h[i].bytes != h[j].bytes {
		return h[i].bytes < h[j].bytes
	}
	return h[i].shard < h[j].shard
}
func (h shardHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *shardHeap) Push(x any)   { *h = append(*h, x.(shardLoad)) }
func (h *shardHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// TarHeader returns the pax header of e: names as in the file list (the
// root as "./", directories with a trailing slash), owner ids and names,
// mtime to the nanosecond, hardlink followers as TypeLink to their leader,
// xattrs and ACLs as GNU tar writes them, and the sparse flag (see
// taracl.go).
func TarHeader(e *treewalk.Entry) *tar.Header {
	h := &tar.Header{
		Name:    e.Path,
		Mode:    int64(e.Mode),
		Uid:     int(e.Uid),
		Gid:     int(e.Gid),
		Uname:   e.User,
		Gname:   e.Group,
		ModTime: time.Unix(0, e.MtimeNs),
		Format:  tar.FormatPAX,
	}
	switch {
	case e.Kind == treewalk.KindDir:
		h.Typeflag = tar.TypeDir
		h.Name = e.Path + "/"
		if e.Path == "." {
			h.Name = "./"
		}
	case e.IsHardlink() && e.Kind == treewalk.KindFile:
		// Only regular files are linked in a tar stream: the extractor
		// refuses a link to anything else, so other kinds' followers
		// travel as their own kind.
		h.Typeflag, h.Linkname = tar.TypeLink, e.LinkTo
	case e.Kind == treewalk.KindFile:
		h.Typeflag, h.Size = tar.TypeReg, e.Size
	case e.Kind == treewalk.KindSymlink:
		h.Typeflag, h.Linkname = tar.TypeSymlink, e.LinkTarget
	case e.Kind == treewalk.KindFifo:
		h.Typeflag = tar.TypeFifo
	case e.Kind == treewalk.KindCharDev, e.Kind == treewalk.KindBlkDev:
		h.Typeflag = tar.TypeChar
		if e.Kind == treewalk.KindBlkDev {
			h.Typeflag = tar.TypeBlock
		}
		h.Devmajor, h.Devminor = int64(unix.Major(e.Rdev)), int64(unix.Minor(e.Rdev))
	}
	if len(e.Xattrs) > 0 || len(e.ACL) > 0 || len(e.DefaultACL) > 0 || e.Sparse {
		h.PAXRecords = map[string]string{}
		for _, x := range e.Xattrs {
			h.PAXRecords[TarXattrPrefix+x.Name] = string(x.Value)
		}
		if len(e.ACL) > 0 {
			h.PAXRecords[TarACLAccess] = FormatACLText(e.ACL)
		}
		if len(e.DefaultACL) > 0 {
			h.PAXRecords[TarACLDefault] = FormatACLText(e.DefaultACL)
		}
		if e.Sparse && e.HasData() {
			h.PAXRecords[TarSparse] = "1"
		}
	}
	return h
}

// entry sends one entry; a regular file that cannot be opened becomes an
// error marker instead. The error is the stream's (the client is gone).
func (ts *tarSender) entry(ctx context.Context, e *treewalk.Entry) error {
	if !e.HasData() {
		return ts.tw.WriteHeader(TarHeader(e))
	}
	r, err := ts.src.Open(ctx, &Item{Entry: *e, Length: e.Size})
	if err != nil {
		return ts.marker(e.Path, err.Error(), false)
	}
	defer r.Close()
	if err := ts.tw.WriteHeader(TarHeader(e)); err != nil {
		return err
	}
	n, rerr, werr := ts.copyData(r, e.Size)
	if werr != nil {
		return werr
	}
	if rerr == nil && n < e.Size {
		rerr = fmt.Errorf("%w: read %d bytes, expected %d (the file shrank)", ErrSizeMismatch, n, e.Size)
	}
	if rerr == nil {
		return nil
	}
	if werr := ts.pad(e.Size - n); werr != nil {
		return werr
	}
	return ts.marker(e.Path, rerr.Error(), true)
}

// copyData copies up to size bytes of r into the archive. It tells a read
// error (the file's: a per-file problem) from a write error (the stream's).
func (ts *tarSender) copyData(r io.Reader, size int64) (n int64, rerr, werr error) {
	for n < size {
		k, err := r.Read(ts.buf[:min(int64(len(ts.buf)), size-n)])
		if k > 0 {
			if _, werr = ts.tw.Write(ts.buf[:k]); werr != nil {
				return n, nil, werr
			}
			n += int64(k)
		}
		if err == io.EOF {
			return n, nil, nil
		}
		if err != nil {
			return n, err, nil
		}
	}
	return n, nil, nil
}

// pad completes a short file's entry with zeros.
func (ts *tarSender) pad(n int64) error {
	clear(ts.buf)
	for n > 0 {
		k := min(n, int64(len(ts.buf)))
		if _, err := ts.tw.Write(ts.buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// marker sends an error marker for path.
func (ts *tarSender) marker(path, msg string, incomplete bool) error {
	rec := map[string]string{TarErrorPath: path, TarErrorMessage: msg}
	if incomplete {
		rec[TarErrorIncomplete] = "1"
	}
	return ts.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Format: tar.FormatPAX, PAXRecords: rec})
}

// TarReader returns the archive a RoleTarSender stream carries, decoded
// from its frames. It is read by one goroutine; io.EOF comes after the
// archive's end. The client waits on the sender for the whole archive, so
// the idle timeout (SetIdleTimeout) stays armed from here to io.EOF.
func (c *Conn) TarReader() io.Reader {
	c.pending.Store(1)
	return readerFunc(func(p []byte) (int, error) {
		n, err := c.dec.fr.Read(p)
		switch {
		case err == io.EOF:
			// The whole archive is in: the client no longer waits on
			// the sender (it finishes the extraction), until CloseTar.
			c.pending.Store(0)
		case err != nil:
			if terr := c.idle.Err(); terr != nil {
				err = terr
			}
		}
		return n, err
	})
}

// CloseTar ends a RoleTarSender stream: it closes the client's side, reads
// what is left and closes the stream. With abort (the run failed, the
// archive may be unread) the stream is torn down first and errors are not
// reported.
func (c *Conn) CloseTar(abort bool) error {
	defer c.idle.Stop() // the idle timeout bounds the wait for the rest
	if abort {
		c.s.Close()
	}
	err := c.enc.fw.Close() // nothing was written: no frame goes out
	c.s.CloseWrite()
	io.Copy(io.Discard, c.TarReader())
	if cerr := c.s.Close(); err == nil {
		err = cerr
	}
	if abort {
		return nil
	}
	return err
}
