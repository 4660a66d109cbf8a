package restore

import (
	"context"
	"errors"

	"golang.org/x/sync/errgroup"

	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// pipelineDepth is how many requests a stream may have in flight: while the
// peer works on one batch the next is already on its way, so a round trip
// per batch is not lost on a slow link.
const pipelineDepth = 2

// pipeline runs send for each batch in one goroutine and recv for the same
// batches, in order, in another, with at most pipelineDepth outstanding.
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

// pullSession restores from a remote sender into a local writer.
type pullSession struct {
	p  *pool
	w  *Writer
	ob *observer
}

func (s *pullSession) list(ctx context.Context) (treewalk.List, error) { return s.p.conn(0).List(ctx) }

func (s *pullSession) plan(ctx context.Context, entries []treewalk.Entry) (transfer.PlanResult, error) {
	return s.w.Plan(ctx, entries)
}

func (s *pullSession) itemize(ctx context.Context, entries []treewalk.Entry, del bool) ([]string, error) {
	return s.w.Itemize(ctx, entries, del)
}

func (s *pullSession) delete(ctx context.Context, entries []treewalk.Entry) ([]string, []*treewalk.PathError, error) {
	return s.w.Delete(ctx, entries)
}

func (s *pullSession) streams() <-chan int { return s.p.streams() }

func (s *pullSession) runStream(ctx context.Context, i int, batches <-chan *batch, done func(*batch, []error)) error {
	c := s.p.conn(i)
	return pipeline(ctx, batches,
		func(b *batch) (struct{}, error) { return struct{}{}, c.SendRead(b.items) },
		func(b *batch, _ struct{}) error {
			errs, err := c.RecvRead(ctx, b.items, progressWriter{s.w, s.ob})
			if err != nil {
				return err
			}
			done(b, errs)
			return nil
		})
}

func (s *pullSession) commit(ctx context.Context, e *treewalk.Entry) error { return s.w.Commit(ctx, e) }
func (s *pullSession) deferCommits() bool                                  { return false }

func (s *pullSession) finish(ctx context.Context, entries []treewalk.Entry) ([]*treewalk.PathError, error) {
	return s.w.Finish(ctx, entries)
}

func (s *pullSession) wireBytes() int64 { return s.p.wireBytes() }
func (s *pullSession) abort()           { s.p.abort() }

func (s *pullSession) close(abort bool) error {
	err := s.p.close(abort)
	return errors.Join(err, s.w.Close())
}

// pushSession restores from a local source into a remote writer.
type pushSession struct {
	p       *pool
	src     *transfer.LocalSource
	readBuf int
	ob      *observer
}

func (s *pushSession) list(ctx context.Context) (treewalk.List, error) { return s.src.List(ctx) }

func (s *pushSession) plan(ctx context.Context, entries []treewalk.Entry) (transfer.PlanResult, error) {
	return s.p.conn(0).Plan(ctx, entries)
}

func (s *pushSession) itemize(ctx context.Context, entries []treewalk.Entry, del bool) ([]string, error) {
	return s.p.conn(0).Itemize(ctx, entries, del)
}

func (s *pushSession) delete(ctx context.Context, entries []treewalk.Entry) ([]string, []*treewalk.PathError, error) {
	return s.p.conn(0).Delete(ctx)
}

func (s *pushSession) streams() <-chan int { return s.p.streams() }

func (s *pushSession) runStream(ctx context.Context, i int, batches <-chan *batch, done func(*batch, []error)) error {
	c := s.p.conn(i)
	buf := make([]byte, s.readBuf)
	return pipeline(ctx, batches,
		func(b *batch) ([]error, error) { return c.SendWrite(ctx, b.items, progressSource{s.src, s.ob}, buf) },
		func(b *batch, sendErrs []error) error {
			errs, err := c.RecvWrite(b.items)
			if err != nil {
				return err
			}
			for j := range errs {
				if sendErrs[j] != nil { // the source's own error says more
					errs[j] = sendErrs[j]
				}
			}
			done(b, errs)
			return nil
		})
}

func (s *pushSession) commit(ctx context.Context, e *treewalk.Entry) error {
	itemErr, err := s.p.conn(0).Commit(ctx, e)
	if err != nil {
		return &fatalError{err}
	}
	return itemErr
}

func (s *pushSession) deferCommits() bool { return true }

func (s *pushSession) finish(ctx context.Context, entries []treewalk.Entry) ([]*treewalk.PathError, error) {
	return s.p.conn(0).Finish(ctx, entries)
}

func (s *pushSession) wireBytes() int64 { return s.p.wireBytes() }
func (s *pushSession) abort()           { s.p.abort() }

func (s *pushSession) close(abort bool) error {
	err := s.p.close(abort)
	return errors.Join(err, s.src.Close())
}

// fatalError marks an error that ends the run although it came from a
// per-entry call.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

func (s *pullSession) degraded() error { return s.p.degraded() }
func (s *pushSession) degraded() error { return s.p.degraded() }
