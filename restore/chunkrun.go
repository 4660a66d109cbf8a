package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
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
	// early finishes each chunk as described; without it (a list read
	// whole: a push, --delete, -i) runSession finishes the whole list
	// at the end, as Finish always did.
	early bool
	// afterPlan, when not nil, runs once after the first chunk's plan
	// (--delete on a list read whole).
	afterPlan func() error
	// listing is closed once the last chunk is read, when the list is
	// read on stream 0 (runStreams); nil otherwise. When stream 0 is a
	// push's control stream (reserve0), it is never closed: no worker
	// takes stream 0, and the producer moves a batch on it when no other
	// stream is free.
	listing  chan struct{}
	reserve0 bool

	open []openDir // the directories being listed, outermost first
	// closed collects the directories that track closes, for the
	// producer's deletions (with --delete).
	closed []openDir
	// w is the session's writer when it is in this process (local,
	// pull), which deletes and itemizes chunk by chunk; nil otherwise.
	w *dest.Writer
	// itz itemizes chunk by chunk (--dry-run, --itemize-changes).
	itz *dest.Itemizer
	// del says that --delete deletes (or a dry run says it would):
	// until the sender reports a list error, after which nothing more
	// is deleted, as rsync does.
	del     bool
	seen    int  // the directories listed so far: openDir.seq
	started bool // the progress has its first totals
	growing bool // the progress is a ListProgress

	mu      sync.Mutex
	queue   []*chunkState // planned, not finished, in list order
	ended   bool          // the producer has planned its last chunk
	finKick chan struct{} // wakes the finisher: a chunk queued or done
	proKick chan struct{} // wakes the producer: a chunk finished, a retry
}

func newChunkRun(s session, o Options, rep *Report, tr *tracker, src chunkSource, early bool) *chunkRun {
	r := &chunkRun{s: s, o: o, rep: rep, tr: tr, ob: o.ob, src: src, early: early,
		finKick: make(chan struct{}, 1), proKick: make(chan struct{}, 1)}
	if ps, ok := s.(*pushSession); ok && ps.control {
		r.reserve0 = true
	}
	if src.onStream0() || r.reserve0 {
		r.listing = make(chan struct{})
	}
	if early {
		switch ls := s.(type) {
		case *localSession:
			r.w = ls.w
		case *pullSession:
			r.w = ls.w
		}
	}
	if r.w != nil && (o.DryRun || o.ItemizeChanges) {
		r.itz = r.w.NewItemizer()
	}
	r.del = o.Delete && r.w != nil
	return r
}

// openDir is a directory of the list whose listing has not ended: its
// entry, its place in the list among the directories (seq), and, with
// --delete, the names listed directly in it (all that its deletion
// keeps), so that a directory's names are held only while it is listed.
type openDir struct {
	e     treewalk.Entry
	seq   int
	names map[string]bool
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
	var listing <-chan struct{}
	if r.listing != nil {
		listing = r.listing
	}
	return runStreams(ctx, r.s, r.o.Jobs, r.produce, r.done, r.ob, listing)
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
	if r.listing != nil && !r.reserve0 {
		close(r.listing)
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
	if r.early {
		r.track(cs, &ch)
	}
	r.tr.mu.Lock()
	r.rep.addList(treewalk.List{Entries: ch.Entries, Errors: ch.Errors})
	r.tr.mu.Unlock()
	if err := r.deleteAndItemize(ctx, &ch); err != nil {
		return err
	}
	if r.o.DryRun {
		return nil // nothing planned, moved or finished
	}
	var plan transfer.PlanResult
	var err error
	if ps, ok := r.s.(*pushSession); ok && r.reserve0 {
		plan, err = ps.planChunk(ctx, &ch)
	} else {
		plan, err = r.s.plan(ctx, ch.Entries)
	}
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if f := r.afterPlan; f != nil {
		r.afterPlan = nil
		if err := f(); err != nil {
			return err
		}
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
		for len(r.open) > 0 && !treewalk.IsUnder(e.Path, r.open[len(r.open)-1].e.Path) {
			r.closeDir(cs)
		}
		if r.del && len(r.open) > 0 {
			top := &r.open[len(r.open)-1]
			rel := e.Path
			if top.e.Path != "." {
				rel = e.Path[len(top.e.Path)+1:]
			}
			// The first name below the directory: an entry listed
			// without its parent keeps that parent in its place.
			name, _, _ := strings.Cut(rel, "/")
			top.names[name] = true
		}
		switch {
		case e.Kind == treewalk.KindDir:
			d := openDir{e: *e, seq: r.seen}
			r.seen++
			if r.del {
				d.names = map[string]bool{}
			}
			r.open = append(r.open, d)
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

// deleteAndItemize does, for a chunk just tracked and before its plan,
// what --delete, --dry-run and --itemize-changes ask of it: in each
// directory whose listing the chunk ends, in list order, it deletes what
// the list lacks (dest.Writer.DeleteIn; a dry run only lists it), unless
// the sender has reported a list error in this chunk or an earlier one
// (then nothing more is deleted, as rsync's "IO error encountered --
// skipping file deletion"); then it itemizes the chunk's entries. The
// lines go into the report, the deletions first, as rsync lists a
// directory's deletions before its entries. Its error is run-fatal.
func (r *chunkRun) deleteAndItemize(ctx context.Context, ch *treewalk.Chunk) error {
	closed := r.closed
	r.closed = nil
	if r.del && len(ch.Errors) > 0 {
		r.del = false
		closed = nil
		if r.o.Warnf != nil {
			r.o.Warnf("the file list has errors: nothing deleted from here on (as rsync does)")
		}
	}
	slices.SortFunc(closed, func(a, b openDir) int { return a.seq - b.seq })
	var lines []string
	var errs []*treewalk.PathError
	deleted := 0
	for _, d := range closed {
		var del []string
		var err error
		if r.o.DryRun {
			del, err = r.w.ItemizeDeletesIn(ctx, d.e.Path, d.names)
		} else {
			var perItem []*treewalk.PathError
			del, perItem, err = r.w.DeleteIn(ctx, d.e.Path, d.names)
			errs = append(errs, perItem...)
			if r.itz != nil {
				for i, p := range del {
					del[i] = "*deleting   " + p
				}
			}
		}
		if err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		deleted += len(del)
		if r.itz != nil {
			lines = append(lines, del...)
		}
	}
	if r.itz != nil {
		more, perItem, err := r.itz.Lines(ctx, ch.Entries, ch.Leaders)
		if err != nil {
			return fmt.Errorf("itemize: %w", err)
		}
		lines = append(lines, more...)
		if r.o.DryRun {
			errs = append(errs, perItem...) // a real run reports them when it writes them
		}
	}
	r.tr.mu.Lock()
	defer r.tr.mu.Unlock()
	r.rep.Deleted += deleted
	for _, pe := range errs {
		r.rep.addError(pe.Path, pe.Err)
	}
	if r.itz != nil {
		if r.rep.Changes == nil {
			r.rep.Changes = []string{}
		}
		r.rep.Changes = append(r.rep.Changes, lines...)
		r.rep.ChangeEntries = append(r.rep.ChangeEntries, changeEntries(lines, ch.Entries)...)
	}
	if r.o.DryRun {
		r.rep.DryRun = true
	}
	return nil
}

// closeDir moves the innermost directory being listed to cs's.
func (r *chunkRun) closeDir(cs *chunkState) {
	last := len(r.open) - 1
	cs.dirs = append(cs.dirs, r.open[last].e)
	if r.del {
		r.closed = append(r.closed, r.open[last])
	}
	r.open[last] = openDir{}
	r.open = r.open[:last]
}

// progress gives a chunk's totals to the display: a list of one chunk
// as it is, else the first chunk's and the others' as growth.
func (r *chunkRun) progress(files int, bytes int64, last bool) {
	r.ob.addTotals(files, bytes)
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
	if !r.early {
		return nil
	}
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
