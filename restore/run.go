package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
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
	// Jobs is the number of parallel streams (SSH connections); 0 means
	// auto: a raw restore over a network starts with one stream and opens
	// more while throughput grows and the work left warrants them, up to
	// MaxJobs, and stops when the remote refuses one (jobs.go); the other
	// methods, and a local copy, run MaxJobs.
	Jobs int
	// MaxJobs bounds Jobs auto; 0 means 4, enough streams to fill a
	// gigabit link over SSH on 2 cores.
	MaxJobs int
	// Compression is the codec for every stream; the zero value is none.
	// Callers wanting the default use transfer.DefaultCompression (auto).
	Compression transfer.Compression
	// SkipCompress, when not nil, replaces the --skip-compress list (the
	// suffixes auto sends uncompressed, rsync's form:
	// transfer.ParseSkipList); nil means transfer.DefaultSkipCompress.
	SkipCompress *string
	// Writer configures the receiving side (owners, modes, block size,
	// write buffer).
	Writer dest.WriterOptions
	// ReadBufferBytes is the size of each stream's disk read buffer on the
	// sending side, local or remote; 0 means 256 KiB.
	ReadBufferBytes int
	// SSH says how to reach the remote side.
	SSH transport.SSHOptions
	// Version is announced to the remote agent.
	Version string
	// Dialer, when not nil, opens the streams to the remote side instead
	// of SSH (tests and benchmarks use transfer.PipeDialer).
	Dialer transport.Dialer
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
	lim *transport.Limiter
	ob  *observer
	// jobsAuto is Jobs 0: Jobs holds MaxJobs, the pool opens what pays.
	jobsAuto bool

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
	// side, the run fails with an error wrapping transport.ErrTimeout
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
	if o.MaxJobs <= 0 {
		o.MaxJobs = 4 // enough streams to fill a gigabit link over SSH on 2 cores
	}
	if o.Jobs <= 0 {
		o.jobsAuto, o.Jobs = true, o.MaxJobs // the stream slots; the pool opens what pays
	}
	if o.ReadBufferBytes <= 0 {
		// One chunk per read, a frame's worth. Measured (README,
		// Tuning): 28.6 MiB/s against 20.6 with 64 KiB on the raw
		// method; a 2 MiB read buffer for the tar method (which the
		// Vitess seed found 18% faster than 32 KiB) was no faster than
		// 256 KiB here.
		o.ReadBufferBytes = 256 << 10
	}
	o.Writer.ApplyDefaults()
}

// Run restores Src into Dst. It returns the report and, separately, an error
// that ended the run early (connection, protocol, cancellation); per-file
// failures are in Report.Errors and do not stop the run. Run is safe to call
// concurrently for different destinations.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.applyDefaults()
	o.lim = transport.NewLimiter(o.BwLimitBytes)
	o.ob = newObserver(&o)
	start := time.Now()
	rep := &Report{Method: string(o.Method), Compression: o.Compression.String(), Jobs: o.Jobs}
	src, err := transport.ParseLocation(o.Src)
	if err != nil {
		return rep, fmt.Errorf("%w: SRC: %w", ErrUsage, err)
	}
	dst, err := transport.ParseLocation(o.Dst)
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

// dialer returns how to reach loc: o.Dialer, the -e command, or the
// built-in SSH client.
func dialer(o Options, loc transport.Location) (transport.Dialer, error) {
	var d transport.Dialer
	var err error
	switch {
	case o.Dialer != nil:
		d = o.Dialer
	case o.SSH.Rsh != "":
		d, err = transport.NewRshDialer(loc, o.SSH)
	default:
		d, err = transport.NewSSHDialer(loc, o.SSH)
	}
	if err != nil {
		return nil, err
	}
	return transport.LimitDialer(d, o.lim), nil
}

// timeouts are the streams' connection setup (--contimeout) and idle
// (--timeout) timeouts.
func (o Options) timeouts() transfer.Timeouts {
	return transfer.Timeouts{Connect: o.SSH.Timeout, Idle: o.IdleTimeout}
}
