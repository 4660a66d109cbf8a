package transfer

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/restoresync/restoresync/transport"
)

// RsyncStream is a Stream that carries the rsync protocol (raw bytes, no
// frames) and counts the bytes that cross it in both directions. It is what
// an rsync client runs over: either a remote "rsync --server" started with
// CommandDialer.WithCommand (agent-less) or our agent after a
// RoleRsyncSender handshake (DialRsyncSender). Like a Stream it is used by
// one reader and one writer at a time; WireBytes and Close are safe from any
// goroutine. SetIdleTimeout gives it rsync's --timeout.
type RsyncStream struct {
	s          transport.Stream
	r          io.Reader // the reader that buffered past the handshake; nil: read s
	sent, recv atomic.Int64
	waiting    atomic.Int32         // Read and Write calls in progress
	idle       *transport.IdleWatch // nil: no idle timeout
}

// NewRsyncStream wraps s, which already carries the rsync protocol.
func NewRsyncStream(s transport.Stream) *RsyncStream { return &RsyncStream{s: s} }

// DialRsyncSender opens a stream to the agent with role RoleRsyncSender:
// h.Role is set here, h.Path and h.RsyncArgs must be set (RsyncArgs pass
// CheckRsyncArgs). The setup is bounded by t as Open bounds it (ErrConnect
// after t.Connect, ErrTimeout after a shorter t.Idle); the stream gets no
// idle timeout here (SetIdleTimeout). Errors are those of Dialer.Dial and
// Handshake: ErrConnect, ErrTimeout, ErrProtocol (not an agent, another
// protocol version, a refused option), *RemoteError (the agent refused the
// path), or ctx's error.
func DialRsyncSender(ctx context.Context, d transport.Dialer, h Hello, t Timeouts) (*RsyncStream, error) {
	if err := CheckRsyncArgs(h.RsyncArgs); err != nil {
		return nil, err
	}
	h.Role = RoleRsyncSender
	h.Proto = ProtocolVersion
	if h.Compression == "" {
		h.Compression = "none"
	}
	sctx, cancel, expired := setupContext(ctx, t)
	defer cancel()
	s, err := d.Dial(sctx)
	if err != nil {
		return nil, expired(err, transport.DialAwaiting(err))
	}
	rs := &RsyncStream{s: s}
	stop := context.AfterFunc(sctx, func() { s.Close() })
	defer stop()
	br := bufio.NewReaderSize(transport.CountingReader(s, &rs.recv), 64<<10)
	fail := func(err error) (*RsyncStream, error) {
		s.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, withStderr(s, expired(err, transport.HandshakeAwaiting(s)))
	}
	if err := writeHandshake(transport.CountingWriter(s, &rs.sent), h); err != nil {
		return fail(fmt.Errorf("handshake: %w", err))
	}
	var rep helloReply
	if err := readHandshake(br, &rep); err != nil {
		return fail(err)
	}
	if rep.Proto != ProtocolVersion {
		s.Close()
		return nil, fmt.Errorf("%w: the remote agent (restoresync %s) speaks protocol %d, this client (restoresync %s) speaks %d: install the same version on both hosts",
			ErrProtocol, rep.Version, rep.Proto, h.Version, ProtocolVersion)
	}
	if rep.Error != "" {
		s.Close()
		return nil, &RemoteError{Msg: rep.Error}
	}
	if !stop() {
		// The setup's limit passed just as it succeeded: the stream is closed.
		return fail(context.DeadlineExceeded)
	}
	// The counting happens below br; reads come out of it from now on.
	rs.r = br
	return rs, nil
}

// SetIdleTimeout gives the stream rsync's --timeout: when, for d, no byte
// moves on it while a Read or Write call on it is in progress (the rsync
// run waits on the peer) and local, if not nil, has not changed either, the
// stream is closed and its calls return an error wrapping ErrTimeout (see
// TimedOut). local counts the progress of our own side of the transfer
// (work that moves no byte, such as rsync's generator going through files
// already up to date, while the peer waits on us): the way rsync's
// generator counts itself as active while it sifts through files. Time in
// which no call is in progress (our own disk writes, the work before and
// after the run) never counts. d <= 0 means no timeout. Call it once,
// before the rsync run; local is called from the watch's goroutine and
// must be safe for that. Close ends the watch.
func (r *RsyncStream) SetIdleTimeout(d time.Duration, local func() int64) {
	if d <= 0 || r.idle != nil {
		return
	}
	r.idle = transport.StartIdleWatch(d,
		func() int64 {
			n := r.sent.Load() + r.recv.Load()
			if local != nil {
				n += local()
			}
			return n
		},
		func() bool { return r.waiting.Load() > 0 },
		func() { r.s.Close() })
}

// TimedOut returns the error wrapping ErrTimeout once the idle timeout
// (SetIdleTimeout) has closed the stream, else nil: callers whose rsync
// library does not wrap read errors use it to report the timeout rather
// than its consequence. Safe from any goroutine.
func (r *RsyncStream) TimedOut() error { return r.idle.Err() }

// Read reads the peer's rsync protocol bytes.
func (r *RsyncStream) Read(p []byte) (n int, err error) {
	r.waiting.Add(1)
	defer r.waiting.Add(-1)
	if r.r == nil {
		n, err = r.s.Read(p)
		r.recv.Add(int64(n))
	} else {
		n, err = r.r.Read(p)
	}
	return n, r.timeoutErr(err)
}

// Write sends rsync protocol bytes to the peer.
func (r *RsyncStream) Write(p []byte) (int, error) {
	r.waiting.Add(1)
	defer r.waiting.Add(-1)
	n, err := r.s.Write(p)
	r.sent.Add(int64(n))
	return n, r.timeoutErr(err)
}

// timeoutErr is err, or the idle timeout's error when that closed the stream.
func (r *RsyncStream) timeoutErr(err error) error {
	if err != nil {
		if terr := r.idle.Err(); terr != nil {
			return terr
		}
	}
	return err
}

// Close tears the stream down (Stream.Close) and ends its idle timeout;
// safe from any goroutine, so it is how a blocked rsync run is cancelled.
func (r *RsyncStream) Close() error {
	r.idle.Stop()
	return r.s.Close()
}

// CloseWrite signals the end of our side (Stream.CloseWrite).
func (r *RsyncStream) CloseWrite() error { return r.s.CloseWrite() }

// Stderr returns the tail of the remote command's stderr (Stream.Stderr).
func (r *RsyncStream) Stderr() string { return r.s.Stderr() }

// WireBytes returns the bytes sent and received so far, handshake included.
func (r *RsyncStream) WireBytes() (sent, recv int64) { return r.sent.Load(), r.recv.Load() }
