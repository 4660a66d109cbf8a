package transfer

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
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

// frameWriter turns a byte stream into frames. Write, Flush and
// writeChunkFrom are called by one goroutine; compression and the network
// write run in a second one, so that reading files overlaps with
// compressing and sending. User space copies the data once at most: Write
// copies the bytes it is given into the frame, writeChunkFrom has a file's
// bytes read straight into it; a frame that goes out uncompressed is
// written from there, its header in the room in front of it, with one
// Write (a compressed one likewise from the codec's output).
type frameWriter struct {
	comp  compressor
	codec Codec
	// buf is the frame being filled: its data is (*buf)[frameHdrRoom:].
	buf  *[]byte
	ch   chan *[]byte
	done chan struct{}
	mu   sync.Mutex
	err  error
}

func newFrameWriter(w io.Writer, c Compression) (*frameWriter, error) {
	comp, err := newCompressor(c)
	if err != nil {
		return nil, err
	}
	fw := &frameWriter{comp: comp, codec: c.Codec, ch: make(chan *[]byte, frameQueue), done: make(chan struct{})}
	fw.buf = sendPool.Get().(*[]byte)
	go fw.run(w)
	return fw, nil
}

func (fw *frameWriter) setErr(err error) {
	fw.mu.Lock()
	if fw.err == nil {
		fw.err = err
	}
	fw.mu.Unlock()
}

func (fw *frameWriter) Err() error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.err
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
	for b := range fw.ch {
		frame := *b // the header room, then the data
		raw := frame[frameHdrRoom:]
		if fw.Err() == nil {
			codec, out := CodecNone, frame
			if fw.comp != nil {
				if e, err := fw.comp.compress(enc[:frameHdrRoom], raw); err != nil {
					fw.setErr(err)
				} else if enc = e; len(e) > frameHdrRoom && len(e)-frameHdrRoom < len(raw) {
					codec, out = fw.codec, e
				}
			}
			start := putFrameHeader(out, codec, len(raw), len(out)-frameHdrRoom)
			if _, err := w.Write(out[start:]); err != nil {
				fw.setErr(err)
			}
		}
		*b = frame[:frameHdrRoom]
		sendPool.Put(b)
	}
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
	fw.ch <- fw.buf
	fw.buf = sendPool.Get().(*[]byte)
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
	first, start := fw.buf, len(*fw.buf) // where the chunk starts
	// held are the frames this chunk filled, not yet sent: at most two.
	var heldArr [2]*[]byte
	held := heldArr[:0]
	for p := hdr[:hl]; len(p) > 0; {
		if len(*fw.buf) == full {
			held = append(held, fw.buf)
			fw.buf = sendPool.Get().(*[]byte)
		}
		b := *fw.buf
		m := copy(b[len(b):full], p)
		*fw.buf, p = b[:len(b)+m], p[m:]
	}
	got := 0
	var err error
	for got < k {
		if len(*fw.buf) == full {
			held = append(held, fw.buf)
			fw.buf = sendPool.Get().(*[]byte)
		}
		b := *fw.buf
		dst := b[len(b):min(full, len(b)+k-got)]
		var m int
		m, err = io.ReadFull(r, dst)
		if h != nil {
			h.Write(dst[:m])
		}
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
		frames := append(held, fw.buf)
		data := append([]byte(nil), (*first)[start:]...)
		for _, b := range frames[1:] {
			data = append(data, (*b)[frameHdrRoom:]...)
		}
		data = data[hl:]
		for _, b := range frames[1:] {
			*b = (*b)[:frameHdrRoom]
			sendPool.Put(b)
		}
		*first = (*first)[:start]
		fw.buf = first
		if got > 0 {
			fw.Write(hdr[:1+binary.PutUvarint(hdr[1:], uint64(got))])
			fw.Write(data)
		}
		return got, err
	}
	for _, b := range held {
		fw.ch <- b
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

// frameReader reads frames in a goroutine of its own and serves their
// decoded bytes. A compressed frame is handed over as it came (its
// payload) and decoded when its bytes are first wanted: straight into the
// buffer of the item's Read that takes most of it (readData), else into a
// frame buffer. Read, ReadByte and readData are called by one goroutine;
// Close may be called from any.
type frameReader struct {
	ch  chan frameResult
	cur *[]byte // the decoded frame being served, from off
	off int
	// pend is a compressed frame not decoded yet (pend.enc not nil); it
	// comes after cur.
	pend frameResult
	// free are the payload buffers of compressed frames decoded since,
	// for the reading goroutine to read the next ones into: at most as
	// many as can be between it and the consumer, kept for the stream's
	// life (a sync.Pool loses them at each GC); encPool takes what does
	// not fit, and those left when the stream ends.
	free chan *[]byte
	err  error
	// done is closed by Close: the goroutine stops handing frames to a
	// consumer that reads no more, instead of blocking on ch for ever.
	done      chan struct{}
	closeOnce sync.Once
	// exited is closed when the goroutine has returned.
	exited chan struct{}
}

// frameResult is one frame read: decoded (b), or compressed (enc, codec
// and the announced decoded size raw), or the error that ended the stream.
type frameResult struct {
	b     *[]byte
	enc   *[]byte // from the reader's free payloads
	codec Codec
	raw   int
	err   error
}

// encPool holds compressed frames' payload buffers between streams.
var encPool sync.Pool

func newFrameReader(r *bufio.Reader) *frameReader {
	fr := &frameReader{ch: make(chan frameResult, frameQueue), free: make(chan *[]byte, frameQueue+2),
		done: make(chan struct{}), exited: make(chan struct{})}
	go fr.run(r)
	return fr
}

// run reads frames until the stream ends or fails, or Close is called. A
// read of r in progress when Close is called returns only when r does:
// whoever closes the reader also closes the stream beneath it.
func (fr *frameReader) run(r *bufio.Reader) {
	defer close(fr.exited)
	defer close(fr.ch)
	defer func() {
		for {
			select {
			case e := <-fr.free:
				encPool.Put(e)
			default:
				return
			}
		}
	}()
	for {
		res := readFrame(r, fr.free)
		select {
		case fr.ch <- res:
		case <-fr.done:
			return
		}
		if res.err != nil {
			return
		}
	}
}

// Close tells the reading goroutine that nothing more is read: it returns
// instead of waiting to hand over a frame. Read and ReadByte may still
// serve frames already queued, then io.EOF. Idempotent and safe for
// concurrent use.
func (fr *frameReader) Close() {
	fr.closeOnce.Do(func() { close(fr.done) })
}

// readFrame reads one frame; an error of io.EOF means a clean end of
// stream at a frame boundary. An uncompressed frame's payload is read
// straight into its decoded frame (b), a compressed one's into enc (a
// buffer from free, else from encPool, if large enough), for the consumer to
// decode; either way within the sizes the header may announce.
func readFrame(r *bufio.Reader, free chan *[]byte) frameResult {
	c, err := r.ReadByte()
	if err != nil {
		return frameResult{err: err} // io.EOF at a boundary is a clean end
	}
	raw, err := binary.ReadUvarint(r)
	if err != nil {
		return frameResult{err: unexpected(err)}
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return frameResult{err: unexpected(err)}
	}
	if Codec(c) > codecMax {
		return frameResult{err: fmt.Errorf("%w: frame: %w %d", ErrProtocol, ErrUnknownCodec, c)}
	}
	if raw == 0 || raw > maxFrameRaw || n > maxFrameEnc {
		return frameResult{err: fmt.Errorf("%w: frame sizes raw %d, encoded %d out of range", ErrProtocol, raw, n)}
	}
	if Codec(c) == CodecNone && n != raw {
		return frameResult{err: fmt.Errorf("%w: frame: frame size %d != announced %d", ErrProtocol, n, raw)}
	}
	if Codec(c) == CodecNone { // the payload is the data: read in place
		b := rawBuf(int(raw))
		if _, err := io.ReadFull(r, *b); err != nil {
			return frameResult{err: unexpected(err)}
		}
		return frameResult{b: b}
	}
	var e *[]byte
	select {
	case e = <-free:
	default:
		e, _ = encPool.Get().(*[]byte)
	}
	if e == nil || cap(*e) < int(n) {
		nb := make([]byte, n, n+n/8) // room for the next frames, a little larger
		e = &nb
	}
	*e = (*e)[:n]
	if _, err := io.ReadFull(r, *e); err != nil {
		return frameResult{err: unexpected(err)}
	}
	return frameResult{enc: e, codec: Codec(c), raw: int(raw)}
}

// rawBuf returns a decoded frame's buffer of length n: from rawPool when
// n fits frameRawBytes.
func rawBuf(n int) *[]byte {
	if n > frameRawBytes {
		b := make([]byte, n)
		return &b
	}
	b := rawPool.Get().(*[]byte)
	*b = (*b)[:n]
	return b
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

// release returns the current frame's buffer to rawPool.
func (fr *frameReader) release() {
	if fr.cur != nil {
		*fr.cur = (*fr.cur)[:0]
		if cap(*fr.cur) == frameRawBytes {
			rawPool.Put(fr.cur)
		}
		fr.cur = nil
	}
}

// served reports whether the current frame has no byte left to serve.
func (fr *frameReader) served() bool { return fr.cur == nil || fr.off == len(*fr.cur) }

// take takes the next frame from the reading goroutine, the current one
// being served: a decoded one becomes cur, a compressed one pend.
func (fr *frameReader) take() error {
	if fr.err != nil {
		return fr.err
	}
	fr.release()
	res, ok := <-fr.ch
	if !ok {
		fr.err = io.EOF
		return fr.err
	}
	if res.err != nil {
		fr.err = res.err
		return fr.err
	}
	if res.enc != nil {
		fr.pend = res
		return nil
	}
	fr.cur, fr.off = res.b, 0
	return nil
}

// decodePend decodes pend into dst (of its announced size) and gives
// pend's payload buffer back to the reading goroutine (free). An error
// that does not decode is the stream's, sticky.
func (fr *frameReader) decodePend(dst []byte) error {
	p := fr.pend
	fr.pend = frameResult{}
	err := decompress(p.codec, dst, *p.enc)
	select {
	case fr.free <- p.enc:
	default:
		encPool.Put(p.enc)
	}
	if err != nil {
		fr.err = fmt.Errorf("%w: frame: %w", ErrProtocol, err)
	}
	return fr.err
}

// next makes the next frame (pend, if a compressed one is waiting) the
// current one, decoded into a frame buffer.
func (fr *frameReader) next() error {
	if fr.pend.enc == nil {
		if err := fr.take(); err != nil {
			return err
		}
		if fr.pend.enc == nil {
			return nil
		}
	}
	b := rawBuf(fr.pend.raw)
	if err := fr.decodePend(*b); err != nil {
		return err
	}
	fr.release()
	fr.cur, fr.off = b, 0
	return nil
}

// fill makes the current frame have bytes to serve.
func (fr *frameReader) fill() error {
	for fr.served() {
		if err := fr.next(); err != nil {
			return err
		}
	}
	return nil
}

// Read serves decoded bytes, io.EOF at a clean end of stream.
func (fr *frameReader) Read(p []byte) (int, error) {
	if err := fr.fill(); err != nil {
		return 0, err
	}
	n := copy(p, (*fr.cur)[fr.off:])
	fr.off += n
	return n, nil
}

// readData serves at most want (<= len(p)) decoded bytes into p, using
// all of p as scratch, as io.Reader allows. When the next bytes are a
// compressed frame that fits in p and of which want is at least half, the
// frame is decoded straight into p: the wanted bytes are served where
// they were decoded, and only the rest of the frame is copied aside for
// the next reads (never more than was saved). Otherwise it is Read.
func (fr *frameReader) readData(p []byte, want int) (int, error) {
	if fr.served() && fr.pend.enc == nil && fr.err == nil {
		if err := fr.take(); err != nil {
			return 0, err
		}
	}
	if raw := fr.pend.raw; fr.served() && fr.pend.enc != nil && raw <= len(p) && 2*want >= raw {
		// p[:raw:raw]: a codec that appends (zstd) cannot reach past
		// the announced size into memory that is not p's.
		if err := fr.decodePend(p[:raw:raw]); err != nil {
			return 0, err
		}
		n := min(want, raw)
		if n < raw {
			b := rawBuf(raw - n)
			copy(*b, p[n:raw])
			fr.release()
			fr.cur, fr.off = b, 0
		}
		return n, nil
	}
	return fr.Read(p[:want])
}

// ReadByte serves one decoded byte (io.ByteReader, for varints).
func (fr *frameReader) ReadByte() (byte, error) {
	if err := fr.fill(); err != nil {
		return 0, err
	}
	c := (*fr.cur)[fr.off]
	fr.off++
	return c, nil
}
