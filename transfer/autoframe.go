package transfer

import (
	"bytes"
	"runtime"
	"slices"
	"sync"
	"time"
)

// frameMeta is what a frame writer knows of the data in one frame, for
// choosing its codec.
type frameMeta struct {
	// compressed is how many of its bytes are item data of an
	// already-compressed file (classCompressed).
	compressed int
	// starts counts the items whose data starts in the frame.
	starts int
	// trialRatio is the lz4 ratio of the last trial made on data in the
	// frame (0: none).
	trialRatio float64
}

// sendFrame is a filled frame on its way to the sending goroutine.
type sendFrame struct {
	b    *[]byte
	meta frameMeta
}

// frameCoder chooses the codec of each frame a frameWriter sends and
// books what was sent: a fixed Compression compresses every frame with
// it; --compress auto sends as none a frame that is mostly
// already-compressed data, and the rest with the rung its autoController
// chose. Either way a frame that the codec does not shrink goes out raw.
// encode and book run on the sending goroutine; Stats may be called from
// any.
type frameCoder struct {
	fixed     Compression
	fixedComp compressor
	auto      *autoController
	comps     [autoRungs]compressor // autoLadder's, made when first used

	mu    sync.Mutex
	stats FrameStats
	// write is the sending goroutine's time in Write so far; peer is the
	// receiver's last report (peerFresh: not yet booked), peerPrev the
	// one the current interval starts from.
	write time.Duration
	// lastCPU is the CPU time of encode's last compression (auto only),
	// which book hands to the controller; on the sending goroutine.
	lastCPU            time.Duration
	peer, peerPrev     peerRecv
	peerFresh, peerOne bool
	// sendIdle is the time the sending goroutine has waited for a frame
	// to send, sendWaitFrom when its current wait began (zero: not
	// waiting).
	sendIdle     time.Duration
	sendWaitFrom time.Time
	// frameIdle is the sending goroutine's wait for the frame being sent,
	// which book hands to the controller.
	frameIdle time.Duration
}

// sendWaiting books the start (true) or the end of a wait of the sending
// goroutine for a frame to send.
func (fc *frameCoder) sendWaiting(waiting bool) {
	now := time.Now()
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if waiting {
		fc.sendWaitFrom = now
		return
	}
	if !fc.sendWaitFrom.IsZero() {
		d := now.Sub(fc.sendWaitFrom)
		fc.sendIdle += d
		fc.frameIdle += d
		fc.sendWaitFrom = time.Time{}
	}
}

// peerRecv is a receiver's report of what it has received (msgRate), with
// what this side had done when it read it.
type peerRecv struct {
	// recvBytes are the frame bytes the receiver had read, recvWait the
	// time it waited with nothing to read (its frame reader empty).
	recvBytes int64
	recvWait  time.Duration
	// idle is the time this side had waited for the receiver's next
	// request, write its time in Write, sendIdle the time its sending
	// goroutine had waited for frames, at when it read the report.
	idle, write, sendIdle time.Duration
	at                    time.Time
}

// Receiver reports (msgRate) cover intervals of at least peerMinBytes
// received: a shorter one measures the batching, not the link. The
// receiver's requests pace this side: the link (or the receiver) is the
// bottleneck over an interval in which this side waited for requests
// peerIdleShare of the time or more, or its writes blocked autoLinkBound
// of it.
const (
	peerMinBytes  = 1 << 20
	peerIdleShare = 0.5
)

// peerReceived books a receiver's report: recvBytes frame bytes read, and
// recvWait spent waiting with nothing to read; idle is the time this
// side's reader of requests has waited for them so far. Called by that
// reader; the sending goroutine feeds the controller with it.
func (fc *frameCoder) peerReceived(recvBytes int64, recvWait, idle time.Duration) {
	now := time.Now()
	fc.mu.Lock()
	defer fc.mu.Unlock()
	sendIdle := fc.sendIdle
	if !fc.sendWaitFrom.IsZero() {
		sendIdle += now.Sub(fc.sendWaitFrom)
	}
	fc.peer = peerRecv{recvBytes: recvBytes, recvWait: recvWait, idle: idle, write: fc.write, sendIdle: sendIdle, at: now}
	fc.peerFresh = true
}

// bookPeer books the interval between the previous receiver report and
// the latest one, if long enough. Over an interval in which the link was
// the bottleneck (this side waited for requests, or on its writes), the
// time the receiver waited per byte is the link's (about none when the
// receiver itself, busy writing, was the bottleneck: compressing would
// not help it), which the controller is fed and the stats count: the
// writes alone do not show it, as the receiver asks for at most a few
// batches ahead and the buffers on the way take them at once. When this
// side was the bottleneck, the receiver waited for it, not for the link,
// and the interval's wall time per byte bounds the link's time
// (peerCaughtUp). Called with fc.mu held, on the sending goroutine.
func (fc *frameCoder) bookPeer() {
	if !fc.peerFresh {
		return
	}
	fc.peerFresh = false
	cur := fc.peer
	if !fc.peerOne {
		fc.peerPrev, fc.peerOne = cur, true
		return
	}
	prev := fc.peerPrev
	dB, dwait := cur.recvBytes-prev.recvBytes, cur.recvWait-prev.recvWait
	dta, dw := cur.at.Sub(prev.at), cur.write-prev.write
	// This side waited for the receiver only while both its reader of
	// requests and its sending goroutine waited: a reader waiting for
	// the next request while the frames of the last one are still being
	// compressed (up to frameQueue of them) waits for the codec.
	didle := min(cur.idle-prev.idle, cur.sendIdle-prev.sendIdle)
	if dB < peerMinBytes || dta <= 0 {
		return // the interval goes on
	}
	fc.peerPrev = cur
	if float64(didle) >= peerIdleShare*float64(dta) || float64(dw) >= autoLinkBound*float64(dta) {
		fc.stats.PeerBytes += dB
		fc.stats.PeerSeconds += dwait.Seconds()
		if fc.auto != nil {
			fc.auto.peerLink(max(float64(dwait), 1) / float64(dB))
		}
	} else if fc.auto != nil {
		fc.auto.peerCaughtUp(float64(dta) / float64(dB))
	}
}

func newFrameCoder(c Compression) (*frameCoder, error) {
	fc := &frameCoder{fixed: c}
	if c.Codec == CodecAuto {
		fc.auto = newAutoController()
		return fc, nil
	}
	comp, err := newCompressor(c)
	if err != nil {
		return nil, err
	}
	fc.fixedComp = warm(comp)
	return fc, nil
}

// warmBytes is what warm compresses: enough text for a codec to set up
// its tables.
var warmBytes = bytes.Repeat([]byte("<?php echo esc_html( get_option( 'blogname' ) ); ?>\n"), 64)

// warm returns c after one compression of warmBytes: a codec's first call
// allocates its tables (a zstd encoder's take tens of milliseconds on a
// busy machine), which would otherwise be timed as the first frame's cost
// and make the controller take the codec for many times slower than it is.
func warm(c compressor) compressor {
	if c != nil {
		c.compress(nil, warmBytes)
	}
	return c
}

// encode compresses the frame (its header room, then its data) into enc
// (whose first frameHdrRoom bytes are kept) and returns the codec the
// frame goes out with, the buffer to send (frame or enc, with the header
// room in front), the Compression tried (its stats label) and the time
// compressing took; skipped is set when auto sent it raw without trying.
func (fc *frameCoder) encode(enc *[]byte, frame []byte, meta frameMeta) (codec Codec, out []byte, tried Compression, compress time.Duration, skipped bool, err error) {
	raw := frame[frameHdrRoom:]
	comp, tried := fc.fixedComp, fc.fixed
	if fc.auto != nil {
		if meta.trialRatio > 0 {
			fc.auto.trialRatio(meta.trialRatio)
		}
		if 2*meta.compressed >= len(raw) {
			return CodecNone, frame, Compression{}, 0, true, nil
		}
		r := fc.auto.current()
		tried = autoLadder[r]
		if fc.comps[r] == nil && r > 0 {
			if fc.comps[r], err = newCompressor(tried); err != nil {
				return CodecNone, frame, tried, 0, false, err
			}
			warm(fc.comps[r])
		}
		comp = fc.comps[r]
	}
	if comp == nil {
		return CodecNone, frame, tried, 0, false, nil
	}
	if fc.auto != nil {
		// The thread's CPU time against the wall time says how much of
		// the core the codec had: the rest went to other work.
		runtime.LockOSThread()
		c0 := threadCPU()
		defer func() {
			fc.lastCPU = threadCPU() - c0
			runtime.UnlockOSThread()
		}()
	}
	t0 := time.Now()
	e, err := comp.compress((*enc)[:frameHdrRoom], raw)
	compress = time.Since(t0)
	if err != nil {
		return CodecNone, frame, tried, compress, false, err
	}
	*enc = e
	if len(e) > frameHdrRoom && len(e)-frameHdrRoom < len(raw) {
		return tried.Codec, e, tried, compress, false, nil
	}
	return CodecNone, frame, tried, compress, false, nil
}

// book records a frame sent: rawLen bytes of data, wireLen bytes on the
// wire (header included), under the codec tried; and feeds auto's
// controller.
func (fc *frameCoder) book(tried Compression, meta frameMeta, rawLen, encLen, wireLen int, compress, write time.Duration, skipped bool) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.bookPeer()
	if fc.auto != nil {
		fc.auto.observe(frameSample{rung: slices.Index(autoLadder[:], tried), raw: rawLen, enc: encLen,
			compress: compress, compressCPU: fc.lastCPU, write: write, idle: fc.frameIdle, skipped: skipped})
	}
	fc.frameIdle = 0
	cpu := fc.lastCPU
	fc.lastCPU = 0
	fc.write += write
	s := &fc.stats
	s.WriteSeconds += write.Seconds()
	s.WireBytes += int64(wireLen)
	name := tried.String()
	i := slices.IndexFunc(s.Codecs, func(c CodecStats) bool { return c.Codec == name })
	if i < 0 {
		s.Codecs = append(s.Codecs, CodecStats{Codec: name})
		i = len(s.Codecs) - 1
	}
	c := &s.Codecs[i]
	c.Frames++
	c.Files += int64(meta.starts)
	c.RawBytes += int64(rawLen)
	c.WireBytes += int64(wireLen)
	c.CompressSeconds += compress.Seconds()
	c.CompressCPUSeconds += cpu.Seconds()
	if fc.auto != nil {
		s.Decisions = fc.auto.decisions
		s.Final = autoLadder[fc.auto.current()].String()
	}
}

// Stats returns a copy of what was booked so far.
func (fc *frameCoder) Stats() FrameStats {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	s := fc.stats
	s.Codecs = slices.Clone(s.Codecs)
	return s
}

// defaultSkipList is DefaultSkipCompress, parsed.
var defaultSkipList = func() SkipList {
	l, err := ParseSkipList(DefaultSkipCompress)
	if err != nil {
		panic(err)
	}
	return l
}()

// setSkipList replaces the writer's --skip-compress list; call it before
// the first item.
func (fw *frameWriter) setSkipList(l SkipList) { fw.item.skip = l }

// itemState is what a frame writer knows of the item whose data it is
// writing (beginItem), for --compress auto.
type itemState struct {
	skip  SkipList
	class dataClass
	// size is the item's length; head is set until its first bytes
	// were classified.
	size    int64
	head    bool
	started bool
	tmp     []byte // the trial's output
}

// beginItem tells the writer that the chunks written next are the data of
// the file at name, size bytes from offset off (the stats count the file
// in the frame its first block starts in). With --compress auto, a name
// in the skip list makes it already-compressed data; otherwise its first bytes (at offset
// 0) are classified as they are read (classifyHead); a fixed codec
// compresses every frame.
func (fw *frameWriter) beginItem(name string, off, size int64) {
	it := &fw.item
	it.class, it.size, it.head, it.started = classUnknown, size, false, off == 0
	if fw.coder.auto == nil {
		return
	}
	if it.skip.Match(name) {
		it.class = classCompressed
		return
	}
	it.head = off == 0
}

// endItem tells the writer that the item's data is over: what follows is
// messages.
func (fw *frameWriter) endItem() { fw.item = itemState{skip: fw.item.skip, tmp: fw.item.tmp} }

// classify books p, item data just read into the current frame: the
// item's first bytes are classified, and already-compressed data is
// counted in the frame's meta.
func (fw *frameWriter) classify(p []byte) {
	it := &fw.item
	if it.started {
		it.started = false
		fw.meta.starts++
	}
	if it.head && len(p) > 0 {
		it.head = false
		c, ratio := classifyHead(p, it.size, &it.tmp)
		it.class = c
		if ratio > 0 {
			fw.meta.trialRatio = ratio
		}
	}
	if it.class == classCompressed {
		fw.meta.compressed += len(p)
	}
}

// splitMinBytes is how much data of the other class a frame must hold
// before a chunk of an item sends it first: frames stay large enough to
// compress well, and already-compressed data mostly travels in frames of
// its own.
const splitMinBytes = frameRawBytes / 4

// splitForClass sends the current frame before a chunk of the current
// item when the frame holds splitMinBytes of data of the other class
// (--compress auto).
func (fw *frameWriter) splitForClass() {
	if fw.coder.auto == nil {
		return
	}
	data := len(*fw.buf) - frameHdrRoom
	if fw.item.class == classCompressed {
		if data-fw.meta.compressed >= splitMinBytes {
			fw.send()
		}
	} else if fw.meta.compressed >= splitMinBytes {
		fw.send()
	}
}
