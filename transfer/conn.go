package transfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"

	"github.com/restoresync/restoresync/delta"
	"github.com/restoresync/restoresync/transport"
	"github.com/restoresync/restoresync/treewalk"
)

// Conn is the client's side of one stream after the handshake. Its methods
// are the protocol's requests. A Conn is used by at most two goroutines at a
// time: one sending requests (the Send* methods and the synchronous calls)
// and, for pipelined calls, one receiving replies (the Recv* methods), in the
// order the requests were sent.
type Conn struct {
	s          transport.Stream
	enc        encoder
	dec        decoder
	sent, recv atomic.Int64
	// Peer is the version string the server announced.
	Peer string
	// planned is the list last sent with Plan: Finish with the same list
	// does not send it again.
	planned []treewalk.Entry
	// pending counts the requests awaiting their reply, which arms the
	// idle timeout (SetIdleTimeout).
	pending atomic.Int32
	idle    *transport.IdleWatch
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
	c := &Conn{s: s}
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	cw := transport.CountingWriter(s, &c.sent)
	br := bufio.NewReaderSize(transport.CountingReader(s, &c.recv), 64<<10)
	if err := writeHandshake(cw, h); err != nil {
		return nil, transport.WithStderr(s, fmt.Errorf("handshake: %w", err))
	}
	var rep helloReply
	if err := readHandshake(br, &rep); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, transport.WithStderr(s, err)
	}
	if rep.Proto != ProtocolVersion {
		return nil, fmt.Errorf("%w: the remote agent (restoresync %s) speaks protocol %d, this client (restoresync %s) speaks %d: install the same version on both hosts",
			ErrProtocol, rep.Version, rep.Proto, h.Version, ProtocolVersion)
	}
	if rep.Error != "" {
		return nil, &RemoteError{Msg: rep.Error}
	}
	if !slices.Contains(rep.Codecs, comp.Codec.String()) {
		return nil, fmt.Errorf("%w: the remote agent (restoresync %s) does not support codec %s (it has %v)", ErrProtocol, rep.Version, comp.Codec, rep.Codecs)
	}
	if h.Verify && !rep.Verify {
		return nil, fmt.Errorf("%w: the remote agent (restoresync %s) does not support --verify: install the same version on both hosts", ErrProtocol, rep.Version)
	}
	fw, err := newFrameWriter(cw, comp)
	if err != nil {
		return nil, err
	}
	c.enc = encoder{fw: fw, verify: h.Verify}
	c.dec = decoder{fr: newFrameReader(br), verify: h.Verify}
	c.Peer = rep.Version
	if !stop() {
		// ctx ended as the handshake completed: the stream is being
		// closed under us, so it is not a usable Conn.
		fw.Close()
		return nil, ctx.Err()
	}
	return c, nil
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
	var re *RemoteError
	if errors.As(err, &re) {
		return err
	}
	return transport.WithStderr(c.s, err)
}

// List asks a sender for its file list (pull).
func (c *Conn) List(ctx context.Context) (treewalk.List, error) {
	c.pending.Add(1)
	defer c.pending.Add(-1)
	c.enc.byte(msgList)
	if err := c.enc.flush(); err != nil {
		return treewalk.List{}, c.fail(err)
	}
	if err := c.dec.status(); err != nil {
		return treewalk.List{}, c.fail(err)
	}
	entries, err := c.dec.entries()
	if err != nil {
		return treewalk.List{}, c.fail(err)
	}
	errs, err := c.dec.pathErrors()
	if err != nil {
		return treewalk.List{}, c.fail(err)
	}
	return treewalk.List{Entries: entries, Errors: errs}, nil
}

// SendRead asks a sender for the data of items (pull). RecvRead reads the
// reply; several requests may be outstanding. An item with Delta goes with
// its signature's sums, and its data comes back as a delta.
func (c *Conn) SendRead(items []Item) error {
	c.pending.Add(1) // until RecvRead
	c.enc.byte(msgRead)
	c.enc.items(items)
	return c.fail(c.enc.flush())
}

// RecvRead reads the data of the items of the oldest outstanding SendRead
// into w. It returns one error per item (nil where it succeeded) and a
// stream error that ends the stream. Delta items need w to be a
// BasisOpener; a delta that cannot be applied is an item error wrapping
// ErrDeltaFailed.
func (c *Conn) RecvRead(ctx context.Context, items []Item, w ItemWriter) ([]error, error) {
	defer c.pending.Add(-1)
	if err := c.dec.status(); err != nil {
		return nil, c.fail(err)
	}
	errs := make([]error, len(items))
	for i := range items {
		itemErr, fatal := recvItemData(ctx, &c.dec, w, &items[i])
		if fatal != nil {
			return nil, c.fail(fatal)
		}
		errs[i] = itemErr
	}
	return errs, nil
}

// Plan sends the file list to a receiver (push), which compares it with its
// tree, prepares directories and split files, and answers with the indices
// of the entries whose data it needs and the signatures of the copies it
// already has of some of them.
func (c *Conn) Plan(ctx context.Context, entries []treewalk.Entry) (PlanResult, error) {
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
	n, err := c.dec.count()
	if err != nil {
		return PlanResult{}, c.fail(err)
	}
	var res PlanResult
	for range n {
		i, err := c.dec.uvarint()
		if err != nil {
			return PlanResult{}, c.fail(err)
		}
		if i >= uint64(len(entries)) || !entries[i].HasData() {
			return PlanResult{}, fmt.Errorf("%w: receiver needs entry %d", ErrProtocol, i)
		}
		res.Need = append(res.Need, int(i))
	}
	if res.Errors, err = c.dec.pathErrors(); err != nil {
		return PlanResult{}, c.fail(err)
	}
	if res.Signatures, err = c.dec.signatures(res.Need); err != nil {
		return PlanResult{}, c.fail(err)
	}
	return res, nil
}

// SendWrite sends items and their data, read from src, to a receiver
// (push). It returns the source's per-item errors (the receiver is told of
// them too) and a stream error. RecvWrite reads the reply. An item with
// Delta is sent as a delta against the signature (only the signature's
// sizes go to the receiver, which has the basis).
func (c *Conn) SendWrite(ctx context.Context, items []Item, src ItemSource, buf []byte) ([]error, error) {
	c.pending.Add(1) // until RecvWrite
	c.enc.byte(msgWrite)
	c.enc.itemList(items, false)
	errs := make([]error, len(items))
	for i := range items {
		errs[i] = sendItemData(ctx, &c.enc, src, &items[i], buf)
		if err := c.enc.fw.Err(); err != nil {
			return nil, c.fail(err)
		}
	}
	return errs, c.fail(c.enc.flush())
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
	errs := make([]error, len(items))
	n, err := c.dec.count()
	if err != nil {
		return nil, c.fail(err)
	}
	for range n {
		i, err := c.dec.uvarint()
		if err != nil {
			return nil, c.fail(err)
		}
		kind, err := c.dec.byte()
		if err != nil {
			return nil, c.fail(unexpected(err))
		}
		msg, err := c.dec.str()
		if err != nil {
			return nil, c.fail(err)
		}
		if i >= uint64(len(items)) || kind > errKindGone {
			return nil, fmt.Errorf("%w: error of kind %d for item %d of %d", ErrProtocol, kind, i, len(items))
		}
		switch kind {
		case errKindDelta:
			errs[i] = &RemoteError{Msg: msg, Kind: ErrDeltaFailed}
		case errKindGone:
			errs[i] = &RemoteError{Msg: msg, Kind: ErrSplitGone}
		default:
			errs[i] = &RemoteError{Msg: msg}
		}
	}
	return errs, nil
}

// Commit tells a receiver that every block of the split file e has been
// written (push); it puts the file in place. The error concerns e only,
// unless it wraps a stream failure (then the second result is true).
func (c *Conn) Commit(ctx context.Context, e *treewalk.Entry) (err error, fatal bool) {
	c.pending.Add(1)
	defer c.pending.Add(-1)
	c.enc.byte(msgCommit)
	c.enc.entry(e)
	if err := c.enc.flush(); err != nil {
		return c.fail(err), true
	}
	if err := c.dec.status(); err != nil {
		return c.fail(err), true
	}
	msg, err := c.dec.str()
	if err != nil {
		return c.fail(err), true
	}
	if msg != "" {
		return &RemoteError{Msg: msg}, false
	}
	return nil, false
}

// Finish asks a receiver to create symlinks, hardlinks and special files,
// set directory metadata and remove stale temporary files (push).
func (c *Conn) Finish(ctx context.Context, entries []treewalk.Entry) ([]*treewalk.PathError, error) {
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
	return errs, c.fail(err)
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
