package transfer

import (
	"context"
	"fmt"
	"slices"
)

// FrameStats is what one side's frame writer sent on a stream, by codec:
// what --compress chose, and what the link and the codecs did. Summed
// over streams with Add.
type FrameStats struct {
	// Codecs has one entry per codec tried (in the order first used):
	// "none" for the frames sent without compressing them.
	Codecs []CodecStats
	// WireBytes is the frames' bytes on the wire, headers included.
	WireBytes int64
	// WriteSeconds is the time the sending goroutine spent in the
	// stream's Write: while the link is the bottleneck, the time the link
	// took to accept the frames.
	WriteSeconds float64
	// PeerBytes and PeerSeconds are the frame bytes the receiver got, and
	// the time it took on its clock, over the intervals of its reports
	// (msgRate, protocol 8) in which the link was the bottleneck: their
	// ratio is the link's throughput, which the writes alone overstate
	// while the buffers on the way fill. Zero when it sent no reports
	// (a push's receiver) or the link was never the bottleneck.
	PeerBytes   int64
	PeerSeconds float64
	// Decisions is how many times --compress auto chose a codec (once per
	// window of frames); Final is the codec it last chose ("" with a
	// fixed --compress).
	Decisions int
	Final     string
}

// CodecStats is what frames of one codec carried.
type CodecStats struct {
	// Codec is the codec in --compress form ("zstd:3", "lz4", "none").
	Codec string
	// Frames is the number of frames tried with it; Files the number of
	// files whose data starts in one of them.
	Frames, Files int64
	// RawBytes is the frames' data, WireBytes what they took on the wire
	// (headers included; a frame the codec did not shrink went out raw
	// and counts at its raw size).
	RawBytes, WireBytes int64
	// CompressSeconds is the wall time spent compressing them, on one
	// core (other work on the machine included); CompressCPUSeconds the
	// CPU time of it (--compress auto on Linux, else 0): the rest of the
	// wall time the core ran other work.
	CompressSeconds    float64
	CompressCPUSeconds float64
}

// Add adds o's figures into s, codec by codec.
func (s *FrameStats) Add(o FrameStats) {
	s.WireBytes += o.WireBytes
	s.WriteSeconds += o.WriteSeconds
	s.PeerBytes += o.PeerBytes
	s.PeerSeconds += o.PeerSeconds
	s.Decisions += o.Decisions
	if o.Final != "" {
		s.Final = o.Final
	}
	for _, c := range o.Codecs {
		i := slices.IndexFunc(s.Codecs, func(x CodecStats) bool { return x.Codec == c.Codec })
		if i < 0 {
			s.Codecs = append(s.Codecs, CodecStats{Codec: c.Codec})
			i = len(s.Codecs) - 1
		}
		x := &s.Codecs[i]
		x.Frames += c.Frames
		x.Files += c.Files
		x.RawBytes += c.RawBytes
		x.WireBytes += c.WireBytes
		x.CompressSeconds += c.CompressSeconds
		x.CompressCPUSeconds += c.CompressCPUSeconds
	}
}

// SentStats returns what this side of the stream has sent so far (a
// push's data).
func (c *Conn) SentStats() FrameStats { return c.enc.fw.coder.Stats() }

// PeerStats asks the server what it has sent on this stream so far (a
// pull's data): its FrameStats (protocol 7). Its error is a stream error.
func (c *Conn) PeerStats(ctx context.Context) (_ FrameStats, err error) {
	defer c.watch(ctx)(&err)
	c.pending.Add(1)
	defer c.pending.Add(-1)
	c.enc.byte(msgStats)
	if err := c.enc.flush(); err != nil {
		return FrameStats{}, c.fail(err)
	}
	if err := c.dec.status(); err != nil {
		return FrameStats{}, c.fail(err)
	}
	s, err := c.dec.frameStats()
	if err != nil {
		return FrameStats{}, c.fail(err)
	}
	return s, nil
}

// Wire form of a stats reply, after its status byte (all uvarints but the
// names; durations in microseconds):
//
//	wireBytes, writeMicros, peerBytes, peerMicros, decisions, final string, count
//	count × (codec string, frames, files, rawBytes, wireBytes, compressMicros, compressCPUMicros)
func (e *encoder) frameStats(s FrameStats) {
	e.uvarint(uint64(s.WireBytes))
	e.uvarint(uint64(s.WriteSeconds * 1e6))
	e.uvarint(uint64(s.PeerBytes))
	e.uvarint(uint64(s.PeerSeconds * 1e6))
	e.uvarint(uint64(s.Decisions))
	e.str(s.Final)
	e.uvarint(uint64(len(s.Codecs)))
	for _, c := range s.Codecs {
		e.str(c.Codec)
		e.uvarint(uint64(c.Frames))
		e.uvarint(uint64(c.Files))
		e.uvarint(uint64(c.RawBytes))
		e.uvarint(uint64(c.WireBytes))
		e.uvarint(uint64(c.CompressSeconds * 1e6))
		e.uvarint(uint64(c.CompressCPUSeconds * 1e6))
	}
}

// maxStatsCodecs bounds a stats reply's codec count: a writer tries at
// most the wire codecs' levels.
const maxStatsCodecs = 64

func (d *decoder) frameStats() (FrameStats, error) {
	var s FrameStats
	var err error
	u := func() int64 {
		if err != nil {
			return 0
		}
		var v uint64
		if v, err = d.uvarint(); err == nil && v > 1<<62 {
			err = fmt.Errorf("%w: stats reply: %d out of range", ErrProtocol, v)
		}
		return int64(v)
	}
	str := func() string {
		if err != nil {
			return ""
		}
		var v string
		v, err = d.str()
		return v
	}
	s.WireBytes = u()
	s.WriteSeconds = float64(u()) / 1e6
	s.PeerBytes = u()
	s.PeerSeconds = float64(u()) / 1e6
	s.Decisions = int(u())
	s.Final = str()
	n := u()
	if err == nil && n > maxStatsCodecs {
		err = fmt.Errorf("%w: stats reply: %d codecs", ErrProtocol, n)
	}
	for i := int64(0); i < n && err == nil; i++ {
		var c CodecStats
		c.Codec = str()
		c.Frames, c.Files, c.RawBytes, c.WireBytes = u(), u(), u(), u()
		c.CompressSeconds = float64(u()) / 1e6
		c.CompressCPUSeconds = float64(u()) / 1e6
		s.Codecs = append(s.Codecs, c)
	}
	if err != nil {
		return FrameStats{}, err
	}
	return s, nil
}
