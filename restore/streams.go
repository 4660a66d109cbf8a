package restore

import (
	"context"
	"sync"

	"golang.org/x/sync/errgroup"
)

// runStreams moves the batches produce hands out (emit) over the
// session's streams and books each batch's outcome with done (the
// chunk run's, tracker.done and the chunk's count); it returns once
// produce has returned and every batch has been answered, or with the
// error that ended the run.
//
// It runs a fixed set of goroutines: one producer, produce, which plans
// the file list as it arrives and hands the batches out in order on one
// unbuffered channel (a batch leaves the producer only into the hands of
// a stream, so when produce returns every batch is taken; emit blocks
// until a stream takes it: the backpressure that keeps the list from
// running ahead of the data), and one worker per stream slot (jobs). Each
// worker waits for a stream to come up (s.streams), then runs it until
// the channel is closed. A worker whose stream has not come up when the
// last batch went out ends without it: a small restore does not wait for
// connections it does not need, and a degraded pool (fewer streams than
// jobs, s.streams closed early) runs on the streams it has. s.streams
// delivers stream 0 at once, so some worker always holds a stream.
//
// list0, when not nil, carries the requests of a pull's file list,
// read on stream 0 (list batches, connChunks): the worker of stream 0
// moves them in turn with the batches it takes, a list request before
// any batch that waits, so that the list's round trips overlap with the
// data's and a run with one stream is as pipelined as any other stream.
//
// control0 says that stream 0 is a push's control stream (plan, finish,
// commits on stream 0 for the whole run): the worker of stream 0 never
// runs, and the producer moves a batch on stream 0 whenever no other
// stream is ready to take it.
//
// The first stream failure (or produce's error) ends the run: it becomes
// the cause of the run's context, which stops the producer and the
// waiting workers, and every other stream is torn down at once (s.abort)
// rather than left to finish its batches or to wait for a stalled agent.
// The error returned is that cause, never the context.Canceled or the
// closed streams the other workers see afterwards; a cancelled ctx
// returns ctx's cause.
func runStreams(ctx context.Context, s session, jobs int, produce func(ctx context.Context, emit func(*batch) error) error, done func(*batch, []error) error, ob *observer, control0 bool, list0 <-chan *batch) error {
	runCtx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	work := make(chan *batch)
	handedOut := make(chan struct{}) // closed with work: no batch is left
	emit := func(b *batch) error {
		if control0 {
			select {
			case work <- b:
				return nil
			default:
			}
			one := make(chan *batch, 1)
			one <- b
			close(one)
			ob.streamUp() // the control stream moves this batch itself
			defer ob.streamDown()
			return s.runStream(runCtx, 0, one, done)
		}
		select {
		case work <- b:
			return nil
		case <-runCtx.Done():
			return context.Cause(runCtx)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(handedOut)
		defer close(work)
		if err := produce(runCtx, emit); err != nil {
			fail(err)
			s.abort()
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
			if i == 0 && control0 {
				return // a control stream to the end (a push)
			}
			in := (<-chan *batch)(work)
			if i == 0 && list0 != nil {
				in = merge0(runCtx, list0, work)
			}
			ob.streamUp()
			defer ob.streamDown()
			if err := s.runStream(runCtx, i, in, done); err != nil {
				fail(err) // the first failure is kept as the cause
				s.abort()
			}
		})
	}
	wg.Wait()
	return context.Cause(runCtx)
}

// merge0 is stream 0's input when it also reads the list: the list's
// requests and the batches of work, one at a time, a waiting list
// request first; it is closed when work is (every list request comes
// before the producer ends) or ctx ends.
func merge0(ctx context.Context, list0, work <-chan *batch) <-chan *batch {
	out := make(chan *batch)
	go func() {
		defer close(out)
		for {
			var b *batch
			select {
			case b = <-list0:
			default:
				select {
				case b = <-list0:
				case next, ok := <-work:
					if !ok {
						return
					}
					b = next
				case <-ctx.Done():
					return
				}
			}
			select {
			case out <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
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
		for {
			// Waiting for the next batch ends with the run: the
			// producer may hold batches back until earlier ones are
			// answered, which a failed recv never does.
			var b *batch
			select {
			case next, ok := <-batches:
				if !ok {
					return nil
				}
				b = next
			case <-ctx.Done():
				return ctx.Err()
			}
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
