package restore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pkg/sftp"
	"golang.org/x/sync/errgroup"

	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
	"github.com/restoresync/restoresync/treewalk"
)

// MethodSFTP: pull from any SFTP server (SFTP version 3, as OpenSSH's
// sftp-server and internal-sftp speak it, and serve --listen), nothing
// else needed on it: an SFTP-only account (ForceCommand internal-sftp,
// ChrootDirectory) is enough. The tree is walked with READDIR over --jobs
// SSH connections (sftp_list.go), the quick check runs on the receiver
// (size, and mtime to the second), and the files DST needs are read with
// many files in flight per connection, large ones with concurrent read
// requests, and written through the safe writer as the raw method writes
// them. SFTP version 3 carries less than a file list: owners as numeric
// ids only (so --numeric-ids semantics, with --usermap, --groupmap,
// --chown and --account applied to them), mtimes to the second, symlinks
// through READLINK, no hardlinks (each name arrives as a file), no
// extended attributes or ACLs (DST's are kept), no device numbers, no
// deltas. Pull only.
const MethodSFTP Method = "sftp"

func init() { registerMethod(MethodSFTP, runSFTP) }

const (
	// sftpSubsystem is the SSH subsystem the method's streams open.
	sftpSubsystem = "sftp"
	// sftpFilesPerConn is how many files are in flight on one SSH
	// connection: enough to hide the round trips of the small files'
	// open, read and close (three each) behind one another on a real
	// link (16 files / 3 round trips of 20 ms: 260 files a second per
	// connection).
	sftpFilesPerConn = 16
	// sftpBigPerConn is how many of a connection's files in flight may be
	// large (over sftpBigBytes): each keeps up to 64 read requests of 32
	// KiB outstanding (2 MiB of buffers), and two already fill the SSH
	// channel's 2 MiB window.
	sftpBigPerConn = 2
	sftpBigBytes   = 1 << 20
	// sftpWriteBufferBytes caps the safe writer's buffer per file in
	// flight (--jobs × sftpFilesPerConn of them): reads arrive 32 KiB at
	// a time, and a small file fits whole.
	sftpWriteBufferBytes = 128 << 10
	// sftpDirsPerConn is how many READDIRs the walk keeps in flight on
	// one connection.
	sftpDirsPerConn = 4
	// sftpMaxPacket is the read size of one SFTP request, the 32 KiB
	// that every SFTP v3 server must accept (pkg/sftp's default).
	sftpMaxPacket = 32 << 10
)

// runSFTP is the sftp method.
func runSFTP(ctx context.Context, o Options, src, dst transport.Location, rep *Report) error {
	rep.Compression = "none" // SFTP has no compression of its own
	switch {
	case dst.Remote():
		return fmt.Errorf("%w: --method sftp pulls only (an SFTP server's files into a local DST); use --method raw to push", ErrUsage)
	case !src.Remote():
		return fmt.Errorf("%w: --method sftp needs a remote SRC ([user@]host:PATH); use --method raw for a local copy", ErrUsage)
	case len(o.MoreSrc) > 0 || o.Relative || o.FilesFrom != nil:
		return fmt.Errorf("%w: --method sftp restores one SRC: several SRCs, --relative and --files-from need --method raw", ErrUsage)
	case o.Verify:
		return fmt.Errorf("%w: --verify is for the raw method (SFTP carries no checksums)", ErrUsage)
	case o.Compression.Codec != transfer.CodecAuto && o.Compression.Codec != transfer.CodecNone:
		return fmt.Errorf("%w: --compress %s is for the raw method (SFTP has no compression of its own): use --compress auto or none", ErrUsage, o.Compression)
	}
	sel, err := planSelection(o, src)
	if err != nil {
		return err
	}
	filter, err := treewalk.ParseFilter(sel.sel.Filters)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	d, err := dialer(o, src)
	if err != nil {
		return err
	}
	sd, ok := d.(transport.SubsystemDialer)
	if !ok {
		return fmt.Errorf("%w: --method sftp needs an SSH connection (built-in or -e)", ErrUsage)
	}
	// Dial first: a restore that cannot start must not create DST.
	conns, err := dialSFTP(ctx, o, sd.WithSubsystem(sftpSubsystem))
	if err != nil {
		return err
	}
	defer conns.close()
	stop := context.AfterFunc(ctx, conns.close) // unblocks every request
	defer stop()
	rep.Jobs = len(conns.c)
	if o.Warnf != nil {
		if conns.dialErr != nil {
			o.Warnf("not all %d SFTP connections could be opened: %v", o.Jobs, conns.dialErr)
		}
		o.Warnf("%s", sftpLosses(o))
	}
	list, err := sftpList(ctx, conns, src.Path, filter)
	if err != nil {
		return conns.fatal(ctx, fmt.Errorf("file list: %w", err))
	}
	wo := o.writerOptions(sel)
	wo.Owner.NumericIDs = true          // SFTP v3 has no names
	wo.NoXattrs, wo.NoACLs = true, true // nor xattrs and ACLs: DST's are kept
	wo.MtimeSeconds = true              // nor fractions of a second
	wo.BlockSizeBytes = 1 << 62         // a file is read on one connection, concurrently
	wo.WriteBufferBytes = min(wo.WriteBufferBytes, sftpWriteBufferBytes)
	w, err := dest.NewWriter(dst.Path, wo) // DST is created here
	if err != nil {
		return err
	}
	defer w.Close()
	err = runSFTPList(ctx, o, conns, w, list, rep)
	rep.WireBytes = conns.wireBytes()
	return conns.fatal(ctx, err)
}

// sftpLosses is the warning a run starts with: what SFTP version 3 cannot
// carry of what the options would otherwise restore.
func sftpLosses(o Options) string {
	var carries []string
	if !o.Writer.Owner.NumericIDs && o.Writer.Owner.Chown == "" {
		carries = append(carries, "owners as numeric ids only (--numeric-ids semantics)")
	}
	carries = append(carries, "mtimes to the second", "no hardlinks (each name is restored as a file of its own)")
	if !o.Writer.NoXattrs || !o.Writer.NoACLs {
		carries = append(carries, "no extended attributes or ACLs (DST's are kept)")
	}
	carries = append(carries, "no deltas")
	return "--method sftp: SFTP version 3 carries " + strings.Join(carries, ", ")
}

// runSFTPList restores list into w: itemize (--dry-run, -i), plan (the
// quick check to the second), delete, the files' data over conns, then
// Finish (symlinks, directory metadata), as runSession does for raw.
// Per-file failures go into rep; the error ends the run.
func runSFTPList(ctx context.Context, o Options, conns *sftpConns, w *dest.Writer, list treewalk.List, rep *Report) error {
	entries := list.Entries
	rep.addList(list)
	del := deleteAllowed(o, list)
	if done, err := itemizeList(ctx, o, rep, list, del, w.Itemize); done || err != nil {
		return err
	}
	plan, err := w.Plan(ctx, entries)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if del {
		deleted, errs, err := w.Delete(ctx, entries)
		if err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		rep.Deleted = len(deleted)
		for _, pe := range errs {
			rep.addError(pe.Path, pe.Err)
		}
	}
	for _, pe := range plan.Errors {
		rep.addError(pe.Path, pe.Err)
	}
	dataFiles := 0
	for i := range entries {
		if entries[i].HasData() {
			dataFiles++
		}
	}
	rep.Skipped = dataFiles - len(plan.Need) - len(plan.Errors)
	var needBytes int64
	for _, i := range plan.Need {
		needBytes += entries[i].Size
	}
	o.ob.wire(conns.wireBytes)
	o.ob.start(len(plan.Need), needBytes)
	if err := conns.copyFiles(ctx, o.ob, w, entries, plan.Need, rep); err != nil {
		return err
	}
	errs, err := w.Finish(ctx, entries)
	if err != nil {
		return fmt.Errorf("finish: %w", err)
	}
	for _, pe := range errs {
		rep.addError(pe.Path, pe.Err)
	}
	return ctx.Err()
}

// sftpConns are the SFTP clients of one restore, one per SSH connection.
// Safe for concurrent use.
type sftpConns struct {
	c       []*sftpConn
	root    string // the server directory the file list's paths are beneath (sftpList)
	dialErr error  // why fewer than --jobs connections opened, if so
	once    sync.Once
}

// sftpConn is one SSH connection's SFTP client and the bytes it moved.
type sftpConn struct {
	s          transport.Stream
	c          *sftp.Client
	sent, recv atomic.Int64
	// busy counts the calls waiting on the server; idle (--timeout) fires
	// only while it is not 0, so a connection left idle while DST is
	// planned or finished is not timed out.
	busy atomic.Int32
	idle *transport.IdleWatch
	big  chan struct{} // a slot per large file in flight (sftpBigPerConn)
	// lost is why the connection ended (pkg/sftp's Wait), once it did.
	lost atomic.Pointer[error]
}

// connLost is err, a request's failure on a connection that ended
// (errConnLost), with why the connection ended and the remote's stderr.
func (c *sftpConn) connLost(err error) error {
	if p := c.lost.Load(); p != nil && *p != nil && !strings.Contains(err.Error(), (*p).Error()) {
		err = fmt.Errorf("%w (%v)", err, *p)
	}
	return transport.WithStderr(c.s, err)
}

// wait marks a call to the server until the returned function runs.
func (c *sftpConn) wait() func() {
	c.busy.Add(1)
	return func() { c.busy.Add(-1) }
}

// timedOut is the --timeout error once the connection's idle watch
// fired, else nil.
func (c *sftpConn) timedOut() error { return c.idle.Err() }

// dialSFTP opens o.Jobs SFTP sessions at once through d (the "sftp"
// subsystem). The first one that fails to open, when none opened, is the
// error (wrapping transport.ErrConnect, or transfer.ErrProtocol for a
// server that does not speak SFTP); fewer than asked for is dialErr.
func dialSFTP(ctx context.Context, o Options, d transport.Dialer) (*sftpConns, error) {
	conns := make([]*sftpConn, o.Jobs)
	errs := make([]error, o.Jobs)
	var wg sync.WaitGroup
	for i := range o.Jobs {
		wg.Go(func() { conns[i], errs[i] = openSFTP(ctx, o, d) })
	}
	wg.Wait()
	cs := &sftpConns{}
	for i, c := range conns {
		if c != nil {
			cs.c = append(cs.c, c)
		} else if cs.dialErr == nil {
			cs.dialErr = errs[i]
		}
	}
	if len(cs.c) == 0 {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, cs.dialErr
	}
	return cs, nil
}

// openSFTP opens one SFTP session: the stream (bounded by --contimeout
// until the server's version packet, --timeout after), then SFTP's init.
func openSFTP(ctx context.Context, o Options, d transport.Dialer) (*sftpConn, error) {
	s, err := d.Dial(ctx)
	if err != nil {
		return nil, err
	}
	s = transport.FirstByteTimeout(s, o.SSH.Timeout)
	sc := &sftpConn{s: s, big: make(chan struct{}, sftpBigPerConn)}
	if o.IdleTimeout > 0 {
		sc.idle = transport.StartIdleWatch(o.IdleTimeout, func() int64 { return sc.sent.Load() + sc.recv.Load() },
			func() bool { return sc.busy.Load() > 0 }, func() { s.Close() })
	}
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	c, err := sftp.NewClientPipe(transport.CountingReader(s, &sc.recv), writeCloser{transport.CountingWriter(s, &sc.sent), s},
		sftp.UseConcurrentReads(true), sftp.UseFstat(true), sftp.MaxPacket(sftpMaxPacket))
	if err != nil {
		s.Close()
		sc.idle.Stop()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var te interface{ Timeout() bool }
		if errors.As(err, &te) || errors.Is(err, transport.ErrConnect) || errors.Is(err, transport.ErrTimeout) {
			return nil, transport.WithStderr(s, err)
		}
		return nil, transport.WithStderr(s, fmt.Errorf("%w: the remote does not speak SFTP on the %q subsystem: %w", transfer.ErrProtocol, sftpSubsystem, err))
	}
	sc.c = c
	go func() {
		err := c.Wait()
		sc.lost.Store(&err)
	}()
	return sc, nil
}

// writeCloser is a stream's writing side for pkg/sftp: closing it closes
// the stream.
type writeCloser struct {
	io.Writer
	s transport.Stream
}

func (w writeCloser) Close() error { return w.s.Close() }

// close closes every connection; safe to call more than once and from any
// goroutine.
func (cs *sftpConns) close() {
	cs.once.Do(func() {
		for _, c := range cs.c {
			c.idle.Stop()
			c.c.Close()
			c.s.Close()
		}
	})
}

func (cs *sftpConns) wireBytes() int64 {
	var n int64
	for _, c := range cs.c {
		n += c.sent.Load() + c.recv.Load()
	}
	return n
}

// fatal is err as Run returns it: ctx's error once the run was cancelled
// (the connections were closed under the requests), an idle timeout as
// such, else err.
func (cs *sftpConns) fatal(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	for _, c := range cs.c {
		if terr := c.timedOut(); terr != nil {
			return terr
		}
	}
	return err
}

// errConnLost marks the failure of an SFTP connection (not of one file):
// it ends the run, as a broken stream of the raw method does (exit 12; a
// rerun completes the restore).
var errConnLost = fmt.Errorf("%w: SFTP connection lost", transport.ErrRemoteExited)

// remoteErr sorts an error of an SFTP request: a status the server sent
// (no such file, permission denied, a failure) is the file's; anything
// else (the connection closed, a broken packet) wraps errConnLost.
func remoteErr(err error) error {
	var se *sftp.StatusError
	if err == nil || errors.As(err, &se) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return err
	}
	return fmt.Errorf("%w: %w", errConnLost, err)
}

// copyFiles reads the files need (indices into entries) over the
// connections, sftpFilesPerConn at a time on each, largest first, and
// writes each through w. Per-file failures go into rep; a connection's
// failure ends the run.
func (cs *sftpConns) copyFiles(ctx context.Context, ob *observer, w *dest.Writer, entries []treewalk.Entry, need []int, rep *Report) error {
	order := slices.Clone(need)
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(entries[b].Size, entries[a].Size) })
	work := make(chan int)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(work)
		for _, i := range order {
			select {
			case work <- i:
			case <-gctx.Done():
				return nil
			}
		}
		return nil
	})
	var mu sync.Mutex // rep
	for _, c := range cs.c {
		ob.streamUp()
		var up atomic.Int32
		up.Store(sftpFilesPerConn)
		for range sftpFilesPerConn {
			g.Go(func() error {
				defer func() {
					if up.Add(-1) == 0 {
						ob.streamDown()
					}
				}()
				for i := range work {
					e := &entries[i]
					err := c.copyFile(gctx, ob, w, e, sftpJoin(cs.root, e.Path))
					if errors.Is(err, errConnLost) {
						return c.connLost(err)
					}
					if gctx.Err() != nil {
						return gctx.Err()
					}
					mu.Lock()
					if err != nil {
						rep.addError(e.Path, err)
					} else {
						rep.Files++
						rep.Bytes += e.Size
					}
					mu.Unlock()
					if err == nil {
						ob.add(1, 0)
						ob.file(e.Path, e.Size, ActionWrite)
					}
				}
				return nil
			})
		}
	}
	return g.Wait()
}

// copyFile reads e's file, remote on the server, and writes it through w.
func (c *sftpConn) copyFile(ctx context.Context, ob *observer, w *dest.Writer, e *treewalk.Entry, remote string) error {
	if e.Size > sftpBigBytes {
		select {
		case c.big <- struct{}{}:
			defer func() { <-c.big }()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer c.wait()()
	f, err := c.c.Open(remote)
	if err != nil {
		return remoteErr(err)
	}
	r := &sftpReader{f: f, size: e.Size, ob: ob}
	var data io.Reader = r
	if e.Size > sftpMaxPacket {
		// pkg/sftp's WriteTo: up to 64 concurrent 32 KiB reads.
		data = sftpBigReader{r}
	}
	err = w.WriteItem(ctx, &transfer.Item{Entry: *e, Length: e.Size}, data)
	cerr := f.Close()
	if r.err != nil {
		return r.err // the connection's failure, not the write's
	}
	if err == nil && cerr != nil {
		err = remoteErr(cerr)
	}
	return err
}

// sftpReader reads one file of a known size: each request asks for at
// most one byte more than the size listed, so that a small file takes one
// read (its end comes with the data) and a file that grew since the walk
// is noticed (the writer then fails it with transfer.ErrSizeMismatch).
type sftpReader struct {
	f    *sftp.File
	size int64
	off  int64
	eof  bool
	ob   *observer
	err  error // a connection failure met by a read
}

func (r *sftpReader) Read(p []byte) (int, error) {
	if r.eof {
		return 0, io.EOF
	}
	want := int64(len(p))
	if rest := r.size - r.off + 1; rest > 0 && rest < want {
		want = rest
	}
	want = min(want, sftpMaxPacket)
	n, err := r.f.ReadAt(p[:want], r.off)
	r.off += int64(n)
	if n > 0 {
		r.ob.add(0, int64(n))
	}
	if err == io.EOF {
		r.eof = true
		if n > 0 {
			err = nil
		}
	} else if err != nil {
		err = remoteErr(err)
		if errors.Is(err, errConnLost) {
			r.err = err
		}
	}
	return n, err
}

// sftpBigReader reads a large file with pkg/sftp's concurrent reads (its
// WriteTo), which io.Copy in the safe writer picks up.
type sftpBigReader struct{ r *sftpReader }

func (b sftpBigReader) Read(p []byte) (int, error) { return b.r.Read(p) }

// WriteTo implements io.WriterTo.
func (b sftpBigReader) WriteTo(w io.Writer) (int64, error) {
	n, err := b.r.f.WriteTo(progressWriterTo{w, b.r.ob})
	if err != nil {
		err = remoteErr(err)
		if errors.Is(err, errConnLost) {
			b.r.err = err
		}
	}
	return n, err
}

// progressWriterTo counts the bytes written through it for the display.
type progressWriterTo struct {
	w  io.Writer
	ob *observer
}

func (p progressWriterTo) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if n > 0 {
		p.ob.add(0, int64(n))
	}
	return n, err
}
