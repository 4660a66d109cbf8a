package restore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gokrazy/rsync/rsyncclient"
	"golang.org/x/sync/errgroup"

	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
	"github.com/restoresync/restoresync/treewalk"
)

// MethodRsync: the rsync protocol (version 27, as gokrazy/rsync v0.3.6
// speaks it) with gokrazy/rsync's receiver here and a stock rsync sender on
// the remote (the system "rsync --server --sender", run directly over SSH
// when the remote has no agent, or by our agent), so that files present in
// DST in an older version cross the wire as rsync deltas. restoresync then
// completes, from the source's file list, what protocol 27 and gokrazy do
// not: owners (--chown, --usermap, --groupmap, --numeric-ids), setuid and
// setgid bits, --chmod, nanosecond mtimes, directory metadata, symlinks,
// special files and hardlinks. Pull only (see runRsync for why not push).
const MethodRsync Method = "rsync"

func init() { registerMethod(MethodRsync, runRsync) }

// rsyncArgs are the options of the gokrazy client (and so of the remote
// sender): recursive, times, perms. Not -l, -D, -o, -g: symlinks, special
// files and owners are made by the safe writer afterwards, so that gokrazy
// never creates a symlink and never gives a file another account's uid
// (with -o it would chown to the sender's numeric id, unmapped, for a moment
// readable by whoever has that id here). gokrazy already drops setuid and
// setgid bits (it applies only the 0777 bits). Not -H: gokrazy's protocol
// 27 file list reader does not parse hardlink data.
var rsyncArgs = []string{"-rtp"}

// runRsync is the rsync method.
func runRsync(ctx context.Context, o Options, src, dst transport.Location, rep *Report) error {
	rep.Compression = "none" // rsync's own protocol, uncompressed here
	rep.Jobs = 1
	switch {
	case dst.Remote():
		return fmt.Errorf("%w: --method rsync cannot push: gokrazy/rsync v0.3.6 sends a new file's data as literal tokens of up to 256 KiB, "+
			"which rsync receivers before 3.5 reject above 32 KiB (3.2.7: \"invalid uncompressed token length 262144\" for a 1 MB file; "+
			"3.4.3 and 3.4.4 reported likewise), and without an agent there the remote tree could not be completed "+
			"(hardlinks, owners, nanosecond mtimes); use --method raw to push", ErrUsage)
	case !src.Remote():
		return fmt.Errorf("%w: --method rsync needs a remote SRC; use --method raw for a local copy", ErrUsage)
	case o.selective():
		return fmt.Errorf("%w: --method rsync does not support %s: use --method raw (or auto)", ErrUsage, o.selectionFlags())
	}
	d, err := dialer(o, src)
	if err != nil {
		return err
	}
	pull, err := openRsyncPull(ctx, o, d, src)
	if err != nil {
		return err
	}
	defer pull.close()
	wo := o.Writer
	if !pull.agent && (!wo.NoXattrs || !wo.NoACLs) {
		// find cannot list them: leave DST's alone rather than strip them.
		if o.Warnf != nil {
			o.Warnf("agent-less --method rsync cannot list extended attributes and ACLs (GNU find does not print them): " +
				"they are not restored, and DST's are kept (--no-xattrs --no-acls silence this; the agent or --method tar carries them)")
		}
		wo.NoXattrs, wo.NoACLs = true, true
	}
	w, err := dest.NewWriter(dst.Path, wo)
	if err != nil {
		return err
	}
	defer w.Close()
	err = pull.run(ctx, w, dst.Path, rep)
	rep.WireBytes = pull.wireBytes()
	return err
}

// rsyncPull is a pull with the rsync method: the source's file list and an
// rsync stream to a remote sender.
type rsyncPull struct {
	list     treewalk.List
	listWire int64 // bytes the listing took on the wire
	stream   *transfer.RsyncStream
	agent    bool
	idle     time.Duration                    // --timeout, for the rsync run (see run)
	warnf    func(format string, args ...any) // Options.Warnf; nil: none
	// openSender opens a raw sender stream to the agent, for fetchHeld;
	// nil without the agent.
	openSender func(context.Context) (*transfer.Conn, error)
}

// openRsyncPull gets the file list and opens the rsync stream, both at
// once: with the agent, the list from a raw sender stream and the rsync
// protocol from a RoleRsyncSender stream; agent-less (--remote-path none),
// the list from the remote's GNU find and the protocol from the remote's
// "rsync --server --sender". Nothing is written before both succeed.
func openRsyncPull(ctx context.Context, o Options, d transport.Dialer, src transport.Location) (*rsyncPull, error) {
	p := &rsyncPull{agent: o.SSH.RemotePath != NoAgent, idle: o.IdleTimeout, warnf: o.Warnf}
	if p.agent {
		p.openSender = func(ctx context.Context) (*transfer.Conn, error) {
			_, c, err := transfer.Open(ctx, d, transfer.Hello{Role: transfer.RoleSender, Path: src.Path, Version: o.Version, Compression: o.Compression.String()}, o.timeouts())
			return c, err
		}
	}
	var cd transport.CommandDialer
	if !p.agent {
		var ok bool
		if cd, ok = d.(transport.CommandDialer); !ok {
			return nil, fmt.Errorf("%w: --remote-path none needs an SSH connection (built-in or -e)", ErrUsage)
		}
	}
	root := strings.TrimSuffix(src.Path, "/")
	if root == "" {
		root = "/"
	}
	client, err := rsyncclient.New(rsyncArgs, rsyncclient.DontRestrict())
	if err != nil {
		return nil, fmt.Errorf("rsync client: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		var err error
		if p.agent {
			p.list, p.listWire, err = agentList(gctx, o, d, src.Path)
		} else {
			p.list, p.listWire, err = findList(gctx, cd, root, o.SSH.Timeout, o.IdleTimeout)
		}
		if err != nil {
			return fmt.Errorf("file list: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		var err error
		if p.agent {
			p.stream, err = transfer.DialRsyncSender(gctx, d, transfer.Hello{Path: src.Path, RsyncArgs: rsyncArgs, Version: o.Version}, o.timeouts())
		} else {
			var quoted []string
			for _, a := range client.ServerCommandOptions(strings.TrimSuffix(root, "/") + "/") {
				quoted = append(quoted, transport.ShellQuote(a))
			}
			var s transport.Stream
			s, err = cd.WithCommand("rsync " + strings.Join(quoted, " ")).Dial(gctx)
			if err == nil {
				p.stream = transfer.NewRsyncStream(transport.FirstByteTimeout(s, o.SSH.Timeout))
			}
		}
		return err
	})
	if err := g.Wait(); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// agentList gets the file list from the agent, as the raw method does.
func agentList(ctx context.Context, o Options, d transport.Dialer, path string) (treewalk.List, int64, error) {
	_, c, err := transfer.Open(ctx, d, transfer.Hello{Role: transfer.RoleSender, Path: path, Version: o.Version, Compression: o.Compression.String()}, o.timeouts())
	if err != nil {
		return treewalk.List{}, 0, err
	}
	list, err := c.List(ctx)
	cerr := c.Close()
	sent, recv := c.WireBytes()
	if err == nil && cerr != nil && !errors.Is(cerr, context.Canceled) {
		err = cerr
	}
	return list, sent + recv, err
}

// findList gets the file list agent-less, from the remote's GNU find,
// which fails with the connection setup error when find sends nothing for
// connect (--contimeout; 0: 30 s), and with the idle timeout error when
// its output stops for idle (--timeout; 0: none).
func findList(ctx context.Context, cd transport.CommandDialer, root string, connect, idle time.Duration) (treewalk.List, int64, error) {
	return runFind(ctx, cd, findListCommand(root), connect, idle)
}

// runFind runs command, a find printing findFormat, on the remote and
// parses its output, with findList's timeouts and errors.
func runFind(ctx context.Context, cd transport.CommandDialer, command string, connect, idle time.Duration) (treewalk.List, int64, error) {
	s, err := cd.WithCommand(command).Dial(ctx)
	if err != nil {
		return treewalk.List{}, 0, err
	}
	s = transport.FirstByteTimeout(s, connect)
	rs := transfer.NewRsyncStream(s)
	defer rs.Close()
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	s.CloseWrite()
	rs.SetIdleTimeout(idle, nil)
	list, err := parseFindList(rs)
	_, recv := rs.WireBytes()
	if err != nil {
		if ctx.Err() != nil {
			return list, recv, ctx.Err()
		}
		if terr := rs.TimedOut(); terr != nil {
			return list, recv, fmt.Errorf("remote find: %w", terr)
		}
		if errors.Is(err, errFindOutput) {
			err = fmt.Errorf("%w: %w", transfer.ErrProtocol, err)
		}
		if msg := strings.TrimSpace(s.Stderr()); msg != "" {
			err = fmt.Errorf("%w; remote stderr: %s (the agent-less rsync method needs GNU find on the remote)", err, msg)
		}
	}
	return list, recv, err
}

// run transfers with gokrazy's receiver into dstPath, then completes the
// tree through w.
func (p *rsyncPull) run(ctx context.Context, w *dest.Writer, dstPath string, rep *Report) error {
	all := p.list.Entries
	rep.addList(p.list)
	// What gokrazy's receiver would end the run on is held back, one error
	// each (rsync_held.go).
	held := rsyncHeldByLength(all)
	clearErrs, err := w.ClearForRsync(ctx, withoutHeld(all, held))
	if err != nil {
		return err
	}
	for _, pe := range clearErrs {
		held[pe.Path] = pe.Err
	}
	entries := withoutHeld(all, held)
	need, bytes, err := w.RsyncQuickCheck(ctx, entries)
	if err != nil {
		return err
	}
	// The directories first, with their owners, so that an interrupted
	// transfer leaves none of them root's (gokrazy would make them). One
	// that cannot be made here fails in the transfer or in Finish, which
	// report it: its error here is not reported twice.
	if _, err := w.RsyncMakeDirs(ctx, entries); err != nil {
		return err
	}
	stderr := new(transport.TailBuffer)
	args := append(append([]string(nil), rsyncArgs...), rsyncExcludeArgs(all, held)...)
	log := &genrLog{tail: stderr}
	if p.idle > 0 {
		// gokrazy's generator then logs each entry it goes through: our
		// side's progress while the sender waits on it (see genrLog).
		args = append(args, "--debug=GENR")
		p.stream.SetIdleTimeout(p.idle, log.entries.Load)
	}
	client, err := rsyncclient.New(args, rsyncclient.DontRestrict(), rsyncclient.WithStderr(log))
	if err != nil {
		return fmt.Errorf("rsync client: %w", err)
	}
	conn := newSenderMessages(p.stream)
	// rsyncclient.Run ignores its context; closing its connection ends a
	// run (gokrazy closes it too, on its first error, so that neither its
	// generator nor its receiver is left blocked on the peer).
	stop := context.AfterFunc(ctx, func() { p.stream.Close() })
	_, err = client.Run(ctx, conn, []string{dstPath})
	stop()
	said := conn.Messages()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if terr := p.stream.TimedOut(); terr != nil {
			return terr
		}
		msg := strings.TrimSpace(stderr.String())
		if r := strings.TrimSpace(p.stream.Stderr()); r != "" {
			msg = strings.TrimSpace(msg + "; remote stderr: " + r)
		}
		if msg != "" {
			msg = " (" + msg + ")"
		}
		return fmt.Errorf("%w: rsync (protocol 27, gokrazy/rsync): %w%s%s", transfer.ErrProtocol, err, msg, messagesSuffix(said))
	}
	p.stream.CloseWrite()
	if p.warnf != nil {
		for _, m := range said {
			p.warnf("rsync sender: %s", m)
		}
	}
	fetched, fetchedBytes, err := fetchHeld(ctx, p.openSender, w, all, held)
	if err != nil {
		return err
	}
	for i := range all {
		if err := held[all[i].Path]; err != nil {
			rep.addError(all[i].Path, err)
		}
	}
	rep.Files, rep.Bytes = need+fetched, bytes+fetchedBytes
	dataFiles := 0
	for i := range entries {
		if entries[i].HasData() {
			dataFiles++
		}
	}
	rep.Skipped = dataFiles - need
	if fetched > 0 {
		entries = withoutHeld(all, held) // Finish links to them too
	}
	fixErrs, err := w.FixRsync(ctx, entries)
	if err != nil {
		return fmt.Errorf("complete the rsync transfer: %w", err)
	}
	failed := map[string]bool{}
	for _, pe := range fixErrs {
		rep.addError(pe.Path, pe.Err)
		failed[pe.Path] = true
	}
	finishErrs, err := w.Finish(ctx, entries)
	if err != nil {
		return fmt.Errorf("finish: %w", err)
	}
	for _, pe := range finishErrs {
		if !failed[pe.Path] {
			rep.addError(pe.Path, pe.Err)
		}
	}
	return ctx.Err()
}

func (p *rsyncPull) wireBytes() int64 {
	n := p.listWire
	if p.stream != nil {
		s, r := p.stream.WireBytes()
		n += s + r
	}
	return n
}

func (p *rsyncPull) close() {
	if p.stream != nil {
		p.stream.Close()
	}
}
