package restore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// pullSession restores from a remote sender into a local writer.
type pullSession struct {
	p  *pool
	w  *dest.Writer
	ob *observer
	// lr reads the list on stream 0 (listChunks), whose requests come
	// to stream 0's worker on reqs as list batches.
	lr   *transfer.ListReader
	reqs chan *batch
}

func (s *pullSession) listChunks(ctx context.Context) chunkSource {
	s.lr = s.p.conn(0).ListChunks()
	s.reqs = make(chan *batch)
	return &connChunks{reqs: s.reqs}
}

// connChunks is a sender's list read on stream 0, one chunk ahead: when
// a chunk arrives, the request for the next one is already on its way,
// behind the data requests stream 0 has in flight, so that the sender's
// walk, its reads and this end's planning and writing overlap.
type connChunks struct {
	reqs chan *batch
	// ahead is the request of the next chunk; nil before the first and
	// after the last.
	ahead *batch
}

func (c *connChunks) next(ctx context.Context) (treewalk.Chunk, error) {
	for {
		if c.ahead == nil {
			if err := c.ask(ctx); err != nil {
				return treewalk.Chunk{}, err
			}
		}
		var rep listReply
		select {
		case rep = <-c.ahead.list:
		case <-ctx.Done():
			return treewalk.Chunk{}, context.Cause(ctx)
		}
		c.ahead = nil
		if rep.err != nil {
			return treewalk.Chunk{}, rep.err
		}
		ch := rep.ch
		if !ch.Last {
			if err := c.ask(ctx); err != nil {
				return treewalk.Chunk{}, err
			}
		}
		// An empty chunk says that the sender's walk had nothing ready
		// while this end's reads waited behind the request: the next
		// request, just sent, asks again.
		if len(ch.Entries) > 0 || len(ch.Errors) > 0 || ch.Last {
			return ch, nil
		}
	}
}

// ask hands the request of the next chunk to stream 0's worker.
func (c *connChunks) ask(ctx context.Context) error {
	b := &batch{list: make(chan listReply, 1)}
	select {
	case c.reqs <- b:
		c.ahead = b
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (c *connChunks) requests() <-chan *batch { return c.reqs }
func (c *connChunks) close()                  {}

func (s *pullSession) plan(ctx context.Context, entries []treewalk.Entry) (transfer.PlanResult, error) {
	return s.w.Plan(ctx, entries)
}

func (s *pullSession) streams() <-chan int { return s.p.streams() }

func (s *pullSession) runStream(ctx context.Context, i int, batches <-chan *batch, done func(*batch, []error) error) error {
	c := s.p.conn(i)
	return pipeline(ctx, batches,
		func(b *batch) (struct{}, error) {
			if b.list != nil {
				return struct{}{}, s.lr.Send()
			}
			return struct{}{}, c.SendRead(b.items)
		},
		func(b *batch, _ struct{}) error {
			if b.list != nil {
				ch, err := s.lr.Recv(ctx)
				b.list <- listReply{ch, err}
				if err != nil {
					return fmt.Errorf("file list: %w", err)
				}
				return nil
			}
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
	// control says that stream 0 is the run's control stream (a list
	// streamed in chunks): no worker pipelines on it; plan, finish and
	// commit use it whenever they need to, and the producer moves a
	// batch on it, one request at a time under mu, when no other stream
	// is free. runSession sets it for every push (its --delete, -n and
	// -i stream too); without it (a list sent whole with Plan and
	// Finish), the workers would pipeline on stream 0 too and the
	// commits wait until the end (deferCommits).
	control bool
	mu      sync.Mutex // stream 0's requests, with control
}

// lock0 takes stream 0 for one request when it is the control stream,
// and returns its release.
func (s *pushSession) lock0() func() {
	if !s.control {
		return func() {}
	}
	s.mu.Lock()
	return s.mu.Unlock
}

// listChunks: the local walk, chunk by chunk.
func (s *pushSession) listChunks(ctx context.Context) chunkSource {
	return walkChunks{s.src.ListChunks(ctx)}
}

func (s *pushSession) plan(ctx context.Context, entries []treewalk.Entry) (transfer.PlanResult, error) {
	defer s.lock0()()
	return s.p.conn(0).Plan(ctx, entries)
}

func (s *pushSession) streams() <-chan int { return s.p.streams() }

func (s *pushSession) runStream(ctx context.Context, i int, batches <-chan *batch, done func(*batch, []error) error) error {
	c := s.p.conn(i)
	buf := make([]byte, s.readBuf)
	if i == 0 && s.control {
		for b := range batches {
			errs, err := s.write0(ctx, b, buf)
			if err != nil {
				return err
			}
			// done may commit a split file, on stream 0 too: after the
			// release.
			if err := done(b, errs); err != nil {
				return err
			}
		}
		return nil
	}
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

// write0 moves one batch on the control stream, stream 0: its request
// and its reply, under mu.
func (s *pushSession) write0(ctx context.Context, b *batch, buf []byte) ([]error, error) {
	defer s.lock0()()
	c := s.p.conn(0)
	sendErrs, err := c.SendWrite(ctx, b.items, progressSource{s.src, s.ob}, buf)
	if err != nil {
		return nil, err
	}
	errs, err := c.RecvWrite(b.items)
	if err != nil {
		return nil, err
	}
	for j := range errs {
		if sendErrs[j] != nil { // the source's own error says more
			errs[j] = sendErrs[j]
		}
	}
	return errs, nil
}

func (s *pushSession) commit(ctx context.Context, e *treewalk.Entry) (itemErr, err error) {
	defer s.lock0()()
	return s.p.conn(0).Commit(ctx, e)
}

func (s *pushSession) deferCommits() bool { return !s.control }

// planChunk plans the next chunk of a list streamed in chunks on the
// receiver, which checks it as a part of the list and first does what co
// asks of it (Conn.PlanChunk); the change lines say '<' where the data of
// a file is sent: rsync's first letter says the direction, '>' received
// (local, pull), '<' sent to the remote side (push).
func (s *pushSession) planChunk(ctx context.Context, ch *treewalk.Chunk, co transfer.ChunkOptions) (transfer.PlanResult, transfer.Changes, error) {
	defer s.lock0()()
	plan, chg, err := s.p.conn(0).PlanChunk(ctx, ch, co)
	for i, l := range chg.Lines {
		if strings.HasPrefix(l, ">") {
			chg.Lines[i] = "<" + l[1:]
		}
	}
	return plan, chg, err
}

// finish: with a list streamed in chunks, the receiver holds the planned
// entries that finishing acts on, which are then named by path.
func (s *pushSession) finish(ctx context.Context, entries []treewalk.Entry) ([]*treewalk.PathError, error) {
	defer s.lock0()()
	if s.control {
		paths := make([]string, len(entries))
		for i := range entries {
			paths[i] = entries[i].Path
		}
		return s.p.conn(0).FinishPlanned(ctx, paths)
	}
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
