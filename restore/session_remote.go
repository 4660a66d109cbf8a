package restore

import (
	"context"
	"errors"
	"strings"

	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// pullSession restores from a remote sender into a local writer.
type pullSession struct {
	p  *pool
	w  *dest.Writer
	ob *observer
}

func (s *pullSession) listChunks(ctx context.Context) chunkSource {
	return connChunks{s.p.conn(0).ListChunks()}
}

// connChunks is a sender's list read on stream 0.
type connChunks struct{ r *transfer.ListReader }

func (c connChunks) next(ctx context.Context) (treewalk.Chunk, error) { return c.r.Next(ctx) }
func (c connChunks) onStream0() bool                                  { return true }
func (c connChunks) close()                                           {}

func (s *pullSession) plan(ctx context.Context, entries []treewalk.Entry) (transfer.PlanResult, error) {
	return s.w.Plan(ctx, entries)
}

func (s *pullSession) itemize(ctx context.Context, entries []treewalk.Entry, del bool) ([]string, []*treewalk.PathError, error) {
	return s.w.Itemize(ctx, entries, del)
}

func (s *pullSession) delete(ctx context.Context, entries []treewalk.Entry) ([]string, []*treewalk.PathError, error) {
	return s.w.Delete(ctx, entries)
}

func (s *pullSession) streams() <-chan int { return s.p.streams() }

func (s *pullSession) runStream(ctx context.Context, i int, batches <-chan *batch, done func(*batch, []error) error) error {
	c := s.p.conn(i)
	return pipeline(ctx, batches,
		func(b *batch) (struct{}, error) { return struct{}{}, c.SendRead(b.items) },
		func(b *batch, _ struct{}) error {
			errs, err := c.RecvRead(ctx, b.items, progressWriter{s.w, s.ob})
			if err != nil {
				return err
			}
			return done(b, errs)
		})
}

func (s *pullSession) commit(ctx context.Context, e *treewalk.Entry) (itemErr, err error) {
	return s.w.Commit(ctx, e), nil
}

func (s *pullSession) deferCommits() bool { return false }

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

// listChunks: a push plans and finishes on stream 0, which its workers
// use meanwhile, so runSession reads its list whole before planning it.
func (s *pushSession) listChunks(ctx context.Context) chunkSource {
	return walkChunks{s.src.ListChunks(ctx)}
}

func (s *pushSession) plan(ctx context.Context, entries []treewalk.Entry) (transfer.PlanResult, error) {
	return s.p.conn(0).Plan(ctx, entries)
}

// itemize returns the receiver's change lines, with '<' where the data of
// a file is sent: rsync's first letter says the direction, '>' received
// (local, pull), '<' sent to the remote side (push).
func (s *pushSession) itemize(ctx context.Context, entries []treewalk.Entry, del bool) ([]string, []*treewalk.PathError, error) {
	lines, errs, err := s.p.conn(0).Itemize(ctx, entries, del)
	for i, l := range lines {
		if strings.HasPrefix(l, ">") {
			lines[i] = "<" + l[1:]
		}
	}
	return lines, errs, err
}

func (s *pushSession) delete(ctx context.Context, entries []treewalk.Entry) ([]string, []*treewalk.PathError, error) {
	return s.p.conn(0).Delete(ctx)
}

func (s *pushSession) streams() <-chan int { return s.p.streams() }

func (s *pushSession) runStream(ctx context.Context, i int, batches <-chan *batch, done func(*batch, []error) error) error {
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
			return done(b, errs)
		})
}

func (s *pushSession) commit(ctx context.Context, e *treewalk.Entry) (itemErr, err error) {
	return s.p.conn(0).Commit(ctx, e)
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

func (s *pullSession) degraded() error { return s.p.degraded() }
func (s *pushSession) degraded() error { return s.p.degraded() }
