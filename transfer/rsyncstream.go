package transfer

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sync/atomic"
)

// RsyncStream is a Stream that carries the rsync protocol (raw bytes, no
// frames) and counts the bytes that cross it in both directions. It is what
// an rsync client runs over: either a remote "rsync --server" started with
// CommandDialer.WithCommand (agent-less) or our agent after a
// RoleRsyncSender handshake (DialRsyncSender). Like a Stream it is used by
// one reader and one writer at a time; WireBytes and Close are safe from any
// goroutine.
type RsyncStream struct {
	s          Stream
	r          io.Reader // the reader that buffered past the handshake; nil: read s
	sent, recv atomic.Int64
}

// NewRsyncStream wraps s, which already carries the rsync protocol.
func NewRsyncStream(s Stream) *RsyncStream { return &RsyncStream{s: s} }

// DialRsyncSender opens a stream to the agent with role RoleRsyncSender:
// h.Role is set here, h.Path and h.RsyncArgs must be set (RsyncArgs pass
// CheckRsyncArgs). Errors are those of Dialer.Dial and Handshake: ErrConnect,
// ErrProtocol (not an agent, another protocol version, a refused option),
// *RemoteError (the agent refused the path), or ctx's error.
func DialRsyncSender(ctx context.Context, d Dialer, h Hello) (*RsyncStream, error) {
	if err := CheckRsyncArgs(h.RsyncArgs); err != nil {
		return nil, err
	}
	h.Role = RoleRsyncSender
	h.Proto = ProtocolVersion
	if h.Compression == "" {
		h.Compression = "none"
	}
	s, err := d.Dial(ctx)
	if err != nil {
		return nil, err
	}
	rs := &RsyncStream{s: s}
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	br := bufio.NewReaderSize(countingReaderFunc(s, &rs.recv), 64<<10)
	fail := func(err error) (*RsyncStream, error) {
		s.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, withStderr(s, err)
	}
	if err := writeHandshake(countingWriterFunc(s, &rs.sent), h); err != nil {
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
	// The counting happens below br; reads come out of it from now on.
	rs.r = br
	return rs, nil
}

// Read reads the peer's rsync protocol bytes.
func (r *RsyncStream) Read(p []byte) (int, error) {
	if r.r == nil {
		n, err := r.s.Read(p)
		r.recv.Add(int64(n))
		return n, err
	}
	return r.r.Read(p)
}

// Write sends rsync protocol bytes to the peer.
func (r *RsyncStream) Write(p []byte) (int, error) {
	n, err := r.s.Write(p)
	r.sent.Add(int64(n))
	return n, err
}

// Close tears the stream down (Stream.Close); safe from any goroutine, so
// it is how a blocked rsync run is cancelled.
func (r *RsyncStream) Close() error { return r.s.Close() }

// CloseWrite signals the end of our side (Stream.CloseWrite).
func (r *RsyncStream) CloseWrite() error { return r.s.CloseWrite() }

// Stderr returns the tail of the remote command's stderr (Stream.Stderr).
func (r *RsyncStream) Stderr() string { return r.s.Stderr() }

// WireBytes returns the bytes sent and received so far, handshake included.
func (r *RsyncStream) WireBytes() (sent, recv int64) { return r.sent.Load(), r.recv.Load() }

type funcReader func([]byte) (int, error)

func (f funcReader) Read(p []byte) (int, error) { return f(p) }

type funcWriter func([]byte) (int, error)

func (f funcWriter) Write(p []byte) (int, error) { return f(p) }

func countingReaderFunc(r io.Reader, n *atomic.Int64) io.Reader {
	return funcReader(func(p []byte) (int, error) {
		k, err := r.Read(p)
		n.Add(int64(k))
		return k, err
	})
}

func countingWriterFunc(w io.Writer, n *atomic.Int64) io.Writer {
	return funcWriter(func(p []byte) (int, error) {
		k, err := w.Write(p)
		n.Add(int64(k))
		return k, err
	})
}
