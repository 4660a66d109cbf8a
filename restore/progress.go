package restore

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/transfer"
)

// Progress is told how a restore advances, for a live display. Run calls it
// from several goroutines at once: implementations must be safe for
// concurrent use and should return quickly (they are called on the data
// path). Options.Progress nil means no progress is reported.
//
// The raw method reports totals, files, bytes and streams; the tar method
// reports files and bytes as they are extracted, with unknown totals; the
// rsync method reports nothing (gokrazy's receiver writes the files).
type Progress interface {
	// Start gives what the restore will transfer: regular files to write
	// and their payload in bytes. Either is -1 when not known in advance
	// (a tar stream). Called at most once, before any Add.
	Start(files int, bytes int64)
	// Add reports data written: files completed (0 for a block of a file
	// split across streams) and payload bytes.
	Add(files int, bytes int64)
	// Streams reports how many streams are moving data now.
	Streams(n int)
}

// WireProgress is a Progress that also shows what crosses the network,
// the bytes --bwlimit counts (frames, file list and handshakes included,
// both directions; compression makes them fewer than the payload). Run
// calls Wire once, before Start, on a raw restore with a remote side;
// total returns the bytes so far and is safe for concurrent use.
type WireProgress interface {
	Progress
	Wire(total func() int64)
}

// ListProgress is a Progress whose totals grow while the file list
// arrives: the raw method plans the list chunk by chunk as the sender
// walks it, so its totals are known only when the walk ends. Start then
// gives the first chunk's totals, followed at once by Grow(0, 0) (more
// chunks follow: the totals are partial), Grow adds each later chunk's, and
// ListDone says that the walk has ended and the totals are final (until
// then an ETA cannot be known). A Progress that is not a ListProgress
// gets Start(-1, -1) on such a run; a list that comes in one chunk is
// given to Start whole, and neither Grow nor ListDone is called.
type ListProgress interface {
	Progress
	Grow(files int, bytes int64)
	ListDone()
}

// File actions in per-file log records (the "action" attribute).
const (
	// ActionWrite: the file's data was sent whole and written.
	ActionWrite = "write"
	// ActionDelta: the file was rebuilt from DST's copy and a delta.
	ActionDelta = "delta"
)

// observer joins Options.Progress and Options.Logger for the methods. Safe
// for concurrent use.
type observer struct {
	p       Progress
	log     *slog.Logger
	streams atomic.Int32
	// streamsMu orders the Streams calls as the count changes, so that
	// the last one has the final count.
	streamsMu sync.Mutex
	// What the run will transfer and has written, for --jobs auto.
	totalFiles, doneFiles atomic.Int64
	totalBytes, doneBytes atomic.Int64
	// listing says the totals are partial: a streamed list has given
	// its first chunk and not yet its last.
	listing atomic.Bool
}

// jobsSample returns what the run has done so far (jobsController's
// samples; at and streams are the pool's to fill).
func (ob *observer) jobsSample() jobsSample {
	if ob == nil {
		return jobsSample{}
	}
	return jobsSample{doneBytes: ob.doneBytes.Load(), totalBytes: ob.totalBytes.Load(),
		doneFiles: int(ob.doneFiles.Load()), totalFiles: int(ob.totalFiles.Load()),
		listing: ob.listing.Load()}
}

func newObserver(o *Options) *observer {
	return &observer{p: o.Progress, log: o.Logger}
}

func (ob *observer) start(files int, bytes int64) {
	ob.startDisplay(files, bytes)
	if ob != nil && files > 0 {
		ob.totalFiles.Store(int64(files))
	}
	if ob != nil && bytes > 0 {
		ob.totalBytes.Store(bytes)
	}
}

// startDisplay gives the display its first totals (-1: not known yet),
// leaving --jobs auto's totals to addTotals.
func (ob *observer) startDisplay(files int, bytes int64) {
	if ob != nil && ob.p != nil {
		ob.p.Start(files, bytes)
	}
}

// addTotals adds a chunk's files and bytes to transfer to the totals
// --jobs auto measures the work left by, whatever the display: the work
// grows while the list streams in, and last says whether this chunk ends
// the list (until then the totals are partial). (start sets the same
// totals at once, for a run that knows them.)
func (ob *observer) addTotals(files int, bytes int64, last bool) {
	if ob != nil {
		ob.totalFiles.Add(int64(files))
		ob.totalBytes.Add(bytes)
		ob.listing.Store(!last)
	}
}

// grow adds a later chunk's totals (ListProgress).
func (ob *observer) grow(files int, bytes int64) {
	if lp, ok := ob.listProgress(); ok {
		lp.Grow(files, bytes)
	}
}

// listDone says that the list has ended (ListProgress).
func (ob *observer) listDone() {
	if lp, ok := ob.listProgress(); ok {
		lp.ListDone()
	}
}

func (ob *observer) listProgress() (ListProgress, bool) {
	if ob == nil || ob.p == nil {
		return nil, false
	}
	lp, ok := ob.p.(ListProgress)
	return lp, ok
}

func (ob *observer) add(files int, bytes int64) {
	if ob != nil {
		ob.doneFiles.Add(int64(files))
		ob.doneBytes.Add(bytes)
	}
	if ob != nil && ob.p != nil {
		ob.p.Add(files, bytes)
	}
}

// wire hands total (the wire bytes so far) to a WireProgress.
func (ob *observer) wire(total func() int64) {
	if ob == nil || ob.p == nil {
		return
	}
	if wp, ok := ob.p.(WireProgress); ok {
		wp.Wire(total)
	}
}

// streamUp and streamDown count the streams moving data.
func (ob *observer) streamUp() { ob.streamsBy(1) }

func (ob *observer) streamDown() { ob.streamsBy(-1) }

func (ob *observer) streamsBy(d int32) {
	if ob != nil && ob.p != nil {
		ob.streamsMu.Lock()
		defer ob.streamsMu.Unlock()
		ob.p.Streams(int(ob.streams.Add(d)))
	}
}

// file logs one restored regular file at level Info: its path (relative to
// DST, slash-separated), size in bytes and action.
func (ob *observer) file(path string, size int64, action string) {
	if ob == nil || ob.log == nil || !ob.log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	ob.log.LogAttrs(context.Background(), slog.LevelInfo, "restored",
		slog.String("path", path), slog.Int64("size", size), slog.String("action", action))
}

// Live byte counts: the data of items sent whole is counted as it flows
// (read by the safe writer on a pull or a local copy, read from the source
// on a push), so that a big file moves the display as it is written;
// deltas are counted when their item completes.

// progressWriter is the safe writer counting whole items' bytes as it
// reads them. It keeps the Writer's other methods (OpenBasis for deltas).
type progressWriter struct {
	*dest.Writer
	ob *observer
}

func (w progressWriter) WriteItem(ctx context.Context, it *transfer.Item, r io.Reader) error {
	if it.Delta == nil && w.ob != nil && w.ob.p != nil {
		r = &progressReader{r: r, ob: w.ob}
	}
	return w.Writer.WriteItem(ctx, it, r)
}

// progressSource is a push's source counting whole items' bytes as they
// are read.
type progressSource struct {
	*transfer.LocalSource
	ob *observer
}

func (s progressSource) Open(ctx context.Context, it *transfer.Item) (io.ReadCloser, error) {
	rc, err := s.LocalSource.Open(ctx, it)
	if err != nil || it.Delta != nil || s.ob == nil || s.ob.p == nil {
		return rc, err
	}
	return struct {
		io.Reader
		io.Closer
	}{&progressReader{r: rc, ob: s.ob}, rc}, nil
}

// progressReader reports what is read through it.
type progressReader struct {
	r  io.Reader
	ob *observer
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.ob.add(0, int64(n))
	}
	return n, err
}
