package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// Options configure Run. The zero value of each field has the documented
// default; Src and Dst are required.
type Options struct {
	// Src and Dst are rsync-style locations: PATH, [user@]host:PATH or
	// ssh://[user@]host[:port]/PATH. At most one is remote. SRC's contents
	// become DST (created if missing), with or without a trailing slash.
	Src, Dst string
	// Method is the restore method; "" means auto.
	Method Method
	// Jobs is the number of parallel streams (SSH connections); 0 means 4.
	Jobs int
	// Compression is the codec for every stream; the zero value is none.
	// Callers wanting the default use transfer.DefaultCompression.
	Compression transfer.Compression
	// Writer configures the receiving side (owners, modes, block size,
	// write buffer).
	Writer WriterOptions
	// ReadBufferBytes is the size of each stream's disk read buffer on the
	// sending side, local or remote; 0 means 256 KiB.
	ReadBufferBytes int
	// SSH says how to reach the remote side.
	SSH transfer.SSHOptions
	// Version is announced to the remote agent.
	Version string
	// Dialer, when not nil, opens the streams to the remote side instead
	// of SSH (tests and benchmarks use transfer.PipeDialer).
	Dialer transfer.Dialer
	// Stdin is read when Src is "-" (a tar archive on standard input); nil
	// means os.Stdin.
	Stdin io.Reader
	// WholeFile turns the raw method's native delta off (rsync's
	// --whole-file): a file that DST holds in another version is sent
	// whole. Local restores never use deltas.
	WholeFile bool
	// Warnf, when not nil, is told of problems that do not fail the run
	// (fewer streams than asked for could be opened). Called from the
	// goroutine running Run.
	Warnf func(format string, args ...any)

	// Operator experience (progress, logs, bandwidth).

	// Progress, when not nil, is told how the restore advances (see
	// Progress); called from several goroutines.
	Progress Progress
	// Logger, when not nil, gets a record at level Info for each regular
	// file restored ("restored", with path, size and action attributes).
	// Safe for concurrent use, as every slog.Logger is.
	Logger *slog.Logger
	// BwLimitBytes caps the bytes per second read and written by all the
	// streams of the restore together, like rsync's --bwlimit; 0 means no
	// limit. It applies to the network streams (and the in-process ones of
	// a local tar restore), not to a local → local raw copy.
	BwLimitBytes int64
	// lim is the shared bucket for BwLimitBytes, and ob reports to
	// Progress and Logger; both made by Run.
	lim *limiter
	ob  *observer

	// Selection: choosing what to restore (see selection.go).
	//
	// MoreSrc are further SRCs after Src, all on Src's host (or all
	// local). With several SRCs, each lands at DST/<its name>; a trailing
	// slash makes no difference.
	MoreSrc []string
	// Relative keeps each SRC's whole path under DST (rsync's -R), or the
	// part after a "/./" in it; the directories on the way are created
	// with their source metadata.
	Relative bool
	// Filters are rsync's include/exclude rules, first match wins (see
	// treewalk.Filter); the sender applies them as it walks.
	Filters []treewalk.Rule
	// FilesFrom, when not nil, lists the paths to restore, relative to
	// Src (rsync's --files-from): each lands at DST/<path>, directories
	// with everything below them. Items that are empty or start with "#"
	// or ";" are skipped, as rsync skips such lines (treewalk.IsComment);
	// "./#name" lists a path that starts with one.
	FilesFrom []string
	// Delete removes from DST what the source lacks, below the restored
	// SRCs only; entries the Filters exclude are kept (rsync's --delete).
	// Nothing is deleted when the file list has errors.
	Delete bool
	// DryRun writes nothing: Report.Changes lists what a restore would
	// create, update and delete (rsync's -n -i).
	DryRun bool
	// ItemizeChanges fills Report.Changes on a real run too (rsync's
	// --itemize-changes).
	ItemizeChanges bool

	// Faults and checks (--timeout, --verify). The connect timeout
	// (--contimeout) is SSH.Timeout.

	// IdleTimeout is rsync's --timeout: when no data moves on a stream,
	// either way, for this long while the restore waits on the remote
	// side, the run fails with an error wrapping transfer.ErrTimeout
	// (exit code 30). 0 means none, as in rsync: a stalled peer is then
	// only noticed by SSH keepalives (the built-in client's, or -e ssh's
	// ServerAliveInterval), which a stopped agent still answers.
	IdleTimeout time.Duration
	// Verify asks for end-to-end checksums (--verify): the sender hashes
	// (xxh3-128) the bytes it reads from disk, the receiver the bytes it
	// gets, and a file whose hashes differ is not put in place
	// (transfer.ErrVerifyFailed, a per-file error). Raw method over a
	// network (pull and push); tar carries no checksums (usage error),
	// rsync has its own whole-file checksum, and a local restore has no
	// stream in between to check.
	Verify bool
}

func (o *Options) applyDefaults() {
	if o.Method == "" {
		o.Method = MethodAuto
	}
	if o.Jobs <= 0 {
		o.Jobs = 4 // enough streams to fill a gigabit link over SSH on 2 cores
	}
	if o.ReadBufferBytes <= 0 {
		o.ReadBufferBytes = 256 << 10 // one chunk per read
	}
	o.Writer.applyDefaults()
}

// ErrUsage marks bad arguments (exit code 1).
var ErrUsage = errors.New("usage")

// Run restores Src into Dst. It returns the report and, separately, an error
// that ended the run early (connection, protocol, cancellation); per-file
// failures are in Report.Errors and do not stop the run. Run is safe to call
// concurrently for different destinations.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.applyDefaults()
	o.lim = newLimiter(o.BwLimitBytes)
	o.ob = newObserver(&o)
	start := time.Now()
	rep := &Report{Method: string(o.Method), Compression: o.Compression.String(), Jobs: o.Jobs}
	src, err := transfer.ParseLocation(o.Src)
	if err != nil {
		return rep, fmt.Errorf("%w: SRC: %w", ErrUsage, err)
	}
	dst, err := transfer.ParseLocation(o.Dst)
	if err != nil {
		return rep, fmt.Errorf("%w: DST: %w", ErrUsage, err)
	}
	if src.Remote() && dst.Remote() {
		return rep, fmt.Errorf("%w: SRC and DST are both remote; one side must be local", ErrUsage)
	}
	if err := o.sameHost(src); err != nil {
		return rep, err
	}
	// "-" or a tar file as SRC is read as a tar archive, whatever the method.
	if isTarInput(o, src) {
		if o.selective() {
			return rep, fmt.Errorf("%w: SRC %s is a tar archive: %s cannot be used with one", ErrUsage, o.Src, o.selectionFlags())
		}
		err = runTarInput(ctx, o, src, dst, rep)
		rep.Seconds = time.Since(start).Seconds()
		return rep, err
	}
	run, ok := methodRuns[o.Method]
	if !ok {
		return rep, fmt.Errorf("%w: unknown method %q", ErrUsage, o.Method)
	}
	if o.Verify && (o.Method == MethodTar || o.Method == MethodRsync) {
		return rep, fmt.Errorf("%w: --verify is for the raw method (tar carries no checksums; rsync checks its own whole-file checksums)", ErrUsage)
	}
	err = run(ctx, o, src, dst, rep)
	rep.Seconds = time.Since(start).Seconds()
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		// The streams were torn down under the workers: what they saw
		// (a closed stream) is a consequence, not the cause.
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return rep, err
}

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
		w, err := NewWriter(dst.Path, o.writerOptions(sel))
		if err != nil {
			ls.Close()
			return nil, err
		}
		return &localSession{src: ls, w: w, jobs: o.Jobs, ob: o.ob}, nil
	}
}

// dialer returns how to reach loc: o.Dialer, the -e command, or the
// built-in SSH client.
func dialer(o Options, loc transfer.Location) (transfer.Dialer, error) {
	var d transfer.Dialer
	var err error
	switch {
	case o.Dialer != nil:
		d = o.Dialer
	case o.SSH.Rsh != "":
		d, err = transfer.NewRshDialer(loc, o.SSH)
	default:
		d, err = transfer.NewSSHDialer(loc, o.SSH)
	}
	if err != nil {
		return nil, err
	}
	return limitDialer(d, o.lim), nil
}

// remotePool opens the streams to loc with hello h.
func remotePool(ctx context.Context, o Options, loc transfer.Location, h transfer.Hello) (*pool, error) {
	d, err := dialer(o, loc)
	if err != nil {
		return nil, err
	}
	h.Version = o.Version
	h.Compression = o.Compression.String()
	h.ReadBufferBytes = o.ReadBufferBytes
	h.Verify = o.Verify
	return openPool(ctx, d, h, o.Jobs, o.timeouts())
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

// tracker books the outcome of each batch into the report and commits a
// split file once all its blocks have arrived. A delta item that could not
// be applied (transfer.ErrDeltaFailed) is not booked: it is kept for a
// retry, whole. Safe for concurrent use by the streams.
type tracker struct {
	ctx      context.Context
	s        session
	rep      *Report
	ob       *observer
	mu       sync.Mutex
	splits   map[string]*splitState
	deferred []*treewalk.Entry
	retry    []*batch
}

type splitState struct {
	left   int  // blocks not yet done
	failed bool // a block failed: the file is reported once and not committed
	delta  bool // a block arrived as a delta
	// bytes is the payload of the blocks written so far; it goes into
	// the report's Bytes when the file is committed, not before.
	bytes int64
	// gone is the index in the report's Errors of the file's error when
	// that is only transfer.ErrSplitGone (a consequence of another
	// block's failure, whose reply may come first): the cause, when it
	// comes, takes its place. -1 otherwise.
	gone int
}

// takeRetries returns the batches to send again whole, and forgets them.
func (t *tracker) takeRetries() []*batch {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.retry
	t.retry = nil
	return r
}

func newTracker(ctx context.Context, s session, rep *Report, batches []*batch) *tracker {
	t := &tracker{ctx: ctx, s: s, rep: rep, splits: map[string]*splitState{}}
	for _, b := range batches {
		for _, it := range b.items {
			if it.Split {
				st := t.splits[it.Entry.Path]
				if st == nil {
					st = &splitState{gone: -1}
					t.splits[it.Entry.Path] = st
				}
				st.left++
			}
		}
	}
	return t
}

// done is called by a stream with a batch's per-item errors.
func (t *tracker) done(b *batch, errs []error) {
	var commits []*treewalk.Entry
	var files int
	var bytes int64
	defer func() { t.ob.add(files, bytes) }()
	t.mu.Lock()
	for j := range b.items {
		it, err := &b.items[j], errs[j]
		if err != nil && t.ctx.Err() != nil {
			continue // cancelled: not a per-file error
		}
		if err != nil && it.Delta != nil && errors.Is(err, transfer.ErrDeltaFailed) {
			whole := *it
			whole.Delta = nil
			t.retry = append(t.retry, &batch{items: []transfer.Item{whole}, bytes: whole.Length})
			continue
		}
		if !it.Split {
			if err != nil {
				t.rep.addError(it.Entry.Path, err)
			} else {
				t.rep.Files++
				t.rep.Bytes += it.Length
				files++
				action := ActionWrite
				if it.Delta != nil {
					t.rep.DeltaFiles++
					action = ActionDelta
					bytes += it.Length
				}
				t.ob.file(it.Entry.Path, it.Entry.Size, action)
			}
			continue
		}
		st := t.splits[it.Entry.Path]
		st.left--
		switch {
		case err == nil:
		case !st.failed:
			st.failed = true
			if errors.Is(err, transfer.ErrSplitGone) {
				st.gone = len(t.rep.Errors)
			}
			t.rep.addError(it.Entry.Path, err)
		case st.gone >= 0 && !errors.Is(err, transfer.ErrSplitGone):
			t.rep.Errors[st.gone].Error = err.Error()
			st.gone = -1
		}
		if err == nil {
			st.bytes += it.Length
			if it.Delta != nil {
				bytes += it.Length
			}
			st.delta = st.delta || it.Delta != nil
		}
		if st.left == 0 && !st.failed {
			if t.s.deferCommits() {
				t.deferred = append(t.deferred, &it.Entry)
			} else {
				commits = append(commits, &it.Entry)
			}
		}
	}
	t.mu.Unlock()
	for _, e := range commits {
		t.commit(e)
	}
}

func (t *tracker) commit(e *treewalk.Entry) error {
	err := t.s.commit(t.ctx, e)
	var fe *fatalError
	if errors.As(err, &fe) {
		return fe.err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.rep.addError(e.Path, err)
	} else {
		st := t.splits[e.Path]
		t.rep.Files++
		t.rep.Bytes += st.bytes
		action := ActionWrite
		if st.delta {
			t.rep.DeltaFiles++
			action = ActionDelta
		}
		t.ob.add(1, 0)
		t.ob.file(e.Path, e.Size, action)
	}
	return nil
}

// commitDeferred commits the split files whose commits had to wait for the
// streams to be idle.
func (t *tracker) commitDeferred(ctx context.Context) error {
	for _, e := range t.deferred {
		if err := t.commit(e); err != nil {
			return err
		}
	}
	return nil
}

// timeouts are the streams' connection setup (--contimeout) and idle
// (--timeout) timeouts.
func (o Options) timeouts() transfer.Timeouts {
	return transfer.Timeouts{Connect: o.SSH.Timeout, Idle: o.IdleTimeout}
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
