package restore

import (
	"context"
	"errors"
	"sync"

	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// tracker books the outcome of each batch into the report and commits a
// split file once all its blocks have arrived. A delta item that could not
// be applied (transfer.ErrDeltaFailed) is not booked: it is kept for a
// retry, whole. Safe for concurrent use by the streams.
type tracker struct {
	ctx      context.Context
	s        session
	rep      *Report
	ob       *observer
	mu       sync.Mutex
	splits   map[string]*splitState
	deferred []*treewalk.Entry
	retry    []*batch
}

// splitState is what the tracker knows of one split file (a file larger
// than the block size, sent as several batches).
type splitState struct {
	left   int  // blocks not yet done
	failed bool // a block failed: the file is reported once and not committed
	delta  bool // a block arrived as a delta
	// bytes is the payload of the blocks written so far; it goes into
	// the report's Bytes when the file is committed, not before.
	bytes int64
	// gone is the index in the report's Errors of the file's error when
	// that is only transfer.ErrSplitGone (a consequence of another
	// block's failure, whose reply may come first): the cause, when it
	// comes, takes its place. -1 otherwise.
	gone int
}

// takeRetries returns the batches to send again whole, and forgets them.
func (t *tracker) takeRetries() []*batch {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.retry
	t.retry = nil
	return r
}

// newTracker returns the tracker of batches, for the restore that runs on
// ctx over s and reports into rep; it counts each split file's blocks.
func newTracker(ctx context.Context, s session, rep *Report, batches []*batch) *tracker {
	t := &tracker{ctx: ctx, s: s, rep: rep, splits: map[string]*splitState{}}
	t.register(batches)
	return t
}

// register counts the blocks of the split files of batches, which the
// run hands out after the tracker was made (the batches of a chunk of the
// file list).
func (t *tracker) register(batches []*batch) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range batches {
		for _, it := range b.items {
			if it.Split {
				st := t.splits[it.Entry.Path]
				if st == nil {
					st = &splitState{gone: -1}
					t.splits[it.Entry.Path] = st
				}
				st.left++
			}
		}
	}
}

// cancelled reports whether an item's err is a consequence of the run's
// end (ctx done, or context.Canceled from below) rather than a per-file
// failure: such errors are never reported.
func (t *tracker) cancelled(err error) bool {
	return t.ctx.Err() != nil || errors.Is(err, context.Canceled)
}

// done is called by a stream with a batch's per-item errors: it books
// them, keeps failed deltas for a retry and commits the split files the
// batch completes. Its error is run-fatal (a commit that broke the stream).
// Items that failed because the run was cancelled are not booked.
func (t *tracker) done(b *batch, errs []error) error {
	var commits []*treewalk.Entry
	var files int
	var bytes int64
	defer func() { t.ob.add(files, bytes) }()
	t.mu.Lock()
	for j := range b.items {
		it, err := &b.items[j], errs[j]
		if err != nil && t.cancelled(err) {
			continue // cancelled: not a per-file error
		}
		if err != nil && it.Delta != nil && errors.Is(err, transfer.ErrDeltaFailed) {
			whole := *it
			whole.Delta = nil
			t.retry = append(t.retry, &batch{items: []transfer.Item{whole}, bytes: whole.Length, chunk: b.chunk})
			if b.chunk != nil {
				b.chunk.left.Add(1) // its chunk waits for the retry too
			}
			continue
		}
		if !it.Split {
			if err != nil {
				t.rep.addError(it.Entry.Path, err)
			} else {
				t.rep.Files++
				t.rep.Bytes += it.Length
				files++
				action := ActionWrite
				if it.Delta != nil {
					t.rep.DeltaFiles++
					action = ActionDelta
					bytes += it.Length
				}
				t.ob.file(it.Entry.Path, it.Entry.Size, action)
			}
			continue
		}
		st := t.splits[it.Entry.Path]
		st.left--
		switch {
		case err == nil:
		case !st.failed:
			st.failed = true
			if errors.Is(err, transfer.ErrSplitGone) {
				st.gone = len(t.rep.Errors)
			}
			t.rep.addError(it.Entry.Path, err)
		case st.gone >= 0 && !errors.Is(err, transfer.ErrSplitGone):
			t.rep.Errors[st.gone].Error = err.Error()
			st.gone = -1
		}
		if err == nil {
			st.bytes += it.Length
			if it.Delta != nil {
				bytes += it.Length
			}
			st.delta = st.delta || it.Delta != nil
		}
		if st.left == 0 && !st.failed {
			if t.s.deferCommits() {
				t.deferred = append(t.deferred, &it.Entry)
			} else {
				commits = append(commits, &it.Entry)
			}
		}
	}
	t.mu.Unlock()
	for _, e := range commits {
		if err := t.commit(e); err != nil {
			return err
		}
	}
	return nil
}

// commit puts the split file e in place and books it; a per-file failure
// goes into the report, the error returned is run-fatal.
func (t *tracker) commit(e *treewalk.Entry) error {
	itemErr, err := t.s.commit(t.ctx, e)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case itemErr != nil && t.cancelled(itemErr):
		// cancelled: not a per-file error
	case itemErr != nil:
		t.rep.addError(e.Path, itemErr)
	default:
		st := t.splits[e.Path]
		delete(t.splits, e.Path) // committed: nothing more comes for it
		t.rep.Files++
		t.rep.Bytes += st.bytes
		action := ActionWrite
		if st.delta {
			t.rep.DeltaFiles++
			action = ActionDelta
		}
		t.ob.add(1, 0)
		t.ob.file(e.Path, e.Size, action)
	}
	return nil
}

// commitDeferred commits the split files whose commits had to wait for the
// streams to be idle (session.deferCommits), on the tracker's context; its
// error is run-fatal.
func (t *tracker) commitDeferred() error {
	for _, e := range t.deferred {
		if err := t.commit(e); err != nil {
			return err
		}
	}
	return nil
}
