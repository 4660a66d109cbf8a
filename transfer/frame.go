package transfer

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Wire frames. After the handshake each direction of a stream is a sequence
// of frames:
//
//	codec   1 byte  (Codec)
//	rawLen  uvarint (bytes once decoded; 1..maxFrameRaw)
//	encLen  uvarint (bytes that follow; 0..maxFrameEnc)
//	payload encLen bytes
//
// The decoded payloads, concatenated, form the message stream (proto.go).
// A frame is compressed on its own, so codecs can change from one frame to
// the next; a frame that the codec did not shrink is sent as CodecNone.
const (
	// frameRawBytes is how much message data a writer gathers before it
	// compresses and sends a frame.
	frameRawBytes = 256 << 10
	// maxFrameRaw bounds a frame's decoded size: a reader refuses larger
	// announcements, which bounds the memory a hostile peer can make us use
	// (with frameQueue frames queued).
	maxFrameRaw = 1 << 20
	// maxFrameEnc bounds a frame's encoded size.
	maxFrameEnc = maxFrameRaw + maxFrameRaw/8 + 1024
	// frameQueue is how many frames may wait between the producer and the
	// compress-and-send goroutine, or between the receive-and-decompress
	// goroutine and the consumer: the pipeline's backpressure.
	frameQueue = 4
)

// frameHdrRoom is the room a frameWriter's buffers keep in front of the
// frame's data for its header, so that header and payload go out in one
// Write without being joined: the codec byte and two uvarints of at most
// maxFrameEnc (< 1<<28), which take at most binary.MaxVarintLen32 bytes.
const frameHdrRoom = 1 + 2*binary.MaxVarintLen32

// rawPool holds a frameReader's decoded frames (length 0, capacity
// frameRawBytes); sendPool a frameWriter's, with frameHdrRoom in front
// (length frameHdrRoom, capacity frameHdrRoom+frameRawBytes), and its
// encoded frames likewise.
var (
	rawPool  = sync.Pool{New: func() any { b := make([]byte, 0, frameRawBytes); return &b }}
	sendPool = sync.Pool{New: func() any { b := make([]byte, frameHdrRoom, frameHdrRoom+frameRawBytes); return &b }}
)

// frameWriter turns a byte stream into frames. Write, Flush,
// writeChunkFrom, beginItem and endItem are called by one goroutine; compression and the network
// write run in a second one, so that reading files overlaps with
// compressing and sending. User space copies the data once at most: Write
// copies the bytes it is given into the frame, writeChunkFrom has a file's
// bytes read straight into it; a frame that goes out uncompressed is
// written from there, its header in the room in front of it, with one
// Write (a compressed one likewise from the codec's output).
type frameWriter struct {
	// coder chooses each frame's codec (autoframe.go) and books the
	// stats; it runs on the sending goroutine.
	coder *frameCoder
	// buf is the frame being filled: its data is (*buf)[frameHdrRoom:];
	// meta is what is known of that data.
	buf  *[]byte
	meta frameMeta
	// item is the item whose data writeChunkFrom writes (beginItem).
	item itemState
	ch   chan sendFrame
	done chan struct{}
	// err is the first error the sending goroutine met (nil: none);
	// Err is read on every Write, so it is an atomic, not a mutex.
	err atomic.Pointer[error]
}

// newFrameWriter returns a writer of frames of c on w; with --compress
// auto, the files whose names DefaultSkipCompress lists are sent
// uncompressed (setSkipList changes the list).
func newFrameWriter(w io.Writer, c Compression) (*frameWriter, error) {
	coder, err := newFrameCoder(c)
	if err != nil {
		return nil, err
	}
	fw := &frameWriter{coder: coder, ch: make(chan sendFrame, frameQueue), done: make(chan struct{})}
	fw.item.skip = defaultSkipList
	fw.buf = sendPool.Get().(*[]byte)
	go fw.run(w)
	return fw, nil
}

// setErr keeps err if it is the first error; safe for concurrent use.
func (fw *frameWriter) setErr(err error) {
	if err != nil {
		fw.err.CompareAndSwap(nil, &err)
	}
}

// Err returns the first error the sending goroutine met; safe for
// concurrent use.
func (fw *frameWriter) Err() error {
	if p := fw.err.Load(); p != nil {
		return *p
	}
	return nil
}

// putFrameHeader writes the header of a frame of codec c, rawLen bytes
// decoded and encLen encoded, at the end of room (frameHdrRoom bytes) and
// returns where it starts.
func putFrameHeader(room []byte, c Codec, rawLen, encLen int) int {
	var hdr [frameHdrRoom]byte
	hdr[0] = byte(c)
	n := 1 + binary.PutUvarint(hdr[1:], uint64(rawLen))
	n += binary.PutUvarint(hdr[n:], uint64(encLen))
	return frameHdrRoom - copy(room[frameHdrRoom-n:], hdr[:n])
}

func (fw *frameWriter) run(w io.Writer) {
	defer close(fw.done)
	enc := make([]byte, frameHdrRoom)
	for {
		f, ok := fw.next()
		if !ok {
			return
		}
		b := f.b
		frame := *b // the header room, then the data
		raw := frame[frameHdrRoom:]
		if fw.Err() == nil {
			codec, out, tried, tc, skipped, err := fw.coder.encode(&enc, frame, f.meta)
			if err != nil {
				fw.setErr(err)
			}
			start := putFrameHeader(out, codec, len(raw), len(out)-frameHdrRoom)
			t0 := time.Now()
			if _, err := w.Write(out[start:]); err != nil {
				fw.setErr(err)
			}
			fw.coder.book(tried, f.meta, len(raw), len(out)-frameHdrRoom, len(out)-start, tc, time.Since(t0), skipped)
		}
		*b = frame[:frameHdrRoom]
		sendPool.Put(b)
	}
}

// next takes the next frame off the queue; a wait for one (the producer
// has nothing ready: it is reading, or waiting for the receiver's next
// request) is booked as the sending goroutine's idle time.
func (fw *frameWriter) next() (sendFrame, bool) {
	select {
	case f, ok := <-fw.ch:
		return f, ok
	default:
	}
	fw.coder.sendWaiting(true)
	f, ok := <-fw.ch
	fw.coder.sendWaiting(false)
	return f, ok
}

// Write buffers p; full frames are handed to the sending goroutine. It
// returns the first error the sending goroutine met.
func (fw *frameWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		b := *fw.buf
		k := min(len(p), frameHdrRoom+frameRawBytes-len(b))
		b = append(b, p[:k]...)
		*fw.buf = b
		p = p[k:]
		if len(b) == frameHdrRoom+frameRawBytes {
			fw.send()
		}
	}
	if err := fw.Err(); err != nil {
		return 0, err
	}
	return n, nil
}

func (fw *frameWriter) send() {
	fw.ch <- sendFrame{fw.buf, fw.meta}
	fw.buf, fw.meta = sendPool.Get().(*[]byte), frameMeta{}
}

// writeChunkFrom writes a chunk of item data, tag and uvarint length k
// then k bytes, reading the bytes from r straight into the frames
// (io.ReadFull, in as many reads as the chunk spans frames). Each piece
// read is written to h, if not nil, before its frame can be sent. If r
// yields only n < k bytes, the stream gets exactly what writing a chunk of
// those n bytes gives (none for n = 0), as if they had been read first:
// the frames a chunk fills are held until it is complete, so that its
// length can still be rewritten. It returns n and r's error (io.EOF or
// io.ErrUnexpectedEOF for a short read). k is at most chunkBytes, so a
// chunk spans at most three frames.
func (fw *frameWriter) writeChunkFrom(r io.Reader, k int, h io.Writer) (int, error) {
	var hdr [1 + binary.MaxVarintLen64]byte
	hdr[0] = tagChunk
	hl := 1 + binary.PutUvarint(hdr[1:], uint64(k))
	const full = frameHdrRoom + frameRawBytes
	fw.splitForClass()
	first, start, firstMeta := fw.buf, len(*fw.buf), fw.meta // where the chunk starts
	// held are the frames this chunk filled, not yet sent: at most two.
	var heldArr [2]sendFrame
	held := heldArr[:0]
	hold := func() {
		held = append(held, sendFrame{fw.buf, fw.meta})
		fw.buf, fw.meta = sendPool.Get().(*[]byte), frameMeta{}
	}
	for p := hdr[:hl]; len(p) > 0; {
		if len(*fw.buf) == full {
			hold()
		}
		b := *fw.buf
		m := copy(b[len(b):full], p)
		*fw.buf, p = b[:len(b)+m], p[m:]
	}
	got := 0
	var err error
	for got < k {
		if len(*fw.buf) == full {
			hold()
		}
		b := *fw.buf
		dst := b[len(b):min(full, len(b)+k-got)]
		var m int
		m, err = io.ReadFull(r, dst)
		if h != nil {
			h.Write(dst[:m])
		}
		fw.classify(dst[:m])
		*fw.buf = b[:len(b)+m]
		got += m
		if err != nil {
			break
		}
	}
	if got < k {
		// Rewrite the chunk with the length read: gather its data,
		// put the stream back to where the chunk started and write it
		// again (a source that failed or shrank: rare, so copied).
		frames := append(held, sendFrame{fw.buf, fw.meta})
		data := append([]byte(nil), (*first)[start:]...)
		for _, f := range frames[1:] {
			data = append(data, (*f.b)[frameHdrRoom:]...)
		}
		data = data[hl:]
		for _, f := range frames[1:] {
			*f.b = (*f.b)[:frameHdrRoom]
			sendPool.Put(f.b)
		}
		*first = (*first)[:start]
		fw.buf, fw.meta = first, firstMeta
		if got > 0 {
			fw.Write(hdr[:1+binary.PutUvarint(hdr[1:], uint64(got))])
			fw.Write(data)
		}
		return got, err
	}
	for _, f := range held {
		fw.ch <- f
	}
	if len(*fw.buf) == full {
		fw.send()
	}
	return got, nil
}

// Flush hands the partial frame, if any, to the sending goroutine. It does
// not wait for the network write.
func (fw *frameWriter) Flush() error {
	if len(*fw.buf) > frameHdrRoom {
		fw.send()
	}
	return fw.Err()
}

// Close flushes, waits until every frame is written and stops the sending
// goroutine. The writer must not be used afterwards.
func (fw *frameWriter) Close() error {
	fw.Flush()
	close(fw.ch)
	<-fw.done
	return fw.Err()
}

// frameReader reads frames, decompressing them in a goroutine of its own, and
// serves their decoded bytes. Read and ReadByte are called by one goroutine;
// Close may be called from any.
type frameReader struct {
	ch  chan frameResult
	cur *[]byte
	off int
	err error
	// done is closed by Close: the goroutine stops handing frames to a
	// consumer that reads no more, instead of blocking on ch for ever.
	done      chan struct{}
	closeOnce sync.Once
	// exited is closed when the goroutine has returned.
	exited chan struct{}
	// waited is the time next has waited for a frame to arrive (ns): the
	// time this end had nothing to read (Conn's receiver reports).
	waited atomic.Int64
	// ended is set when the frames ended with framesEnd (the peer keeps
	// the stream for another session), not with the stream.
	ended atomic.Bool
	// arrived gets a token (capacity 1) each time a frame, or the end of
	// the frames, is queued on ch: a consumer that waits for something
	// else may wake when input comes (input tells whether it did).
	arrived chan struct{}
	// over is set once run has queued its last result.
	over atomic.Bool
}

// framesEnd, in a frame's codec place, ends a session's frames on a
// stream that stays open for another handshake (protocol 8's msgNext):
// the reader stops reading there, so that nothing of what follows is
// taken for a frame.
const framesEnd byte = 0xff

// errFramesEnd is readFrame's error at framesEnd.
var errFramesEnd = errors.New("end of the session's frames")

type frameResult struct {
	b   *[]byte
	err error
}

func newFrameReader(r *bufio.Reader) *frameReader {
	fr := &frameReader{ch: make(chan frameResult, frameQueue), done: make(chan struct{}), exited: make(chan struct{}),
		arrived: make(chan struct{}, 1)}
	go fr.run(r)
	return fr
}

// run reads frames until the stream ends or fails, or Close is called. A
// read of r in progress when Close is called returns only when r does:
// whoever closes the reader also closes the stream beneath it.
func (fr *frameReader) run(r *bufio.Reader) {
	defer close(fr.exited)
	defer close(fr.ch)
	var enc []byte
	for {
		b, err := readFrame(r, &enc)
		if err == errFramesEnd {
			fr.ended.Store(true)
			err = io.EOF
		}
		select {
		case fr.ch <- frameResult{b, err}:
		case <-fr.done:
			return
		}
		if err != nil {
			fr.over.Store(true)
		}
		select {
		case fr.arrived <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

// input reports whether there is input to read without waiting: the rest
// of the current frame, a queued frame, or the end of the frames. For
// the consumer's goroutine.
func (fr *frameReader) input() bool {
	return fr.cur != nil && fr.off < len(*fr.cur) || len(fr.ch) > 0 || fr.over.Load() || fr.err != nil
}

// Close tells the reading goroutine that nothing more is read: it returns
// instead of waiting to hand over a frame. Read and ReadByte may still
// serve frames already queued, then io.EOF. Idempotent and safe for
// concurrent use.
func (fr *frameReader) Close() {
	fr.closeOnce.Do(func() { close(fr.done) })
}

// readFrame reads and decodes one frame; io.EOF means a clean end of stream
// at a frame boundary. An uncompressed frame's payload is read straight
// into the decoded frame, a compressed one's into enc and decoded from
// there; either way within the sizes the header may announce.
func readFrame(r *bufio.Reader, enc *[]byte) (*[]byte, error) {
	c, err := r.ReadByte()
	if err != nil {
		return nil, err // io.EOF at a boundary is a clean end
	}
	if c == framesEnd {
		return nil, errFramesEnd
	}
	raw, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, unexpected(err)
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, unexpected(err)
	}
	if Codec(c) > codecMax {
		return nil, fmt.Errorf("%w: frame: %w %d", ErrProtocol, ErrUnknownCodec, c)
	}
	if raw == 0 || raw > maxFrameRaw || n > maxFrameEnc {
		return nil, fmt.Errorf("%w: frame sizes raw %d, encoded %d out of range", ErrProtocol, raw, n)
	}
	if Codec(c) == CodecNone && n != raw {
		return nil, fmt.Errorf("%w: frame: frame size %d != announced %d", ErrProtocol, n, raw)
	}
	b := rawPool.Get().(*[]byte)
	if cap(*b) < int(raw) {
		nb := make([]byte, raw)
		b = &nb
	}
	*b = (*b)[:raw]
	if Codec(c) == CodecNone { // the payload is the data: read in place
		if _, err := io.ReadFull(r, *b); err != nil {
			return nil, unexpected(err)
		}
		return b, nil
	}
	if cap(*enc) < int(n) {
		*enc = make([]byte, n)
	}
	e := (*enc)[:n]
	if _, err := io.ReadFull(r, e); err != nil {
		return nil, unexpected(err)
	}
	if err := decompress(Codec(c), *b, e); err != nil {
		return nil, fmt.Errorf("%w: frame: %w", ErrProtocol, err)
	}
	return b, nil
}

// unexpected maps the errors of reading inside a frame or message: an EOF
// there is io.ErrUnexpectedEOF, and a varint longer than 64 bits is a
// protocol error.
func unexpected(err error) error {
	switch err {
	case io.EOF:
		return io.ErrUnexpectedEOF
	case errVarintOverflow:
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	return err
}

// errVarintOverflow is encoding/binary's (unexported) error for a varint
// that does not fit 64 bits.
var errVarintOverflow = func() error {
	_, err := binary.ReadUvarint(bytes.NewReader(bytes.Repeat([]byte{0xff}, 11)))
	return err
}()

func (fr *frameReader) next() error {
	if fr.err != nil {
		return fr.err
	}
	if fr.cur != nil {
		*fr.cur = (*fr.cur)[:0]
		if cap(*fr.cur) == frameRawBytes {
			rawPool.Put(fr.cur)
		}
		fr.cur = nil
	}
	var res frameResult
	var ok bool
	select {
	case res, ok = <-fr.ch:
	default: // none has arrived: time the wait
		t0 := time.Now()
		res, ok = <-fr.ch
		fr.waited.Add(int64(time.Since(t0)))
	}
	if !ok {
		fr.err = io.EOF
		return fr.err
	}
	if res.err != nil {
		fr.err = res.err
		return fr.err
	}
	fr.cur, fr.off = res.b, 0
	return nil
}

// Read serves decoded bytes, io.EOF at a clean end of stream.
func (fr *frameReader) Read(p []byte) (int, error) {
	for fr.cur == nil || fr.off == len(*fr.cur) {
		if err := fr.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, (*fr.cur)[fr.off:])
	fr.off += n
	return n, nil
}

// ReadByte serves one decoded byte (io.ByteReader, for varints).
func (fr *frameReader) ReadByte() (byte, error) {
	for fr.cur == nil || fr.off == len(*fr.cur) {
		if err := fr.next(); err != nil {
			return 0, err
		}
	}
	c := (*fr.cur)[fr.off]
	fr.off++
	return c, nil
}
