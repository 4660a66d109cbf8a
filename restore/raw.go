package restore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
	"github.com/restoresync/restoresync/treewalk"
)

// MethodRaw: a file list, rsync's quick check on the receiver, then file
// contents over parallel streams, small files batched and big ones split
// into blocks; over a network, files DST holds in another version travel
// as deltas against that copy.
const MethodRaw Method = "raw"

// runRaw is the raw method: file list, quick check, parallel streams.
func runRaw(ctx context.Context, o Options, src, dst transport.Location, rep *Report) error {
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
	started := time.Now()
	err = runSession(ctx, s, o, rep)
	if err == nil {
		rep.addStreams(ctx, s, o.jobsAuto, time.Since(started))
	}
	// By the time the streams are closed, every file is in place and
	// finished: a failed goodbye is worth a warning, not a failed run.
	if cerr := s.close(err != nil); err == nil && cerr != nil && !errors.Is(cerr, context.Canceled) && o.Warnf != nil {
		o.Warnf("closing the streams: %v", cerr)
	}
	stop()
	rep.WireBytes = s.wireBytes()
	return err
}

// openSession opens the session of a raw restore: pull (remote src: the
// pool of streams to the agent, then the local writer), push (remote dst:
// the local source, then the pool to the agent's writer) or local. The
// remote side is reached before DST is created, so a restore that cannot
// start leaves DST alone. Its errors are run-fatal.
func openSession(ctx context.Context, o Options, sel selection, src, dst transport.Location) (session, error) {
	switch {
	case src.Remote():
		// Dial first: a restore that cannot start must not create DST.
		p, err := remotePool(ctx, o, src, transfer.Hello{Role: transfer.RoleSender, Path: src.Path, Roots: sel.sel.Roots, Filters: sel.sel.Filters})
		if err != nil {
			return nil, err
		}
		wo := o.writerOptions(sel)
		wo.Delta = !o.WholeFile
		w, err := dest.NewWriter(dst.Path, wo)
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
		ro := receiverOptions(wo)
		p, err := remotePool(ctx, o, dst, transfer.Hello{Role: transfer.RoleReceiver, Path: dst.Path, Receiver: &ro})
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
		w, err := dest.NewWriter(dst.Path, o.writerOptions(sel))
		if err != nil {
			ls.Close()
			return nil, err
		}
		return &localSession{src: ls, w: w, jobs: o.Jobs, ob: o.ob}, nil
	}
}

// runSession is the raw restore proper, on an open session, over the
// file list as the sender walks it (chunkRun): for each chunk, delete
// and itemize what --delete, --dry-run and -i ask (in each directory
// whose listing the chunk ends, as rsync's --delete-during; nothing more
// once the sender has reported a list error; a push's receiver does it
// on the far side as it plans the chunk), plan it (quick check,
// signatures), move the needed data over the streams (runStreams) and,
// once its data is placed, finish it (links, special files, the
// directories whose listing has ended); failed deltas go again whole
// meanwhile; then commit deferred split files. Per-file failures go
// into rep; the error returned ends the run.
func runSession(ctx context.Context, s session, o Options, rep *Report) error {
	src := s.listChunks(ctx)
	defer src.close()
	if push, ok := s.(*pushSession); ok {
		push.control = true
	}
	if _, local := s.(*localSession); !local {
		o.ob.wire(s.wireBytes)
	}
	tr := newTracker(ctx, s, rep, nil)
	tr.ob = o.ob
	r := newChunkRun(s, o, rep, tr, src)
	if err := r.run(ctx); err != nil {
		return err
	}
	if d, ok := s.(interface{ degraded() error }); ok && o.Warnf != nil {
		if err := d.degraded(); err != nil {
			o.Warnf("not all %d streams could be opened: %v", o.Jobs, err)
		}
	}
	if err := tr.commitDeferred(); err != nil {
		return err
	}
	return ctx.Err()
}

// deleteAllowed reports whether --delete may delete on list: not when the
// sender reported list errors (as rsync does), which it warns about.
func deleteAllowed(o Options, list treewalk.List) bool {
	del := o.Delete && len(list.Errors) == 0
	if o.Delete && !del && o.Warnf != nil {
		o.Warnf("the file list has errors: nothing deleted (as rsync does)")
	}
	return del
}

// itemizeList does what --dry-run and --itemize-changes ask of a list read
// whole, with itemize (the session's or the writer's): the change lines and
// change entries into rep; for a dry run also the entries the restore
// would fail on (they fail the dry run too: exit 23, as rsync -n; a real
// run reports them when it writes them) and what --delete would remove.
// done says that the run ends here (a dry run); err is itemize's, or
// ctx's for a dry run.
func itemizeList(ctx context.Context, o Options, rep *Report, list treewalk.List, del bool,
	itemize func(context.Context, []treewalk.Entry, bool) ([]string, []*treewalk.PathError, error)) (done bool, err error) {
	if !o.DryRun && !o.ItemizeChanges {
		return false, nil
	}
	lines, errs, err := itemize(ctx, list.Entries, del)
	if err != nil {
		return true, fmt.Errorf("itemize: %w", err)
	}
	rep.Changes = lines
	if rep.Changes == nil {
		rep.Changes = []string{}
	}
	rep.ChangeEntries = changeEntries(lines, list.Entries)
	if !o.DryRun {
		return false, nil
	}
	for _, pe := range errs {
		rep.addError(pe.Path, pe.Err)
	}
	rep.DryRun = true
	rep.Deleted, _ = dest.ItemizedChanges(lines)
	return true, ctx.Err()
}
