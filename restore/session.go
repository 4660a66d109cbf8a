package restore

import (
	"context"
	"io"

	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// session joins a restore's two ends: the source of the file list and data,
// and the safe writer, either of which may be across the network. The
// three kinds are pull (remote source, local writer), push (local source,
// remote writer) and local (both here); see session_remote.go for the
// first two.
//
// Every method follows one error convention (see doc.go): per-item
// failures come back as values (the Errors of a list or plan, a
// []*treewalk.PathError, the per-item errors handed to done, commit's
// itemErr) and are reported while the run goes on; the last result, err,
// is run-fatal (a broken stream, a protocol error, cancellation) and ends
// the run. ctx cancels every call.
type session interface {
	// listChunks returns the source's file list, chunk by chunk as the
	// sender walks it (unreadable entries in the chunks' Errors).
	listChunks(ctx context.Context) chunkSource
	// plan gives the list to the writer and returns what it needs (the
	// entries it could not plan in its Errors).
	plan(ctx context.Context, entries []treewalk.Entry) (plan transfer.PlanResult, err error)
	// streams delivers the indices of the streams as they become usable
	// (remote streams are dialed in the background), stream 0 at once; it
	// is closed when no more will come.
	streams() <-chan int
	// runStream moves batches over stream i until batches is closed,
	// calling done with each batch's per-item errors (nil entries for
	// items that succeeded). An error of done or of the stream ends the
	// stream and the run.
	runStream(ctx context.Context, i int, batches <-chan *batch, done func(*batch, []error) error) error
	// commit puts a split file in place; deferCommits says whether it must
	// wait until every stream is idle (push: the streams' requests are
	// pipelined, so commits go on stream 0 afterwards).
	commit(ctx context.Context, e *treewalk.Entry) (itemErr, err error)
	deferCommits() bool
	// finish asks the writer for symlinks, hardlinks and directory
	// metadata.
	finish(ctx context.Context, entries []treewalk.Entry) (perItem []*treewalk.PathError, err error)
	// wireBytes is the total that crossed the network so far.
	wireBytes() int64
	// close ends the session; abort says the run failed (do not wait for
	// a clean goodbye).
	close(abort bool) error
	// abort tears the streams down at once (the run was cancelled or a
	// stream failed), from any goroutine, while the workers may still use
	// them.
	abort()
}

// localSession restores from a local tree into a local one.
type localSession struct {
	src  *transfer.LocalSource
	w    *dest.Writer
	jobs int
	ob   *observer
}

func (s *localSession) listChunks(ctx context.Context) chunkSource {
	return walkChunks{s.src.ListChunks(ctx)}
}

func (s *localSession) plan(ctx context.Context, entries []treewalk.Entry) (transfer.PlanResult, error) {
	return s.w.Plan(ctx, entries)
}

func (s *localSession) streams() <-chan int {
	ch := make(chan int, s.jobs)
	for i := range s.jobs {
		ch <- i
	}
	close(ch)
	return ch
}

func (s *localSession) runStream(ctx context.Context, i int, batches <-chan *batch, done func(*batch, []error) error) error {
	for b := range batches {
		errs := make([]error, len(b.items))
		for j := range b.items {
			it := &b.items[j]
			r, err := s.src.Open(ctx, it)
			if err == nil {
				err = progressWriter{s.w, s.ob}.WriteItem(ctx, it, ctxReader{ctx, r})
				r.Close()
			}
			errs[j] = err
		}
		if err := done(b, errs); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

func (s *localSession) commit(ctx context.Context, e *treewalk.Entry) (itemErr, err error) {
	return s.w.Commit(ctx, e), nil
}
func (s *localSession) deferCommits() bool { return false }

func (s *localSession) finish(ctx context.Context, entries []treewalk.Entry) ([]*treewalk.PathError, error) {
	return s.w.Finish(ctx, entries)
}

func (s *localSession) wireBytes() int64 { return 0 }

// abort: nothing to tear down; the workers check ctx between files and the
// copy of a file stops at its next read (ctxReader).
func (s *localSession) abort() {}

func (s *localSession) close(bool) error {
	s.src.Close()
	return s.w.Close()
}

// chunkSource is a file list read chunk by chunk. Not safe for
// concurrent use.
type chunkSource interface {
	// next returns the next chunk, io.EOF after the last; any other
	// error is run-fatal.
	next(ctx context.Context) (treewalk.Chunk, error)
	// requests, when not nil, says that the list is read on stream 0
	// (a pull): its requests, batches with list set, come on this
	// channel for stream 0's worker to move in turn with its data
	// requests (runStreams).
	requests() <-chan *batch
	// close stops a walk that still runs.
	close()
}

// walkChunks is a local walk's chunks.
type walkChunks struct{ c *treewalk.Chunks }

func (w walkChunks) next(context.Context) (treewalk.Chunk, error) { return w.c.Next() }
func (w walkChunks) requests() <-chan *batch                      { return nil }
func (w walkChunks) close()                                       { w.c.Close() }

// ctxReader ends a local copy at its next read once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}
