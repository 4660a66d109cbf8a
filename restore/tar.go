package restore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
)

// MethodTar: the remote agent sends the tree as POSIX pax tar archives, one
// shard per stream, which are extracted straight into place by the safe
// writer (no archive file is written on either side). Without an agent on
// the remote host (or with --remote-path none) the remote's own tar runs
// instead, on one stream. Every file is sent, even on a rerun: the quick
// check only spares the destination's disk.
const MethodTar Method = "tar"

func init() { registerMethod(MethodTar, runTar) }

// NoAgent is the --remote-path value that says the remote host has no
// restoresync: methods that can do without it (tar) run the remote's own
// tools.
const NoAgent = "none"

// runTar is the tar method: pull from an agent (sharded over o.Jobs
// streams) or from the remote's tar; local → local through the same
// sender in-process. Push is not supported.
func runTar(ctx context.Context, o Options, src, dst transport.Location, rep *Report) error {
	if dst.Remote() {
		return fmt.Errorf("%w: --method tar cannot push (local → remote) yet: use --method raw", ErrUsage)
	}
	if o.Delete || o.DryRun || o.ItemizeChanges {
		return fmt.Errorf("%w: --delete, --dry-run and --itemize-changes need --method raw (or auto), not tar", ErrUsage)
	}
	sel, err := planSelection(o, src)
	if err != nil {
		return err
	}
	if !src.Remote() {
		o.Dialer = transfer.PipeDialer{Config: transfer.ServerConfig{Version: o.Version}}
	}
	d, err := dialer(o, src)
	if err != nil {
		return err
	}
	if o.SSH.RemotePath == NoAgent && o.Dialer == nil {
		if o.selective() {
			return fmt.Errorf("%w: %s with --method tar need the restoresync agent on the remote, not --remote-path none", ErrUsage, o.selectionFlags())
		}
		return runTarAgentless(ctx, o, d, src, dst, rep)
	}
	hello := func(shard int) transfer.Hello {
		return transfer.Hello{Role: transfer.RoleTarSender, Path: src.Path, Version: o.Version,
			Compression: o.Compression.String(), ReadBufferBytes: o.ReadBufferBytes, Shard: shard, Shards: o.Jobs,
			Roots: sel.sel.Roots, Filters: sel.sel.Filters}
	}
	// The first stream proves that the agent is there before DST is made.
	first, err := dialTar(ctx, d, hello(0), o.timeouts())
	if err != nil {
		if o.Dialer == nil && agentMissing(err) && !o.selective() {
			if o.Warnf != nil {
				o.Warnf("no restoresync agent on %s (%v): using the remote's tar on one stream", src.Host, err)
			}
			return runTarAgentless(ctx, o, d, src, dst, rep)
		}
		return err
	}
	x, err := openExtractor(o, dst.Path, true)
	if err != nil {
		first.close(true)
		return err
	}
	defer closeExtractor(x, rep)

	var mu sync.Mutex
	streams := []*tarStream{first}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return first.extract(gctx, x, o.ob) })
	for k := 1; k < o.Jobs; k++ {
		g.Go(func() error {
			ts, err := dialTar(gctx, d, hello(k), o.timeouts())
			if err != nil {
				// Each shard holds its own files: one missing fails the run.
				return fmt.Errorf("tar stream %d of %d: %w", k+1, o.Jobs, err)
			}
			mu.Lock()
			streams = append(streams, ts)
			mu.Unlock()
			return ts.extract(gctx, x, o.ob)
		})
	}
	err = g.Wait()
	if err == nil {
		err = x.Finish(ctx)
	}
	var cg errgroup.Group
	cerrs := make([]error, len(streams))
	for i, ts := range streams {
		cg.Go(func() error { cerrs[i] = ts.close(err != nil); return nil })
	}
	cg.Wait()
	for _, ts := range streams {
		rep.WireBytes += ts.wireBytes()
	}
	if err == nil {
		if cerr := errors.Join(cerrs...); cerr != nil && !errors.Is(cerr, context.Canceled) {
			err = cerr
		}
	}
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// tarStream is one tar-sender stream.
type tarStream struct {
	s transport.Stream
	c *transfer.Conn
}

func dialTar(ctx context.Context, d transport.Dialer, h transfer.Hello, to transfer.Timeouts) (*tarStream, error) {
	s, c, err := transfer.Open(ctx, d, h, to)
	if err != nil {
		return nil, err
	}
	return &tarStream{s: s, c: c}, nil
}

// extract reads the stream's archive into x; ctx's cancellation closes the
// stream to end a blocked read.
func (ts *tarStream) extract(ctx context.Context, x *dest.Extractor, ob *observer) error {
	ob.streamUp()
	defer ob.streamDown()
	stop := context.AfterFunc(ctx, func() { ts.s.Close() })
	defer stop()
	err := x.Extract(ctx, ts.c.TarReader())
	if err != nil && ctx.Err() == nil {
		if msg := ts.s.Stderr(); msg != "" {
			err = fmt.Errorf("%w; remote stderr: %s", err, strings.TrimSpace(msg))
		}
	}
	return err
}

func (ts *tarStream) close(abort bool) error { return ts.c.CloseTar(abort) }

func (ts *tarStream) wireBytes() int64 {
	s, r := ts.c.WireBytes()
	return s + r
}

// agentMissing reports whether a handshake failed because the remote host
// has no restoresync agent (transfer.ErrNoAgent): the remote shell could
// not find the command, or something else than the agent answered.
func agentMissing(err error) bool { return errors.Is(err, transfer.ErrNoAgent) }
