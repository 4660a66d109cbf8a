package transfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/restoresync/restoresync/delta"
	"github.com/restoresync/restoresync/transport"
	"github.com/restoresync/restoresync/treewalk"
)

// Conn is the client's side of one stream after the handshake. Its methods
// are the protocol's requests. A Conn is used by at most two goroutines at a
// time: one sending requests (the Send* methods and the synchronous calls)
// and, for pipelined calls, one receiving replies (the Recv* methods), in the
// order the requests were sent. Its methods return per-item results first
// and a stream error last, after which the Conn is unusable (see the
// package doc).
type Conn struct {
	s          transport.Stream
	raw        transport.Stream // s without the closing of the frame reader
	cw         io.Writer        // raw, counted in sent
	enc        encoder
	dec        decoder
	sent, recv atomic.Int64
	// recv0 is recv at the end of the handshake, what SendRead's
	// receiver reports (msgRate) count from.
	recv0 int64
	// Peer is the version string the server announced.
	Peer string
	// planned is the list last sent with Plan: Finish with the same list
	// does not send it again.
	planned []treewalk.Entry
	// pending counts the requests awaiting their reply, which arms the
	// idle timeout (SetIdleTimeout).
	pending atomic.Int32
	idle    *transport.IdleWatch
	// matches are a RoleGlob reply's (Glob), sums a RoleSums reply's
	// (Sums).
	matches []string
	sums    []FileSum
	sizes   []PathSize // a RoleSizes reply's (Sizes)
}

// Handshake sends h on s and reads the server's reply. h.Proto and the
// Compression check are filled in and done here. Errors wrap ErrProtocol for
// a peer that is not a restoresync agent or speaks another protocol
// version; the remote's stderr, when there is some, is added to the message.
func Handshake(ctx context.Context, s transport.Stream, h Hello) (*Conn, error) {
	h.Proto = ProtocolVersion
	comp, err := ParseCompression(h.Compression)
	if err != nil {
		return nil, err
	}
	skip := defaultSkipList
	if h.SkipCompress != nil {
		if skip, err = ParseSkipList(*h.SkipCompress); err != nil {
			return nil, err
		}
	}
	c := &Conn{s: s}
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	cw := transport.CountingWriter(s, &c.sent)
	br := bufio.NewReaderSize(transport.CountingReader(s, &c.recv), 64<<10)
	if err := writeHandshake(cw, h); err != nil {
		if errors.Is(err, transport.ErrRemoteExited) {
			// The remote command ended before it read the hello, and
			// what it sent before it did says why (an SFTP-only server's
			// answer, a forced command's refusal): its stdout is at its
			// end, so the read is short, and its error says more than
			// the write's.
			var rep helloReply
			if rerr := readHandshake(br, &rep); rerr != nil && ctx.Err() == nil {
				return nil, withStderr(s, rerr)
			}
		}
		return nil, withStderr(s, fmt.Errorf("handshake: %w", err))
	}
	var rep helloReply
	if err := readHandshake(br, &rep); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, withStderr(s, err)
	}
	if rep.Proto != ProtocolVersion {
		return nil, fmt.Errorf("%w: the remote agent (restoresync %s) speaks protocol %d, this client (restoresync %s) speaks %d: install the same version on both hosts",
			ErrProtocol, rep.Version, rep.Proto, h.Version, ProtocolVersion)
	}
	if rep.Error != "" {
		return nil, &RemoteError{Msg: rep.Error}
	}
	if comp.Codec != CodecAuto && !slices.Contains(rep.Codecs, comp.Codec.String()) {
		return nil, fmt.Errorf("%w: the remote agent (restoresync %s) does not support codec %s (it has %v)", ErrProtocol, rep.Version, comp.Codec, rep.Codecs)
	}
	if h.Verify && !rep.Verify {
		return nil, fmt.Errorf("%w: the remote agent (restoresync %s) does not support --verify: install the same version on both hosts", ErrProtocol, rep.Version)
	}
	if h.Role == RoleSizes {
		// The reply is the whole answer, and the stream may carry
		// another handshake: no frames are read ahead of it.
		if !stop() {
			return nil, ctx.Err()
		}
		c.s, c.raw, c.cw = s, s, cw
		c.Peer, c.sizes = rep.Version, rep.Sizes
		return c, nil
	}
	// Only a push's client sends file data. Every other client sends
	// requests and block signatures, which under auto are not worth the
	// CPU of compressing them nor a zstd encoder's memory (several MiB);
	// an explicit codec still applies to whatever this end sends.
	wcomp := comp
	if comp.Codec == CodecAuto && h.Role != RoleReceiver {
		wcomp = Compression{Codec: CodecNone}
	}
	fw, err := newFrameWriter(cw, wcomp)
	if err != nil {
		return nil, err
	}
	fw.setSkipList(skip)
	c.enc = encoder{fw: fw, verify: h.Verify}
	c.dec = decoder{fr: newFrameReader(br), verify: h.Verify}
	c.s = closingStream{s, c.dec.fr}
	c.raw, c.cw = s, cw
	c.Peer = rep.Version
	c.recv0 = c.recv.Load()
	c.matches = rep.Matches
	c.sums = rep.Sums
	c.sizes = rep.Sizes
	if !stop() {
		// ctx ended as the handshake completed: the stream is being
		// closed under us, so it is not a usable Conn.
		fw.Close()
		c.dec.fr.Close()
		return nil, ctx.Err()
	}
	return c, nil
}

// closingStream is a Conn's stream: closing it (Close, Abort, CloseTar, a
// cancelled call, the idle timeout) also stops the frame reader's
// goroutine, which would otherwise wait for ever to hand a frame to a
// Conn that reads no more.
type closingStream struct {
	transport.Stream
	fr *frameReader
}

// Close closes the stream, then the frame reader.
func (s closingStream) Close() error {
	err := s.Stream.Close()
	s.fr.Close()
	return err
}

// withStderr is transport.WithStderr, and marks with ErrNoAgent a protocol
// failure whose remote could not run the agent: the remote shell's words
// for a missing command (they have no typed form) or its exit status 127.
// An error the agent itself sent (a RemoteError) is returned as it is: it
// says the cause, and the remote's stderr then holds only what the
// account's shell startup printed (a noisy .bashrc), which is no part of
// it.
func withStderr(s transport.Stream, err error) error {
	var re *RemoteError
	if errors.As(err, &re) {
		return err
	}
	err = transport.WithStderr(s, err)
	msg := s.Stderr()
	if errors.Is(err, ErrProtocol) && !errors.Is(err, ErrNoAgent) &&
		(strings.Contains(msg, "not found") || strings.Contains(msg, "No such file or directory") || strings.Contains(err.Error(), "status 127")) {
		err = &noAgentError{err}
	}
	return err
}

// WireBytes returns the bytes sent and received on the stream so far,
// handshake and frame headers included. Safe for concurrent use.
func (c *Conn) WireBytes() (sent, recv int64) { return c.sent.Load(), c.recv.Load() }

// fail decorates a wire error with the remote's stderr.
func (c *Conn) fail(err error) error {
	if err == nil {
		return nil
	}
	if terr := c.idle.Err(); terr != nil {
		return terr
	}
	return withStderr(c.s, err)
}

// watch makes ctx cancel one call: if ctx ends before the call returns, the
// stream is closed, so that a read or a write blocked on the peer returns
// (cancel by closing, as gokrazy/rsync's closeOnErr does), and the call's
// error becomes ctx's. The Conn is then unusable, as after any stream
// error. The caller defers the returned function with its error result:
//
//	defer c.watch(ctx)(&err)
func (c *Conn) watch(ctx context.Context) func(errp *error) {
	stop := context.AfterFunc(ctx, func() { c.s.Close() })
	return func(errp *error) {
		if !stop() && *errp != nil {
			*errp = ctx.Err()
		}
	}
}

// List asks a sender for its whole file list (pull): the chunks of
// ListChunks, collected.
func (c *Conn) List(ctx context.Context) (treewalk.List, error) {
	lr := c.ListChunks()
	return treewalk.CollectChunks(func() (treewalk.Chunk, error) { return lr.Next(ctx) })
}

// ListChunks returns the reader of a sender's file list chunk by chunk
// (pull): each Next asks for the next chunk of the sender's walk, which
// goes on between requests. While it is read, other requests may go on
// the Conn between two calls of Next, from the same goroutine; or, with
// Send and Recv, the list's requests are pipelined with the others.
func (c *Conn) ListChunks() *ListReader { return &ListReader{c: c} }

// ListReader reads a sender's file list chunk by chunk (Conn.ListChunks),
// each chunk checked as a part of the list (treewalk.ListChecker). Not
// safe for concurrent use, except that Send and Recv may run in the
// Conn's two goroutines (the sending and the receiving one).
type ListReader struct {
	c     *Conn
	check treewalk.ListChecker
	ended bool
}

// Next returns the next chunk, io.EOF after the last, or a stream error
// (a list that fails its check wraps ErrProtocol): Send, then Recv.
func (r *ListReader) Next(ctx context.Context) (treewalk.Chunk, error) {
	if r.ended {
		return treewalk.Chunk{}, io.EOF
	}
	if err := r.Send(); err != nil {
		return treewalk.Chunk{}, err
	}
	return r.Recv(ctx)
}

// Send asks for the next chunk, whose reply Recv reads in its turn among
// the replies of the Conn's other requests (the order they were sent).
// After the last chunk a Send starts a new walk: the caller stops
// asking once Recv returned a chunk with Last set.
func (r *ListReader) Send() error {
	c := r.c
	c.pending.Add(1) // until Recv
	c.enc.byte(msgList)
	return c.fail(c.enc.flush())
}

// Recv reads the chunk of the oldest outstanding Send. Its errors are
// Next's; every error ends the stream.
func (r *ListReader) Recv(ctx context.Context) (_ treewalk.Chunk, err error) {
	c := r.c
	defer c.watch(ctx)(&err)
	defer c.pending.Add(-1)
	if err := c.dec.status(); err != nil {
		return treewalk.Chunk{}, c.fail(err)
	}
	ch, err := c.dec.chunk()
	if err != nil {
		return treewalk.Chunk{}, c.fail(err)
	}
	if err := r.check.Check(ch); err != nil {
		var pe *treewalk.PathError
		if errors.As(err, &pe) {
			return treewalk.Chunk{}, fmt.Errorf("%w: entry %q: %w", ErrProtocol, pe.Path, pe.Err)
		}
		return treewalk.Chunk{}, fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	r.ended = ch.Last
	return ch, nil
}

// SendRead asks a sender for the data of items (pull). RecvRead reads the
// reply; several requests may be outstanding. An item with Delta goes with
// its signature's sums, and its data comes back as a delta.
func (c *Conn) SendRead(items []Item) error {
	c.pending.Add(1) // until RecvRead
	// What was received so far and how long this end waited with
	// nothing to read, for the sender's --compress auto: while the
	// sender waits for this end's requests, that is the link's time,
	// which the sender's writes into the buffers on the way do not show
	// (and none when this end, busy writing, is the bottleneck).
	c.enc.byte(msgRate)
	c.enc.uvarint(uint64(c.recv.Load() - c.recv0))
	c.enc.uvarint(uint64(c.dec.fr.waited.Load() / 1e3))
	c.enc.byte(msgRead)
	c.enc.items(items)
	return c.fail(c.enc.flush())
}

// RecvRead reads the data of the items of the oldest outstanding SendRead
// into w. It returns one error per item (nil where it succeeded) and a
// stream error that ends the stream. Delta items need w to be a
// BasisOpener; a delta that cannot be applied is an item error wrapping
// ErrDeltaFailed.
func (c *Conn) RecvRead(ctx context.Context, items []Item, w ItemWriter) (_ []error, err error) {
	defer c.watch(ctx)(&err)
	defer c.pending.Add(-1)
	if err := c.dec.status(); err != nil {
		return nil, c.fail(err)
	}
	errs := make([]error, len(items))
	for i := range items {
		itemErr, err := recvItemData(ctx, &c.dec, w, &items[i])
		if err != nil {
			return nil, c.fail(err)
		}
		errs[i] = itemErr
	}
	return errs, nil
}

// Plan sends the file list to a receiver (push), which compares it with its
// tree, prepares directories and split files, and answers with the indices
// of the entries whose data it needs and the signatures of the copies it
// already has of some of them.
func (c *Conn) Plan(ctx context.Context, entries []treewalk.Entry) (_ PlanResult, err error) {
	defer c.watch(ctx)(&err)
	c.pending.Add(1)
	defer c.pending.Add(-1)
	c.enc.byte(msgFileList)
	c.enc.entries(entries)
	c.planned = entries
	if err := c.enc.flush(); err != nil {
		return PlanResult{}, c.fail(err)
	}
	if err := c.dec.status(); err != nil {
		return PlanResult{}, c.fail(err)
	}
	res, err := c.dec.planReply(entries)
	if err != nil {
		return PlanResult{}, c.fail(err)
	}
	return res, nil
}

// SendWrite sends items and their data, read from src, to a receiver
// (push). It returns the source's per-item errors (the receiver is told of
// them too) and a stream error. RecvWrite reads the reply. An item with
// Delta is sent as a delta against the signature (only the signature's
// sizes go to the receiver, which has the basis). len(buf) is the read
// size (--read-buffer); buf itself is not used, as the data is read from
// src straight into the frames.
func (c *Conn) SendWrite(ctx context.Context, items []Item, src ItemSource, buf []byte) (_ []error, err error) {
	defer c.watch(ctx)(&err)
	c.pending.Add(1) // until RecvWrite
	c.enc.byte(msgWrite)
	c.enc.itemList(items, false)
	errs := make([]error, len(items))
	for i := range items {
		errs[i] = sendItemData(ctx, &c.enc, src, &items[i], len(buf))
		if err := c.enc.fw.Err(); err != nil {
			return nil, c.fail(err)
		}
	}
	if err := c.enc.flush(); err != nil {
		return nil, c.fail(err)
	}
	return errs, nil
}

// RecvWrite reads the receiver's per-item errors for the oldest outstanding
// SendWrite. Each is a RemoteError; one whose delta could not be applied
// wraps ErrDeltaFailed, and a block whose split file had already failed
// wraps ErrSplitGone.
func (c *Conn) RecvWrite(items []Item) ([]error, error) {
	defer c.pending.Add(-1)
	if err := c.dec.status(); err != nil {
		return nil, c.fail(err)
	}
	errs, err := c.dec.itemErrors(len(items))
	if err != nil {
		return nil, c.fail(err)
	}
	return errs, nil
}

// Commit tells a receiver that every block of the split file e has been
// written (push); it puts the file in place. itemErr is the receiver's
// error for e (a RemoteError; the stream goes on); err is a stream error.
func (c *Conn) Commit(ctx context.Context, e *treewalk.Entry) (itemErr, err error) {
	defer c.watch(ctx)(&err)
	c.pending.Add(1)
	defer c.pending.Add(-1)
	c.enc.byte(msgCommit)
	c.enc.entry(e)
	if err := c.enc.flush(); err != nil {
		return nil, c.fail(err)
	}
	if err := c.dec.status(); err != nil {
		return nil, c.fail(err)
	}
	msg, err := c.dec.str()
	if err != nil {
		return nil, c.fail(err)
	}
	if msg != "" {
		return &RemoteError{Msg: msg}, nil
	}
	return nil, nil
}

// Finish asks a receiver to create symlinks, hardlinks and special files,
// set directory metadata and remove stale temporary files (push).
func (c *Conn) Finish(ctx context.Context, entries []treewalk.Entry) (_ []*treewalk.PathError, err error) {
	defer c.watch(ctx)(&err)
	c.pending.Add(1)
	defer c.pending.Add(-1)
	c.enc.byte(msgFinish)
	same := len(entries) > 0 && len(entries) == len(c.planned) && &entries[0] == &c.planned[0]
	c.enc.bool(same) // the server kept the planned list: it is not sent twice
	if !same {
		c.enc.entries(entries)
	}
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

// Close says goodbye, waits for the server to end its side and closes the
// stream. The wait is bounded by the idle timeout (SetIdleTimeout), if
// any: a peer that stopped (a stalled agent) cannot hold Close up longer,
// and the error then wraps ErrTimeout. Without one, a stalled peer holds
// Close until Abort is called from another goroutine.
func (c *Conn) Close() error {
	c.pending.Add(1) // waiting on the peer's goodbye arms the idle timeout
	defer c.idle.Stop()
	c.enc.byte(msgBye)
	err := c.enc.fw.Close()
	c.s.CloseWrite()
	// Wait for the server to end its side, so its last writes are counted.
	io.Copy(io.Discard, readerFunc(c.dec.fr.Read))
	if cerr := c.s.Close(); err == nil {
		err = cerr
	}
	if terr := c.idle.Err(); terr != nil {
		return terr
	}
	return err
}

// Reusable reports whether the stream can outlive the session (Release
// would keep it): it is a session on a shared SSH connection
// (transport.SSHMux) that is open.
func (c *Conn) Reusable() bool { return transport.CanPark(c.raw) }

// Release ends the session as Close does, with every request answered
// and the server's last writes counted, but keeps the agent: it asks the
// server for the end of the session (msgNext, protocol 8), reads the
// server's frames to their end, and parks the stream with its mux
// (transport.Park), where the next Open to the same host with the same
// settings finds it and handshakes again on it instead of starting
// another agent. A stream that cannot be parked is closed, and the agent
// then exits as after a goodbye. The wait is bounded by the idle timeout,
// as Close's. The Conn must not be used afterwards.
func (c *Conn) Release() error {
	defer c.idle.Stop()
	ended, err := c.endSession()
	if terr := c.idle.Err(); terr != nil {
		c.s.Close()
		return terr
	}
	if err == nil && ended && transport.Park(c.raw) {
		return nil
	}
	if cerr := c.s.Close(); err == nil {
		err = cerr
	}
	return err
}

// endSession sends msgNext and framesEnd and reads the server's frames to
// their end; ended says they ended with the server's framesEnd (the agent
// awaits another handshake on c.raw, and nothing of the stream is read
// ahead), not with the stream.
func (c *Conn) endSession() (ended bool, err error) {
	c.pending.Add(1) // waiting on the peer's end arms the idle timeout
	c.enc.byte(msgNext)
	err = c.enc.fw.Close()
	if err == nil {
		_, err = c.cw.Write([]byte{framesEnd})
	}
	io.Copy(io.Discard, readerFunc(c.dec.fr.Read))
	<-c.dec.fr.exited // it reads nothing after the end
	return c.dec.fr.ended.Load(), err
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// PlanResult is a receiver's answer to a file list.
type PlanResult struct {
	// Need holds the indices, in the file list, of the entries whose data
	// must be sent, ascending.
	Need []int
	// Errors are entries the receiver could not prepare (they are not
	// needed, and count as failed).
	Errors []*treewalk.PathError
	// Signatures holds, by index in the file list, the signature of the
	// receiver's current copy of needed files that it has as a non-empty
	// regular file: their data can be sent as a delta. Nil when the
	// receiver computes none.
	Signatures map[int]*delta.Signature
}

// signatures encodes a plan reply's signatures, in ascending index order.
func (e *encoder) signatures(sigs map[int]*delta.Signature) {
	idx := make([]int, 0, len(sigs))
	for i := range sigs {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	e.uvarint(uint64(len(idx)))
	for _, i := range idx {
		e.uvarint(uint64(i))
		e.signature(sigs[i], true)
	}
}

// signatures decodes a plan reply's signatures; each must be for a needed
// entry, at most once, with its sums.
func (d *decoder) signatures(need []int) (map[int]*delta.Signature, error) {
	n, err := d.count()
	if err != nil {
		return nil, err
	}
	if n > len(need) {
		return nil, fmt.Errorf("%w: %d signatures for %d needed files", ErrProtocol, n, len(need))
	}
	var out map[int]*delta.Signature
	for range n {
		i, err := d.uvarint()
		if err != nil {
			return nil, err
		}
		if _, ok := slices.BinarySearch(need, int(min(i, 1<<62))); !ok || out[int(i)] != nil {
			return nil, fmt.Errorf("%w: signature for entry %d, which is not needed or has one", ErrProtocol, i)
		}
		sig, err := d.signature()
		if err != nil {
			return nil, err
		}
		if sig == nil || sig.Weak == nil || sig.First != 0 || int64(len(sig.Weak)) != sig.Blocks() {
			return nil, fmt.Errorf("%w: signature for entry %d is not a whole file's", ErrProtocol, i)
		}
		if out == nil {
			out = map[int]*delta.Signature{}
		}
		out[int(i)] = sig
	}
	return out, nil
}
