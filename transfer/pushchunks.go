package transfer

import (
	"context"
	"fmt"

	"github.com/restoresync/restoresync/treewalk"
)

// A push streams its file list too (protocol 8): the client plans each
// chunk of its walk as it comes (msgPlanChunk) and, once a chunk's data is
// placed, asks the receiver to finish the entries of it, and the
// directories whose listing has ended, by path (msgFinishPlanned). The
// receiver checks the chunks in turn as a pull's receiver does
// (treewalk.ListChecker) and keeps, of each planned chunk, only the
// entries that finishing acts on until they are finished (symlinks,
// special files, hardlinks, the leaders of hardlink groups, and the
// directories), so its memory does not grow with the tree; a path to
// finish that it does not hold ends the stream (ErrProtocol). Since
// protocol 9 each chunk also says what --delete, --dry-run and
// --itemize-changes ask of it (ChunkOptions), which the receiver does on
// its sink (a ChunkChanger) before it plans the chunk, answering with the
// chunk's changes; a dry run's chunks are not planned and nothing of
// them is held.

// pushChunks is the receiver's state of a push's list streamed in chunks.
type pushChunks struct {
	check treewalk.ListChecker
	// held are the planned entries that finishing acts on, by path, until
	// they are finished.
	held map[string]treewalk.Entry
	// opts are the options of the last chunk (ChunkOptions: Delete only
	// goes from true to false), and changes does what they ask on the
	// sink, from the first chunk that asks for something.
	opts    ChunkOptions
	changes ListChanges
}

// PlanChunk sends the next chunk of a file list streamed in chunks to a
// receiver (push), as Plan sends a whole list: the receiver checks it as
// a part of the list (tree order, hardlinks only to the leaders of it or
// of an earlier chunk, nothing beneath a directory a chunk said was
// complete), does what o asks of it (deletions in the directories it
// completes, its change lines: the returned Changes, as a pull does them
// on its own writer), then, unless o.DryRun, compares it with its tree
// and answers with the indices of the entries whose data it needs and
// the signatures of the copies it has. The chunk's Errors are not sent
// (they are the client's; clear o.Delete from the chunk that has some
// on). Finish the chunk's entries with FinishPlanned. The error ends the
// stream.
func (c *Conn) PlanChunk(ctx context.Context, ch *treewalk.Chunk, o ChunkOptions) (_ PlanResult, _ Changes, err error) {
	defer c.watch(ctx)(&err)
	c.pending.Add(1)
	defer c.pending.Add(-1)
	c.enc.byte(msgPlanChunk)
	c.enc.byte(o.flags())
	c.enc.chunk(&treewalk.Chunk{Entries: ch.Entries, Leaders: ch.Leaders, Last: ch.Last, Closed: ch.Closed})
	c.planned = nil
	if err := c.enc.flush(); err != nil {
		return PlanResult{}, Changes{}, c.fail(err)
	}
	if err := c.dec.status(); err != nil {
		return PlanResult{}, Changes{}, c.fail(err)
	}
	var chg Changes
	if o.any() {
		if chg, err = c.dec.changes(); err != nil {
			return PlanResult{}, Changes{}, c.fail(err)
		}
	}
	if o.DryRun {
		return PlanResult{}, chg, nil
	}
	res, err := c.dec.planReply(ch.Entries)
	if err != nil {
		return PlanResult{}, Changes{}, c.fail(err)
	}
	return res, chg, nil
}

// FinishPlanned asks a receiver to finish entries of the chunks planned
// with PlanChunk, named by path in the order Finish takes them
// (symlinks, special files, hardlinks, then directories deepest first),
// each at most once: a path it does not hold (never planned, finished
// already, or a regular file that no hardlink needs) ends the stream.
// It returns the per-entry errors; err ends the run.
func (c *Conn) FinishPlanned(ctx context.Context, paths []string) (_ []*treewalk.PathError, err error) {
	defer c.watch(ctx)(&err)
	c.pending.Add(1)
	defer c.pending.Add(-1)
	c.enc.byte(msgFinishPlanned)
	c.enc.strings(paths)
	if err := c.enc.flush(); err != nil {
		return nil, c.fail(err)
	}
	if err := c.dec.status(); err != nil {
		return nil, c.fail(err)
	}
	errs, err := c.dec.pathErrors()
	if err != nil {
		return nil, c.fail(err)
	}
	return errs, nil
}

// servePlanChunk answers msgPlanChunk on the receiver; its error ends the
// stream.
func (s *server) servePlanChunk(ctx context.Context) error {
	b, err := s.dec.byte()
	if err != nil {
		return err
	}
	o, ok := chunkOptions(b)
	if !ok {
		return fmt.Errorf("%w: chunk options %#x", ErrProtocol, b)
	}
	ch, err := s.dec.chunk()
	if err != nil {
		return err
	}
	if len(ch.Errors) > 0 {
		return fmt.Errorf("%w: a chunk to plan carries list errors", ErrProtocol)
	}
	if s.push == nil {
		s.push = &pushChunks{held: map[string]treewalk.Entry{}, opts: o}
	}
	if err := s.push.options(o); err != nil {
		return err
	}
	if err := s.push.check.Check(ch); err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	leader := make(map[int]bool, len(ch.Leaders))
	for _, i := range ch.Leaders {
		leader[i] = true
	}
	for i := range ch.Entries {
		if e := &ch.Entries[i]; !o.DryRun && (e.Kind != treewalk.KindFile || e.LinkTo != "" || leader[i]) {
			s.push.held[e.Path] = *e
		}
	}
	s.planned = nil // msgFinish cannot refer to a chunk
	sink, err := s.openSink(ctx)
	var chg Changes
	if err == nil && o.any() {
		chg, err = s.push.chunkChanges(ctx, sink, &ch)
	}
	var res PlanResult
	if err == nil && !o.DryRun {
		res, err = sink.Plan(ctx, ch.Entries)
	}
	s.enc.status(err)
	if err == nil {
		if o.any() {
			s.enc.changes(chg)
		}
		if !o.DryRun {
			s.enc.planReply(res)
		}
	}
	return nil
}

// options checks a chunk's options against the list's first chunk's:
// Itemize and DryRun are the list's, and Delete, once cleared, stays so.
func (p *pushChunks) options(o ChunkOptions) error {
	first := p.opts
	if o.Itemize != first.Itemize || o.DryRun != first.DryRun || o.Delete && !first.Delete {
		return fmt.Errorf("%w: chunk options %+v after %+v", ErrProtocol, o, first)
	}
	p.opts = o
	return nil
}

// chunkChanges does what the list's options ask of ch on sink, which
// must be a ChunkChanger (else errNoSelection).
func (p *pushChunks) chunkChanges(ctx context.Context, sink Sink, ch *treewalk.Chunk) (Changes, error) {
	if p.changes == nil {
		cc, ok := sink.(ChunkChanger)
		if !ok {
			return Changes{}, errNoSelection
		}
		p.changes = cc.ChunkChanges(p.opts)
	}
	return p.changes.Chunk(ctx, ch, !p.opts.Delete)
}

// serveFinishPlanned answers msgFinishPlanned on the receiver; its error
// ends the stream.
func (s *server) serveFinishPlanned(ctx context.Context) error {
	paths, err := s.dec.strings()
	if err != nil {
		return err
	}
	if s.push == nil && len(paths) > 0 {
		return fmt.Errorf("%w: finish before a planned chunk", ErrProtocol)
	}
	entries := make([]treewalk.Entry, 0, len(paths))
	for _, p := range paths {
		e, ok := s.push.held[p]
		if !ok {
			return fmt.Errorf("%w: finish of %q, which no planned chunk holds to finish", ErrProtocol, p)
		}
		delete(s.push.held, p)
		entries = append(entries, e)
	}
	s.finishReply(ctx, entries)
	return nil
}
