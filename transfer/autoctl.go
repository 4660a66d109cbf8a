package transfer

import (
	"slices"
	"time"
)

// autoLadder is what --compress auto chooses from, cheapest first: each
// rung costs more CPU per byte and sends fewer bytes. klauspost's zstd
// has four encoders (fastest, default, better, best), levels 1, 3 and 9
// here. The best one (zstd:10 and above, which --compress zstd:19 still
// gives) is left out: it sends about 4% fewer bytes of text than zstd:9
// for four times its CPU, and its encoder state alone is about 36 MiB in
// every process that compresses (6.4 MiB for zstd:9), which would put an
// agent over the 64 MiB a restore of any size is to stay within; a
// controller that climbed to it on a long run (a slow or busy receiver
// looks like a slow link) made an in-process pull of 200,000 files peak
// at 92 MiB of heap, where 50,000 files took 21 MiB.
var autoLadder = [autoRungs]Compression{
	{CodecNone, 0}, {CodecLZ4, 0},
	{CodecZstd, 1}, {CodecZstd, 3}, {CodecZstd, 9},
}

// autoRungs is the number of autoLadder's rungs.
const autoRungs = 5

// autoPriors are each rung's compression cost (ns per raw byte, one core)
// and ratio (compressed over raw bytes) on text, from BenchmarkCodecs/text
// on this project's 2-core machine under load (lz4 188 MB/s, ratio 2.2;
// zstd:1 117 MB/s, 3.1; zstd:3 110 MB/s, 3.3; zstd:9 67 MB/s, 3.4;
// zstd:19 16 MB/s, 3.6). Only their proportions matter: the controller
// scales them by what it measures on the rung it runs (the machine's
// speed, the cores left, the data's compressibility).
var autoPriors = [autoRungs]struct{ nsPerByte, ratio float64 }{
	{0, 1}, {5.3, 0.453},
	{8.5, 0.318}, {9.1, 0.300}, {15, 0.290},
}

// autoStartRung is the rung a stream starts on before it has measured
// anything: zstd:1, mid-ladder so that the first measurements can move it
// either way. On a slow link whose buffers take the first writes at
// once, the link shows itself only in the receiver's reports, a dozen
// windows in: a start on lz4 sent them with 40% more bytes than zstd:1
// (auto 1.09× zstd:3 at 100 Mbit/s). A first window that a busy
// scheduler starved is judged on its CPU time, not its wall time.
const autoStartRung = 2

// autoWireNsPerByte is the CPU time, in ns, that a byte on the wire costs
// the rest of the machine beyond the codec's: ssh's crypto on both ends
// and the receiver's reads. On cores that the codec shares with them
// (contention above 1), a byte not sent is CPU given back: measured on
// the lab's 2 cores at 1 Gbit/s, lz4 sent 42 MiB fewer bytes of the
// bigfile profile for 0.1 s less CPU on both ends together, its own
// 0.16 s included, about 6 ns per byte saved.
const autoWireNsPerByte = 5.0

// Controller tuning.
const (
	// autoWindowBytes is how much raw data a decision looks at: four
	// frames, so a small restore still gets a few decisions and one odd
	// frame does not swing it.
	autoWindowBytes = 4 * frameRawBytes
	// autoLinkBound is the share of the send time spent in the stream's
	// Write above which the link (or the far side) is the bottleneck:
	// below it, compression (or the producer) is, and a cheaper rung is
	// tried.
	autoLinkBound = 0.2
	// autoSwitchGain is how much faster (predicted time per byte) another
	// rung must be to be switched to: measurements are noisy, and a switch
	// on a 1% difference would flap; the zstd levels' ratios differ by
	// less than 10%, which on a slow link is what a higher level is for.
	autoSwitchGain = 0.95
	// autoCPUWeight is what a ns of compression costs beyond its share
	// of the stream's time: the CPU it takes from the other streams, ssh
	// and the far side, so that of two rungs as fast the cheaper wins.
	autoCPUWeight = 0.1
	// autoStealWeight is what a ns of compression costs the other work
	// per unit of measured contention above 1 (cpuWeight), and
	// autoMaxContention bounds the contention one window may show (a
	// window the scheduler starved is not the machine's load).
	autoStealWeight   = 1.0
	autoMaxContention = 4.0
	// autoSerialPerContention is how fast the codec's time stops
	// overlapping the link's as its core is shared: the share of the
	// shorter of the two that adds to the longer is this times the
	// contention above 1, at most all of it (see predict).
	autoSerialPerContention = 2.5
	// autoEWMA weighs a new window against what was known (1: only the new
	// window).
	autoEWMA = 0.5
	// autoRetryWindows is how many windows a stream sends as none before
	// one goes as lz4 again: the figures that made none the choice are
	// measured only while compressing.
	autoRetryWindows = 64
	// autoNoShrink is the ratio at or above which a window's data is
	// taken for incompressible (a frame the codec did not shrink goes
	// raw and books ratio 1).
	autoNoShrink = 0.98
	// autoProbeEvery is how many windows a stream sends on a compressing
	// rung before it sends autoProbeWindows on the rung below, unless
	// that rung was measured in the last autoMeasFresh windows (or the
	// rung's probe gap, see autoProbeMaxGap). The first autoMeasSkip windows
	// on a rung are not measured: the frame queue, the SSH window and
	// the sockets' buffers (a few MiB) held frames of the old rung, and
	// the receiver's requests, which pace the sender, follow what it
	// received. autoMeasFresh is how many windows a rung's measured time
	// stays fresh.
	autoProbeEvery   = 8
	autoProbeWindows = 8
	// autoProbeMaxGap bounds the windows between two probes of the same
	// rung below: each probe that finds that rung slower doubles the gap
	// from autoMeasFresh, since a probe sends 8 windows at the slower
	// rung's pace (on bigfile's text at 1 Gbit/s, one probe every 72
	// windows sent a ninth of the text uncompressed); a probe the rung
	// below wins, or a switch down on its measured time, brings it back
	// to autoMeasFresh. A switch the model made does not: a window or
	// two on the rung below, while the model guessed the link, say
	// nothing of the rungs' measured times.
	autoProbeMaxGap = 256
	autoMeasSkip    = 4
	autoMeasFresh   = 64
	// autoProbeLost is how many times slower than the rung it probes
	// from a probed rung must measure for the next probe to wait
	// autoProbeMaxGap windows at once: on bigfile's text at 1 Gbit/s none
	// measured 2.5 times lz4's time, and the second probe, 128 windows
	// on, sent 8 more windows uncompressed to find the same.
	autoProbeLost = 2.0
	// autoGuessAfterBytes is how many wire bytes a stream sends before a
	// link never seen blocking is guessed from its writes: the pipe, the
	// SSH channel's window (2 MiB in OpenSSH) and the sockets' buffers
	// take the first megabytes at once whatever the link, and on the lab
	// at 100 Mbit/s the first window's guess sent the next two as none.
	autoGuessAfterBytes = 4 << 20
	// autoHeadroom is the share of a link-bound stream's time on the
	// wire that a dearer rung's codec may take (its wall time per raw
	// byte, contention included) for the rung to be taken on any gain
	// the model predicts, not only on autoSwitchGain's: the codec keeps
	// well ahead of the link, and the bytes it saves are the time saved.
	// At 100 Mbit/s zstd:3 sent 6% fewer bytes than zstd:1 on small
	// files and took 7% less wall time, which the model predicted as a
	// gain of 2 to 3%.
	autoHeadroom = 0.5
	// autoMeasShare is the share of a window's raw bytes that must have
	// gone through the current rung for the window to measure the rung.
	autoMeasShare = 0.9
	// autoMeasKeep is how many of a rung's measured windows its measured
	// time is the median of. A single window can be several times
	// slower than its neighbours without the rung being so: the
	// scheduler held the codec's thread (a 1 MiB lz4 window of 24 ms of
	// CPU among windows of 3 to 5), or the link stalled for a moment
	// (97 ns per byte among windows of 20 to 35). Folded into an
	// average, such a window made the rung below look faster, and as
	// the stream then no longer measured the rung it left, kept it off
	// that rung for as long as the measurement stayed fresh.
	autoMeasKeep = 3
)

// frameSample is what sending one frame cost, as the frame writer measured
// it.
type frameSample struct {
	// rung is the ladder rung the frame was compressed with (0: none).
	rung int
	// raw and enc are the frame's bytes before and after compression (enc
	// equals raw for a frame sent uncompressed).
	raw, enc int
	// compress is the time spent compressing, write the time the stream's
	// Write took: while the link is the bottleneck, the time it takes
	// to accept the frame.
	compress, write time.Duration
	// compressCPU is the CPU time of the compression (0: not measured):
	// compress over it is how contended the core was.
	compressCPU time.Duration
	// idle is the time the sending goroutine waited for this frame (the
	// producer had nothing ready): with compress and write, the wall
	// time the frame took the stream.
	idle time.Duration
	// skipped marks a frame sent uncompressed because most of it is
	// already-compressed data, without a trial: it measures the link,
	// not a codec.
	skipped bool
}

// autoController chooses the codec of --compress auto's frames, in the
// spirit of zstd's --adapt: it measures, per window of frames, what
// compressing cost (CPU time per raw byte, and the wall time over it:
// how much of the core other work took) and saved (ratio), and how long
// the link took per byte sent. After each window it picks the rung that minimizes the predicted
// time per raw byte, max(compress cost, ratio × link time) (compressing
// one frame overlaps with the link sending the previous ones) plus the
// CPU time the codec takes from the other work, weighed more the more
// contended its core (cpuWeight: its wall time over its CPU time), switching
// only for a gain of 5% or more up the ladder (down, for any gain: as
// fast and cheaper). The link's time is what the receiver measured while
// it received slower than this side wrote (peerLink: the channel's and
// the sockets' buffers take the first megabytes at once, so a slow link
// does not block the writes until they are full); else it is measured in windows
// where Write took a fair share of the send time (the link is the
// bottleneck); while compression is the bottleneck only cheaper rungs
// are considered, and if the link was never seen blocking it is guessed
// as fast as the writes went (once more than the buffers on the way hold
// has been sent, or the receiver has reported), so the stream moves down
// the ladder, to none if need be, where any window measures the link:
// a fast link with busy cores ends on none, a slow one on a level as high
// as the CPU keeps up with; where the receiver measured the link as the
// bottleneck, a dearer rung whose codec keeps well ahead of it (headroom)
// is taken on any predicted gain. The model is checked against each rung's
// measured wall time per raw byte of the data at hand (measTime): a
// faster rung below is taken, a dearer one that measured no faster is
// not, and a compressing rung probes the one below now and then. Its
// decisions are a pure function of the samples it was given: no clock.
// Not safe for concurrent use: one frame writer's sending goroutine owns
// it.
type autoController struct {
	rung int
	// costScale and ratioScale map the priors onto this machine and this
	// data: measured over prior, on the rung last measured (the codec's
	// CPU time, or its wall time where the CPU time is not measured).
	costScale, ratioScale float64
	// lastRatio is the ratio the last window compressed reached, on
	// rung ratioRung: at autoNoShrink or more, the data did not shrink
	// there, and is not expected to on a higher rung.
	lastRatio float64
	ratioRung int
	// linkNsPerByte is the link's time per wire byte: measured while
	// link-bound (linkMeasured), else a guess (0: none yet).
	linkNsPerByte float64
	linkMeasured  bool
	// noneAge counts the windows sent as none in a row: after
	// autoRetryWindows of them one goes as lz4, as what made none the
	// choice (the data's ratio, the codec's cost, the contention) is
	// measured only while compressing.
	noneAge int
	// peerNsPerByte is the link's time per wire byte as the receiver
	// measured it (peerLink) while it received slower than this side
	// wrote: the SSH channel's window and the sockets' buffers took the
	// writes at once, so they did not measure the link. 0 when the last
	// report showed the receiver keeping up.
	peerNsPerByte float64
	// The window being gathered.
	win autoWindow
	// measWin holds each rung's last measured windows, newest first,
	// measN how many of them are valid (autoMeasKeep at most; 0: not
	// measured), and measAge the windows decided since the newest. A
	// window is the time the stream took while on the rung, whatever
	// bounded it (the link, the codec, the receiver, the round trips):
	// the model's predictions rest on what the samples say of the link
	// and the codec, and a pipeline bound by round trips or by cores
	// shared with the receiver makes the link look slower the more a
	// rung compresses; the measured windows are what each rung achieved
	// (measTime).
	measWin [autoRungs][autoMeasKeep]measuredWindow
	measN   [autoRungs]int
	measAge [autoRungs]int
	// onRung counts the windows decided on the current rung in a row
	// (below autoMeasSkip, the window being gathered is not measured);
	// probe is what is left of a probe of the rung below (0: none),
	// probeFrom the rung it probes from.
	onRung, probe, probeFrom int
	// probeGap is, for each rung, how many windows after the rung below
	// was last measured it is probed again from there (0:
	// autoMeasFresh).
	probeGap [autoRungs]int
	// contention is the codec's wall time over its CPU time, the median
	// of the last compressed windows' figures kept in contentions (1: it
	// had a core to itself, or not measured): above 1, other work waited
	// for the core, and the CPU compression takes is taken from it (ssh,
	// the other streams, the far side on shared cores). costs keeps the
	// last compressed windows' costScale figures likewise.
	contention         float64
	costs, contentions recentFigures
	// decisions counts the windows decided, for tests and the report.
	decisions int
	// sent counts the wire bytes of the windows decided, the one being
	// decided included; peerSeen is set by the receiver's first report.
	sent     int64
	peerSeen bool
	// traceID numbers the controller in AutoTraceEnv's lines (0: not yet).
	traceID int64
}

// recentFigures keeps the last autoMeasKeep figures of one kind, newest
// first.
type recentFigures struct {
	v [autoMeasKeep]float64
	n int
}

// add keeps v and returns the figures' robustTime: their median, the
// lower of two.
func (f *recentFigures) add(v float64) float64 {
	copy(f.v[1:], f.v[:len(f.v)-1])
	f.v[0] = v
	f.n = min(f.n+1, len(f.v))
	ts := f.v // robustTime sorts: a copy
	return robustTime(ts[:f.n])
}

// measuredWindow is one measured window's wall time, in ns per byte: per
// wire byte where the link bounded the window (its time scales with the
// bytes sent), else per raw byte (the codec, the producer or the round
// trips bounded it).
type measuredWindow struct {
	ns      float64
	perWire bool
}

// autoWindow is what the frames of one window cost.
type autoWindow struct {
	raw, compRaw, compEnc          int
	enc                            int
	compress, write, compCPU, idle time.Duration
}

// linkBound reports whether the stream's writes took a fair share of the
// window's send time (autoLinkBound): the link, or the far side, held
// the stream back.
func (w *autoWindow) linkBound() bool {
	return float64(w.write) >= autoLinkBound*float64(w.compress+w.write)
}

// wall is the window's wall time on the stream: compressing, writing and
// waiting for frames to send.
func (w *autoWindow) wall() time.Duration { return w.compress + w.write + w.idle }

func newAutoController() *autoController {
	return &autoController{rung: autoStartRung, costScale: 1, ratioScale: 1, contention: 1}
}

// current returns the rung the next frame is compressed with.
func (a *autoController) current() int { return a.rung }

// trialRatio feeds the ratio lz4 reached in a classifier's trial, which
// tells the data's compressibility even while the stream sends none.
func (a *autoController) trialRatio(r float64) {
	if r <= 0 {
		return
	}
	a.ratioScale = mix(a.ratioScale, r/autoPriors[1].ratio)
}

// peerLink feeds the receiver's measured time per wire byte over an
// interval in which it received slower than this side wrote, or in which
// this side's writes blocked for most of it: the link's (or the
// receiver's) time, whatever the writes took.
func (a *autoController) peerLink(nsPerByte float64) {
	a.peerSeen = true
	if nsPerByte > 0 {
		a.peerNsPerByte = mix(a.peerNsPerByte, nsPerByte)
	}
}

// peerCaughtUp tells the controller that over the receiver's last
// interval this side was the bottleneck, the receiver getting the bytes
// as they were sent, nsPerByte apart (the interval's wall time per wire
// byte; 0: not known): the link is at least that fast, and a link
// measured slower is taken to be that fast. A link measured before stays
// measured: the reports of a stream that mostly waits for the receiver's
// requests, on a link several streams share, alternate between the two
// kinds, and a link unmeasured at each would be guessed from the writes,
// which the buffers on the way take at once (at 100 Mbit/s the stream
// went to none for two windows out of every six).
func (a *autoController) peerCaughtUp(nsPerByte float64) {
	a.peerNsPerByte, a.peerSeen = 0, true
	if a.linkMeasured && nsPerByte > 0 {
		a.linkNsPerByte = min(a.linkNsPerByte, nsPerByte)
	}
}

// observe books one frame and, when a window is complete, decides the
// rung of the next frames. It reports whether the rung changed.
func (a *autoController) observe(s frameSample) bool {
	w := &a.win
	w.raw += s.raw
	w.enc += s.enc
	w.write += s.write
	w.idle += s.idle
	if !s.skipped && s.rung == a.rung {
		w.compRaw += s.raw
		w.compEnc += s.enc
		w.compress += s.compress
		w.compCPU += s.compressCPU
	}
	if w.raw < autoWindowBytes {
		return false
	}
	prev := a.rung
	a.sent += int64(w.enc)
	a.measure()
	if a.probe > 0 {
		a.probeStep(prev)
	} else {
		a.decide(prev)
	}
	if a.rung == prev {
		a.onRung++
	} else {
		a.onRung = 0
	}
	a.win = autoWindow{}
	a.decisions++
	return a.rung != prev
}

// measure books the window's wall time as the current rung's, when most
// of the window went through it, and ages the other rungs'
// measurements. A rung's first autoMeasSkip windows after a switch are
// not measured.
func (a *autoController) measure() {
	for r := range a.measAge {
		a.measAge[r]++
	}
	w := &a.win
	if w.raw == 0 || float64(w.compRaw) < autoMeasShare*float64(w.raw) {
		return
	}
	if a.onRung < autoMeasSkip {
		return // what the queues and buffers held went at the old rung's pace
	}
	if w.enc == 0 || w.wall() <= 0 {
		return
	}
	r := a.rung
	if a.measAge[r] > autoMeasFresh {
		a.measN[r] = 0
	}
	h := &a.measWin[r]
	copy(h[1:], h[:len(h)-1])
	wall := float64(w.wall())
	if w.linkBound() || a.peerNsPerByte > 0 {
		h[0] = measuredWindow{ns: wall / float64(w.enc), perWire: true}
	} else {
		h[0] = measuredWindow{ns: wall / float64(w.raw)}
	}
	a.measN[r] = min(a.measN[r]+1, autoMeasKeep)
	a.measAge[r] = 0
}

// forget drops rung r's measured time: it is measured again from its
// next windows.
func (a *autoController) forget(r int) { a.measN[r] = 0 }

// measTime returns rung r's measured wall time per raw byte of the data
// at hand (ns; 0: not measured): the median of its measured windows,
// those the link bounded taken per wire byte times the ratio the model
// expects of the rung now. Per raw byte, a link-bound window's time says
// as much of its data as of the rung: on a hosting account over a
// 100 Mbit/s link, where the windows' ratios ran from 0.13 to 0.6 as
// text and media alternated, zstd:1's windows on the less compressible
// data measured twice lz4's earlier ones, and the streams compressed
// 83 MiB of the account's text with lz4. The link takes the same time
// per wire byte of any data, as a codec (or a producer, or the round
// trips) the same time per raw byte.
func (a *autoController) measTime(r int) float64 {
	n := a.measN[r]
	if n == 0 {
		return 0
	}
	var ts [autoMeasKeep]float64
	for i, m := range a.measWin[r][:n] {
		ts[i] = m.ns
		if m.perWire {
			ts[i] *= a.ratio(r)
		}
	}
	return robustTime(ts[:n])
}

// robustTime returns the median of the times per byte in ts (1 to
// autoMeasKeep of them), the lower of two: what else ran only ever
// stretches a window's time, never shrinks it. It sorts ts.
func robustTime(ts []float64) float64 {
	slices.Sort(ts)
	if len(ts) == 2 {
		return ts[0]
	}
	return ts[len(ts)/2]
}

// fresh reports whether rung r's measured time is recent enough to
// weigh against the model.
func (a *autoController) fresh(r int) bool {
	return a.measN[r] > 0 && a.measAge[r] <= autoMeasFresh
}

// probeStep runs a probe's windows; at its end the stream stays on the
// rung below when that measured faster, else goes back.
func (a *autoController) probeStep(prev int) {
	if a.probe--; a.probe > 0 {
		a.trace(prev, 0, "probe")
		return
	}
	below, from := a.measTime(a.rung), a.measTime(a.probeFrom)
	if a.fresh(a.rung) && a.fresh(a.probeFrom) && below < from {
		a.probeGap[a.probeFrom] = 0
		a.trace(prev, 0, "probe,lower")
		return
	}
	a.rung = a.probeFrom
	g := &a.probeGap[a.rung]
	*g = min(2*max(*g, autoMeasFresh), autoProbeMaxGap)
	if below >= autoProbeLost*from && from > 0 {
		*g = autoProbeMaxGap
	}
	a.trace(prev, 0, "probe,back")
}

// probeDue reports whether the rung below the current one is to be probed:
// it was never measured, or not in the last probeGap windows.
func (a *autoController) probeDue() bool {
	r := a.rung - 1
	return a.measN[r] == 0 || a.measAge[r] > max(a.probeGap[a.rung], autoMeasFresh)
}

func (a *autoController) decide(prev int) {
	w := &a.win
	if a.rung > 0 && w.compRaw > 0 {
		p := autoPriors[a.rung]
		// The codec's CPU time per byte where it is measured (its wall
		// time, which a busy scheduler stretches, is that times the
		// contention), else its wall time.
		cost := float64(w.compress) / float64(w.compRaw)
		if w.compCPU > 0 {
			cost = float64(w.compCPU) / float64(w.compRaw)
		}
		// The median of the last windows' (the lower of two), each
		// within 4× of the figure before: one window the scheduler
		// starved, or whose CPU time a busy host stretched, is not the
		// codec's speed, nor the machine's load.
		c := min(max(cost/p.nsPerByte, a.costScale/4), a.costScale*4)
		a.costScale = a.costs.add(max(c, 0.001))
		a.lastRatio, a.ratioRung = float64(w.compEnc)/float64(w.compRaw), a.rung
		a.ratioScale = mix(a.ratioScale, a.lastRatio/p.ratio)
		if w.compCPU > 0 {
			a.contention = a.contentions.add(min(max(float64(w.compress)/float64(w.compCPU), 1), autoMaxContention))
		}
	}
	busy := w.compress + w.write
	if busy <= 0 || w.enc == 0 {
		a.trace(prev, 0, "idle")
		return
	}
	perByte := float64(busy) / float64(w.enc)
	top := len(autoLadder) - 1 // the highest rung to consider
	link := "link-bound"
	switch {
	case w.linkBound():
		// Link-bound: the send time per byte is the link's.
		if !a.linkMeasured {
			a.linkNsPerByte = 0
		}
		a.linkNsPerByte = mix(a.linkNsPerByte, perByte)
		a.linkMeasured = true
	case a.linkMeasured:
		// Compression holds the stream back: the link is at least as
		// fast as this window went, waits for the producer included
		// (the link carried the bytes at that pace, not at the pace
		// of the codec's and the writes' time alone), and a dearer
		// rung would be slower.
		a.linkNsPerByte = min(a.linkNsPerByte, float64(w.wall())/float64(w.enc))
		top, link = a.rung, "codec-bound"
	case a.sent < autoGuessAfterBytes && !a.peerSeen:
		// The link was never seen blocking, and the writes so far may
		// all have gone into the buffers on the way: they say nothing
		// of it until more than those hold has been sent, or the
		// receiver has reported.
		a.trace(prev, perByte, "codec-bound,unknown")
		return
	default:
		// Compression holds the stream back and the link was never
		// seen blocking: guess it as fast as this window's writes went
		// (it took the bytes as soon as they came), which sends the
		// stream down the ladder, to none if need be, where any window
		// measures the link.
		a.linkNsPerByte = float64(w.write) / float64(w.enc)
		top, link = a.rung, "codec-bound,guess"
	}
	if a.peerNsPerByte > 0 {
		// The receiver got the bytes slower than they were written:
		// the link is the bottleneck at the rate it received at, and
		// every rung is worth considering.
		a.linkNsPerByte, a.linkMeasured = a.peerNsPerByte, true
		top, link = len(autoLadder)-1, link+",peer"
	}
	best, cur := a.rung, a.predict(a.rung)
	bestT := cur
	for r := range top + 1 {
		if t := a.predict(r); t < bestT {
			best, bestT = r, t
		}
	}
	if best > a.rung && a.rung > 0 && a.fresh(a.rung-1) {
		// Climbing where the rungs below have measured times: one rung
		// at a time, each measured before the next (the model's view of
		// the link may be what compressing more made it).
		if !a.fresh(a.rung) {
			best, bestT = a.rung, cur
		} else {
			best, bestT = a.rung+1, a.predict(a.rung+1)
		}
	} else if best > a.rung+1 && a.fresh(a.rung) {
		best, bestT = a.rung+1, a.predict(a.rung+1)
	}
	switch {
	case a.rung > 0 && a.fresh(a.rung-1) && a.fresh(a.rung) && a.measTime(a.rung-1) < a.measTime(a.rung):
		// The rung below measured faster, whatever the model says
		// (cheaper needs no gain, as in the model's own choice).
		a.probeGap[a.rung] = 0
		a.rung, link = a.rung-1, link+",measured-lower"
	case best > a.rung && a.fresh(best) && a.fresh(a.rung) && a.measTime(best) > autoSwitchGain*a.measTime(a.rung):
		// A dearer rung the model prefers did not measure faster.
		link += ",measured-stay"
	case best < a.rung && a.fresh(best) && a.fresh(a.rung) && autoSwitchGain*a.measTime(best) > a.measTime(a.rung):
		// A cheaper rung the model prefers measured slower by more
		// than the switching margin. The model's link is a guess
		// whenever the receiver keeps up (which compressing may be
		// what allows): on bigfile's text at 1 Gbit/s, lz4 measured
		// 3.9 ns per byte and none 8.8, and each time the receiver
		// caught up the guess sent 3 windows as none.
		link += ",measured-stay"
	case bestT < autoSwitchGain*cur || (best < a.rung && bestT <= cur):
		a.rung = best // a cheaper rung needs no gain: as fast, less CPU
	case best > a.rung && bestT < cur && a.peerNsPerByte > 0 && a.headroom(best):
		// The receiver measured the link as the bottleneck, and the
		// dearer rung's codec keeps well ahead of it.
		a.rung, link = best, link+",headroom"
	}
	if a.rung == prev && a.rung > 0 && a.onRung >= autoProbeEvery && a.probeDue() {
		// Measure the rung below now and then: the model's view of
		// the link may favour the dearer rung where it is not faster.
		a.probe, a.probeFrom = autoProbeWindows, a.rung
		a.rung, link = a.rung-1, link+",probe"
	}
	if a.rung == 0 && w.compRaw > 0 {
		if a.noneAge++; a.noneAge >= autoRetryWindows {
			// What lz4 measured before the stream left it is what the
			// retry is to measure again: until its own windows are
			// measured, the model decides.
			a.noneAge, a.rung, link = 0, 1, link+",retry"
			a.forget(1)
		}
	} else if a.rung > 0 {
		a.noneAge = 0
	}
	a.trace(prev, perByte, link)
}

// predict returns rung r's predicted time per raw byte, in ns: the larger
// of its compression cost (CPU time: the time it takes on a core of its
// own) and the link's time for what it sends, plus serial() of the
// smaller, plus cpuWeight of the CPU time the rung costs the machine, the
// codec's and what its wire bytes cost ssh and the receiver
// (autoWireNsPerByte): on shared cores, the CPU taken from the other
// streams and the rest of the machine, or given back to them.
func (a *autoController) predict(r int) float64 {
	p := autoPriors[r]
	ratio := a.ratio(r)
	cost := p.nsPerByte * a.costScale
	wire := ratio * a.linkNsPerByte
	return max(cost, wire) + a.serial()*min(cost, wire) + a.cpuWeight()*(cost+autoWireNsPerByte*ratio)
}

// headroom reports whether rung r's codec would take at most autoHeadroom
// of the time its wire bytes take the link: its wall time per raw byte
// (its CPU time scaled to this machine, times the contention) against
// the link's time for what it sends.
func (a *autoController) headroom(r int) bool {
	return autoPriors[r].nsPerByte*a.costScale*a.contention <= autoHeadroom*a.ratio(r)*a.linkNsPerByte
}

// ratio returns the ratio (wire over raw bytes) rung r is expected to
// reach on the data at hand: its prior scaled by what the rungs measured.
func (a *autoController) ratio(r int) float64 {
	if r == 0 || (r > a.ratioRung && a.lastRatio >= autoNoShrink) {
		// Data the rung measured did not shrink (random bytes, media
		// the classifier let through) is not assumed to shrink on a
		// higher rung: the priors' proportions hold for text.
		return 1
	}
	return min(1, autoPriors[r].ratio*a.ratioScale)
}

// serial is the share of the codec's time and the link's, the shorter of
// the two, that does not overlap the other (0 to 1). On a core of its own
// the codec compresses a frame while the link sends the ones before, and
// the longer of the two is the stream's time. On cores it shares with
// what the link's time is made of (ssh's crypto, the receiver, on a
// loopback pull or an end whose cores are all busy), the codec runs
// instead of that work, not beside it, and the two add up: there the
// link's time per byte (the receiver's waits) is the CPU-bound pipeline's
// pace. A pull of 1,000,000 small files over a loopback sshd, at a
// contention of 1.3 to 2.3, compressed a quarter of its windows on a
// model that saw lz4's fewer wire bytes as time saved beside its cost,
// and took 2 s more wall time and 4.3 s more far-side CPU than none.
func (a *autoController) serial() float64 {
	return min(1, autoSerialPerContention*(a.contention-1))
}

// cpuWeight is what a ns of the codec's CPU time costs beyond its share of
// the stream's time: autoCPUWeight on a core of its own, and
// autoStealWeight more per unit of contention above 1, as on a machine
// whose cores the codec shares every ns of CPU it takes is one that the
// other work (ssh's crypto, the receiver, the other streams) waits. It
// weighs the CPU time, not the wall time: a contended codec's wall time
// is long because the others ran meanwhile, and counting that share as
// taken from them would count it twice (a codec that a busy scheduler
// held at 4× its CPU time would be charged 12× its CPU, and a 1 Gbit/s
// link whose ssh and receiver are CPU-bound, where lz4's fewer wire
// bytes save more CPU than lz4 takes, would get none).
func (a *autoController) cpuWeight() float64 {
	return autoCPUWeight + autoStealWeight*(a.contention-1)
}

// mix is the EWMA step: old moved towards v by autoEWMA (v itself when
// old is unset).
func mix(old, v float64) float64 {
	if old == 0 {
		return v
	}
	return old + autoEWMA*(v-old)
}
