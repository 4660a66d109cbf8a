package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// maxPendingChunks bounds the chunks of the file list that a run has
// planned and not yet finished: the list runs at most that far ahead of
// the data, so a run holds at most that many chunks' entries (with
// treewalk.ChunkEntries a chunk) whatever the size of the tree.
const maxPendingChunks = 8

// chunkState is one chunk of the file list in a run: how many of its
// batches are not done yet, and what finishing it takes.
type chunkState struct {
	left atomic.Int64
	// entries are the chunk's entries that Finish acts on: symlinks,
	// special files, hardlinks and the leaders of the chunk's groups.
	entries []treewalk.Entry
	// dirs are the directories whose listing ended with the chunk, in
	// the order it ended (each after its subdirectories).
	dirs []treewalk.Entry
}

// chunkRun plans, transfers and finishes a file list chunk by chunk as
// it arrives (runSession): a producer reads the chunks (src), books their
// entries into the report, plans each (quick check, signatures) and hands
// its batches to the streams; a finisher finishes each chunk once its
// batches are done and those of every earlier chunk too, in list order:
// its symlinks, special files and hardlinks (a hardlink's leader is of
// its chunk or an earlier one, so it is in place), then the directories
// whose listing has ended, deepest first, so that a directory gets its
// mode and mtime once everything beneath it is placed. What outlives a
// chunk is the directories still being listed (a stack as deep as the
// tree) and, until finished, at most maxPendingChunks chunks' entries.
type chunkRun struct {
	s   session
	o   Options
	rep *Report
	tr  *tracker
	ob  *observer
	src chunkSource
	// reserve0 says that stream 0 is a push's control stream: no worker
	// takes it, and the producer moves a batch on it when no other
	// stream is free (runStreams). A pull's list, read on stream 0 too,
	// goes as list batches among stream 0's data requests
	// (src.requests).
	reserve0 bool

	open []treewalk.Entry // the directories being listed, outermost first
	// co is what --delete, --dry-run and --itemize-changes ask of each
	// chunk (nothing: the zero value); co.Delete is cleared once the
	// sender reports a list error, after which nothing more is
	// deleted, as rsync does.
	co transfer.ChunkOptions
	// changes does what co asks on the session's writer when it is in
	// this process (local, pull); a push's receiver does it on the far
	// side with the same code (dest.Writer.ChunkChanges), as it plans
	// each chunk (pushSession.planChunk).
	changes transfer.ListChanges
	started bool // the progress has its first totals
	growing bool // the progress is a ListProgress

	mu      sync.Mutex
	queue   []*chunkState // planned, not finished, in list order
	ended   bool          // the producer has planned its last chunk
	finKick chan struct{} // wakes the finisher: a chunk queued or done
	proKick chan struct{} // wakes the producer: a chunk finished, a retry
}

func newChunkRun(s session, o Options, rep *Report, tr *tracker, src chunkSource) *chunkRun {
	r := &chunkRun{s: s, o: o, rep: rep, tr: tr, ob: o.ob, src: src,
		finKick: make(chan struct{}, 1), proKick: make(chan struct{}, 1)}
	if ps, ok := s.(*pushSession); ok && ps.control {
		r.reserve0 = true
	}
	r.co = transfer.ChunkOptions{Delete: o.Delete, Itemize: o.DryRun || o.ItemizeChanges, DryRun: o.DryRun}
	var w *dest.Writer
	switch ls := s.(type) {
	case *localSession:
		w = ls.w
	case *pullSession:
		w = ls.w
	}
	if w != nil && r.co != (transfer.ChunkOptions{}) {
		r.changes = w.ChunkChanges(r.co)
	}
	return r
}

// kick wakes the goroutine that waits on ch, if it waits.
func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// run moves the whole list: runStreams with the producer and the
// finisher; its error is run-fatal.
func (r *chunkRun) run(ctx context.Context) error {
	return runStreams(ctx, r.s, r.o.Jobs, r.produce, r.done, r.ob, r.reserve0, r.src.requests())
}

// done books a batch (tracker.done, which counts a retry it keeps on
// the batch's chunk) and counts it off its chunk.
func (r *chunkRun) done(b *batch, errs []error) error {
	err := r.tr.done(b, errs)
	if b.chunk != nil {
		b.chunk.left.Add(-1)
	}
	kick(r.finKick)
	kick(r.proKick)
	return err
}

// produce runs the reader of the list and the finisher until every
// chunk is finished.
func (r *chunkRun) produce(ctx context.Context, emit func(*batch) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return r.finisher(gctx) })
	g.Go(func() error {
		err := r.read(gctx, emit)
		r.mu.Lock()
		r.ended = true
		r.mu.Unlock()
		kick(r.finKick)
		return err
	})
	return g.Wait()
}

// read takes the chunks in turn, never more than maxPendingChunks ahead
// of the finisher, and then hands out the retries until every chunk is
// done.
func (r *chunkRun) read(ctx context.Context, emit func(*batch) error) error {
	for {
		if err := r.settle(ctx, emit, maxPendingChunks-1); err != nil {
			return err
		}
		ch, err := r.src.next(ctx)
		if err == io.EOF {
			err = errors.New("the list ended without its last chunk")
		}
		if err != nil {
			return fmt.Errorf("file list: %w", err)
		}
		if err := r.chunk(ctx, ch, emit); err != nil {
			return err
		}
		if ch.Last {
			break
		}
	}
	if r.growing {
		r.ob.listDone()
	}
	return r.settle(ctx, emit, 0)
}

// settle hands out the retries (failed deltas, again whole) and waits
// until at most max chunks are left to finish.
func (r *chunkRun) settle(ctx context.Context, emit func(*batch) error, max int) error {
	for {
		for _, b := range r.tr.takeRetries() {
			if err := emit(b); err != nil {
				return err
			}
		}
		r.mu.Lock()
		n := len(r.queue)
		r.mu.Unlock()
		if n <= max {
			return nil
		}
		select {
		case <-r.proKick:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// chunk books, plans and hands out one chunk.
func (r *chunkRun) chunk(ctx context.Context, ch treewalk.Chunk, emit func(*batch) error) error {
	cs := &chunkState{}
	r.track(cs, &ch)
	r.tr.mu.Lock()
	r.rep.addList(treewalk.List{Entries: ch.Entries, Errors: ch.Errors})
	r.tr.mu.Unlock()
	if r.co.Delete && len(ch.Errors) > 0 {
		r.co.Delete = false
		if r.o.Warnf != nil {
			r.o.Warnf("the file list has errors: nothing deleted from here on (as rsync does)")
		}
	}
	var plan transfer.PlanResult
	var chg transfer.Changes
	var err error
	if ps, ok := r.s.(*pushSession); ok && r.reserve0 {
		plan, chg, err = ps.planChunk(ctx, &ch, r.co)
		if err != nil {
			return fmt.Errorf("plan: %w", err)
		}
	} else {
		if r.changes != nil {
			if chg, err = r.changes.Chunk(ctx, &ch, len(ch.Errors) > 0); err != nil {
				return err
			}
		}
		if !r.o.DryRun {
			if plan, err = r.s.plan(ctx, ch.Entries); err != nil {
				return fmt.Errorf("plan: %w", err)
			}
		}
	}
	r.bookChanges(chg, ch.Entries)
	if r.o.DryRun {
		return nil // nothing planned, moved or finished
	}
	dataFiles := 0
	for i := range ch.Entries {
		if ch.Entries[i].HasData() {
			dataFiles++
		}
	}
	var needBytes int64
	for _, i := range plan.Need {
		needBytes += ch.Entries[i].Size
	}
	r.tr.mu.Lock()
	for _, pe := range plan.Errors {
		r.rep.addError(pe.Path, pe.Err)
	}
	r.rep.Skipped += dataFiles - len(plan.Need) - len(plan.Errors)
	r.tr.mu.Unlock()
	r.progress(len(plan.Need), needBytes, ch.Last)

	batches := makeBatches(ch.Entries, plan.Need, plan.Signatures, r.o.Writer.BlockSizeBytes)
	for _, b := range batches {
		b.chunk = cs
	}
	cs.left.Store(int64(len(batches)))
	r.tr.register(batches)
	r.mu.Lock()
	r.queue = append(r.queue, cs)
	r.mu.Unlock()
	kick(r.finKick)
	for _, b := range batches {
		if err := emit(b); err != nil {
			return err
		}
	}
	return nil
}

// track keeps what finishing the chunk takes: its entries that Finish
// acts on, and the directories whose listing ends with it (those its
// entries leave, those it says are complete, all of them after the last
// chunk).
func (r *chunkRun) track(cs *chunkState, ch *treewalk.Chunk) {
	linked := map[string]bool{}
	for i := range ch.Entries {
		if to := ch.Entries[i].LinkTo; to != "" {
			linked[to] = true
		}
	}
	for i := range ch.Entries {
		e := &ch.Entries[i]
		for len(r.open) > 0 && !treewalk.IsUnder(e.Path, r.open[len(r.open)-1].Path) {
			r.closeDir(cs)
		}
		switch {
		case e.Kind == treewalk.KindDir:
			r.open = append(r.open, *e)
		case e.Kind != treewalk.KindFile || e.LinkTo != "" || linked[e.Path]:
			cs.entries = append(cs.entries, *e)
		}
	}
	n := min(ch.Closed, len(r.open))
	if ch.Last {
		n = len(r.open)
	}
	for range n {
		r.closeDir(cs)
	}
}

// bookChanges puts what --delete, --dry-run and --itemize-changes did
// on a chunk of entries into the report: the deletions and errors, the
// change lines and their entries.
func (r *chunkRun) bookChanges(chg transfer.Changes, entries []treewalk.Entry) {
	r.tr.mu.Lock()
	defer r.tr.mu.Unlock()
	r.rep.Deleted += chg.Deleted
	for _, pe := range chg.Errors {
		r.rep.addError(pe.Path, pe.Err)
	}
	if r.co.Itemize {
		if r.rep.Changes == nil {
			r.rep.Changes = []string{}
		}
		r.rep.Changes = append(r.rep.Changes, chg.Lines...)
		r.rep.ChangeEntries = append(r.rep.ChangeEntries, changeEntries(chg.Lines, entries)...)
	}
	if r.o.DryRun {
		r.rep.DryRun = true
	}
}

// closeDir moves the innermost directory being listed to cs's.
func (r *chunkRun) closeDir(cs *chunkState) {
	last := len(r.open) - 1
	cs.dirs = append(cs.dirs, r.open[last])
	r.open[last] = treewalk.Entry{}
	r.open = r.open[:last]
}

// progress gives a chunk's totals to the display: a list of one chunk
// as it is, else the first chunk's and the others' as growth.
func (r *chunkRun) progress(files int, bytes int64, last bool) {
	r.ob.addTotals(files, bytes, last)
	if r.started {
		if r.growing {
			r.ob.grow(files, bytes)
		}
		return
	}
	r.started = true
	_, r.growing = r.ob.listProgress()
	switch {
	case last:
		r.growing = false
		r.ob.startDisplay(files, bytes)
	case r.growing:
		r.ob.startDisplay(files, bytes)
		r.ob.grow(0, 0) // more chunks follow: the totals are partial from the start
	default:
		r.ob.startDisplay(-1, -1)
	}
}

// finisher finishes the chunks in list order, each once its batches are
// all done, until the producer has ended and every chunk is finished.
func (r *chunkRun) finisher(ctx context.Context) error {
	for {
		r.mu.Lock()
		var head *chunkState
		if len(r.queue) > 0 && r.queue[0].left.Load() == 0 {
			head = r.queue[0]
		}
		over := r.ended && len(r.queue) == 0
		r.mu.Unlock()
		if over {
			return nil
		}
		if head == nil {
			select {
			case <-r.finKick:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := r.finish(ctx, head); err != nil {
			return err
		}
		r.mu.Lock()
		r.queue[0] = nil
		r.queue = r.queue[1:]
		r.mu.Unlock()
		kick(r.proKick)
	}
}

// finish finishes one chunk whose data is all placed: its links and
// special files, then its directories, deepest first (Finish takes the
// directories of its list in reverse).
func (r *chunkRun) finish(ctx context.Context, cs *chunkState) error {
	entries := cs.entries
	for _, d := range slices.Backward(cs.dirs) {
		entries = append(entries, d)
	}
	cs.entries, cs.dirs = nil, nil
	if len(entries) == 0 {
		return nil
	}
	errs, err := r.s.finish(ctx, entries)
	if err != nil {
		return fmt.Errorf("finish: %w", err)
	}
	r.tr.mu.Lock()
	for _, pe := range errs {
		r.rep.addError(pe.Path, pe.Err)
	}
	r.tr.mu.Unlock()
	return nil
}
