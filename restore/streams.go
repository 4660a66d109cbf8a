package restore

import (
	"context"
	"sync"

	"golang.org/x/sync/errgroup"
)

// runStreams moves batches over the session's streams and books each
// batch's outcome with done (tracker.done); it returns once every batch has
// been answered, or with the error that ended the run.
//
// It runs a fixed set of goroutines: one producer, which hands the batches
// out in order on one unbuffered channel (a batch leaves the producer only
// into the hands of a stream, so when the producer is done every batch is
// taken) and then closes it, and one worker per stream slot (jobs). Each
// worker waits for a stream to come up (s.streams), then runs it until the
// channel is closed. A worker whose stream has not come up when the last
// batch went out ends without it: a small restore does not wait for
// connections it does not need, and a degraded pool (fewer streams than
// jobs, s.streams closed early) runs on the streams it has. s.streams
// delivers stream 0 at once, so some worker always holds a stream.
//
// The first stream failure ends the run: it becomes the cause of the run's
// context, which stops the producer and the waiting workers, and every
// other stream is torn down at once (s.abort) rather than left to finish
// its batches or to wait for a stalled agent. The error returned is that
// cause, never the context.Canceled or the closed streams the other
// workers see afterwards; a cancelled ctx returns ctx's cause.
func runStreams(ctx context.Context, s session, jobs int, batches []*batch, done func(*batch, []error) error, ob *observer) error {
	runCtx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	work := make(chan *batch)
	handedOut := make(chan struct{}) // closed with work: no batch is left
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(handedOut)
		defer close(work)
		for _, b := range batches {
			select {
			case work <- b:
			case <-runCtx.Done():
				return
			}
		}
	})
	streams := s.streams()
	for range jobs {
		wg.Go(func() {
			var i int
			select {
			case j, ok := <-streams:
				if !ok {
					return // degraded: this slot's stream never came
				}
				i = j
			case <-handedOut:
				return // not needed
			case <-runCtx.Done():
				return
			}
			ob.streamUp()
			defer ob.streamDown()
			if err := s.runStream(runCtx, i, work, done); err != nil {
				fail(err) // the first failure is kept as the cause
				s.abort()
			}
		})
	}
	wg.Wait()
	return context.Cause(runCtx)
}

// retryWhole sends again whole, on stream 0, the delta items that could
// not be applied (tr.takeRetries), once runStreams has returned and every
// stream is idle, and before deferred split files are committed. Its error
// is run-fatal.
func retryWhole(ctx context.Context, s session, tr *tracker) error {
	retry := tr.takeRetries()
	if len(retry) == 0 {
		return nil
	}
	ch := make(chan *batch, len(retry))
	for _, b := range retry {
		ch <- b
	}
	close(ch)
	return s.runStream(ctx, 0, ch, tr.done)
}

// pipelineDepth is how many requests a stream may have in flight: while the
// peer works on one batch the next is already on its way, so a round trip
// per batch is not lost on a slow link.
const pipelineDepth = 2

// pipeline runs send for each batch in one goroutine and recv for the same
// batches, in order, in another, with at most pipelineDepth outstanding. It
// returns when batches is closed and every batch was received, or with the
// first error of send or recv (the other goroutine then stops at ctx).
func pipeline[T any](ctx context.Context, batches <-chan *batch, send func(*batch) (T, error), recv func(*batch, T) error) error {
	type pending struct {
		b *batch
		v T
	}
	q := make(chan pending, pipelineDepth-1)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(q)
		for b := range batches {
			v, err := send(b)
			if err != nil {
				return err
			}
			select {
			case q <- pending{b, v}:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	g.Go(func() error {
		for p := range q {
			if err := recv(p.b, p.v); err != nil {
				return err
			}
		}
		return nil
	})
	return g.Wait()
}
