package restore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/restoresync/restoresync/transfer"
)

// runRaw is the raw method: file list, quick check, parallel streams.
func runRaw(ctx context.Context, o Options, src, dst transfer.Location, rep *Report) error {
	if !src.Remote() && !dst.Remote() {
		rep.Compression = "none" // nothing crosses a network
	}
	sel, err := planSelection(o, src)
	if err != nil {
		return err
	}
	s, err := openSession(ctx, o, sel, src, dst)
	if err != nil {
		return err
	}
	// Cancellation (Ctrl-C) tears the streams down, so that workers blocked
	// on the network return at once instead of finishing their batches.
	// It stays armed while the streams are closed: a goodbye that a
	// stalled agent never answers must not outlive a Ctrl-C.
	stop := context.AfterFunc(ctx, s.abort)
	err = runSession(ctx, s, o, rep)
	// By the time the streams are closed, every file is in place and
	// finished: a failed goodbye is worth a warning, not a failed run.
	if cerr := s.close(err != nil); err == nil && cerr != nil && !errors.Is(cerr, context.Canceled) && o.Warnf != nil {
		o.Warnf("closing the streams: %v", cerr)
	}
	stop()
	rep.WireBytes = s.wireBytes()
	return err
}

func openSession(ctx context.Context, o Options, sel selection, src, dst transfer.Location) (session, error) {
	switch {
	case src.Remote():
		// Dial first: a restore that cannot start must not create DST.
		p, err := remotePool(ctx, o, src, transfer.Hello{Role: transfer.RoleSender, Path: src.Path, Roots: sel.sel.Roots, Filters: sel.sel.Filters})
		if err != nil {
			return nil, err
		}
		wo := o.writerOptions(sel)
		wo.Delta = !o.WholeFile
		w, err := NewWriter(dst.Path, wo)
		if err != nil {
			p.close(true)
			return nil, err
		}
		return &pullSession{p: p, w: w, ob: o.ob}, nil
	case dst.Remote():
		ls, err := openLocalSource(sel, src.Path)
		if err != nil {
			return nil, err
		}
		wo := o.writerOptions(sel)
		wo.Delta = !o.WholeFile
		opts, _ := json.Marshal(wo)
		p, err := remotePool(ctx, o, dst, transfer.Hello{Role: transfer.RoleReceiver, Path: dst.Path, Receiver: opts})
		if err != nil {
			ls.Close()
			return nil, err
		}
		return &pushSession{p: p, src: ls, readBuf: o.ReadBufferBytes, ob: o.ob}, nil
	default:
		ls, err := openLocalSource(sel, src.Path)
		if err != nil {
			return nil, err
		}
		w, err := NewWriter(dst.Path, o.writerOptions(sel))
		if err != nil {
			ls.Close()
			return nil, err
		}
		return &localSession{src: ls, w: w, jobs: o.Jobs, ob: o.ob}, nil
	}
}

// runSession is the restore proper: list, plan, move the data over the
// streams, commit split files, finish.
func runSession(ctx context.Context, s session, o Options, rep *Report) error {
	list, err := s.list(ctx)
	if err != nil {
		return fmt.Errorf("file list: %w", err)
	}
	entries := list.Entries
	rep.addList(list)
	del := o.Delete && len(list.Errors) == 0
	if o.Delete && !del && o.Warnf != nil {
		o.Warnf("the file list has errors: nothing deleted (as rsync does)")
	}
	if o.DryRun || o.ItemizeChanges {
		lines, err := s.itemize(ctx, entries, del)
		if err != nil {
			return fmt.Errorf("itemize: %w", err)
		}
		rep.Changes = lines
		if rep.Changes == nil {
			rep.Changes = []string{}
		}
		if o.DryRun {
			rep.DryRun = true
			return ctx.Err()
		}
	}
	plan, err := s.plan(ctx, entries)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if del {
		deleted, errs, err := s.delete(ctx, entries)
		if err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		rep.Deleted = len(deleted)
		for _, pe := range errs {
			rep.addError(pe.Path, pe.Err)
		}
	}
	failed := map[string]bool{}
	for _, pe := range plan.Errors {
		rep.addError(pe.Path, pe.Err)
		failed[pe.Path] = true
	}
	dataFiles := 0
	for i := range entries {
		if entries[i].HasData() {
			dataFiles++
		}
	}
	rep.Skipped = dataFiles - len(plan.Need) - len(plan.Errors)
	ob := o.ob
	var needBytes int64
	for _, i := range plan.Need {
		needBytes += entries[i].Size
	}
	ob.start(len(plan.Need), needBytes)

	batches := makeBatches(entries, plan.Need, plan.Signatures, o.Writer.BlockSizeBytes)
	tr := newTracker(ctx, s, rep, batches)
	tr.ob = ob
	ch := make(chan *batch)
	allSent := make(chan struct{}) // every batch is in a stream's hands
	var first firstError           // the stream failure that ended the run
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(allSent)
		defer close(ch)
		for _, b := range batches {
			select {
			case ch <- b:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	// A worker per stream, started as each stream comes up; streams that
	// come up after the last batch went out are not needed.
	g.Go(func() error {
		streams := s.streams()
		for {
			select {
			case i, ok := <-streams:
				if !ok {
					return nil
				}
				g.Go(func() error {
					ob.streamUp()
					defer ob.streamDown()
					err := s.runStream(gctx, i, ch, tr.done)
					if err != nil && first.set(err) {
						// The run is over: the other streams are torn
						// down rather than left to finish or to wait
						// for a stalled agent (or their own timeout).
						s.abort()
					}
					return err
				})
			case <-allSent:
				return nil
			case <-gctx.Done():
				return gctx.Err()
			}
		}
	})
	if err := g.Wait(); err != nil {
		return first.or(err)
	}
	// Deltas that could not be applied are sent again whole, on stream 0
	// (now idle), before split files are committed.
	if retry := tr.takeRetries(); len(retry) > 0 {
		ch := make(chan *batch, len(retry))
		for _, b := range retry {
			ch <- b
		}
		close(ch)
		if err := s.runStream(ctx, 0, ch, tr.done); err != nil {
			return err
		}
	}
	if d, ok := s.(interface{ degraded() error }); ok && o.Warnf != nil {
		if err := d.degraded(); err != nil {
			o.Warnf("not all %d streams could be opened: %v", o.Jobs, err)
		}
	}
	if err := tr.commitDeferred(ctx); err != nil {
		return err
	}
	errs, err := s.finish(ctx, entries)
	if err != nil {
		return fmt.Errorf("finish: %w", err)
	}
	for _, pe := range errs {
		rep.addError(pe.Path, pe.Err)
	}
	return ctx.Err()
}

// firstError keeps the first of several errors: the cause, when the others
// are its consequences. Safe for concurrent use.
type firstError struct {
	mu  sync.Mutex
	err error
}

// set keeps err if it is the first; it reports whether it was.
func (f *firstError) set(err error) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return false
	}
	f.err = err
	return true
}

// or returns the kept error, else err.
func (f *firstError) or(err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	return err
}
