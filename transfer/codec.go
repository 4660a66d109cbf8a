package transfer

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec names a compression format applied to one wire frame. Its numeric
// value is written in every frame header, so that one stream may mix codecs;
// the values are part of the wire format and must not change.
type Codec uint8

// The codecs. Each frame is compressed on its own:
//   - CodecLZ4 uses the LZ4 block format (lz4 block format description,
//     github.com/lz4/lz4 doc/lz4_Block_format.md) via pierrec/lz4/v4;
//   - CodecZstd is one Zstandard frame (RFC 8878) via klauspost/compress;
//   - CodecGzip is one gzip member (RFC 1952) via klauspost/compress.
const (
	CodecNone Codec = 0
	CodecLZ4  Codec = 1
	CodecZstd Codec = 2
	CodecGzip Codec = 3
	codecMax  Codec = CodecGzip

	// CodecAuto is --compress auto: not a wire codec (no frame carries
	// it), but the choice of one per frame (frameCoder): none for
	// already-compressed data, else lz4 or a zstd level chosen from the
	// measured link and codec throughputs (autoController).
	CodecAuto Codec = 0xff
)

// codecNames lists the codecs by name, in Codec order.
var codecNames = []string{"none", "lz4", "zstd", "gzip"}

// String returns the codec's name as used by --compress.
func (c Codec) String() string {
	if c <= codecMax {
		return codecNames[c]
	}
	if c == CodecAuto {
		return "auto"
	}
	return "codec(" + strconv.Itoa(int(c)) + ")"
}

// CodecNames returns the names of the wire codecs, which the handshake's
// reply lists; --compress also accepts "auto" (CompressionNames).
func CodecNames() []string { return append([]string(nil), codecNames...) }

// CompressionNames returns the names --compress accepts, for help texts:
// "auto" and the wire codecs.
func CompressionNames() []string { return append([]string{"auto"}, codecNames...) }

// Compression is a codec and its level, as set by --compress CODEC[:LEVEL].
// Level 0 means the codec's default: zstd 1 (fastest), gzip 1, lz4 fast
// (non-HC). The zero value is no compression. It implements pflag.Value.
type Compression struct {
	// Codec is the compression format.
	Codec Codec
	// Level is the codec's level; 0 is its default.
	Level int
}

// DefaultCompression is auto: the codec chosen per file and adapted to
// what the run measures. A fixed default cannot fit both ends: on the
// 1 Gbit/s lab link with both ends on 2 cores, none (6.55 s) and lz4
// (6.41 s) beat zstd:1 (7.01 s) on the hosting profile, while on a slow
// link the bytes saved are what counts.
var DefaultCompression = Compression{Codec: CodecAuto}

// ParseCompression parses "auto", "none", "lz4", "zstd", "gzip", the
// codecs optionally followed by ":LEVEL" (zstd 1–22, gzip 1–9, lz4 1–9
// selects LZ4 HC at that depth). An unknown name wraps ErrUnknownCodec
// and lists the valid ones.
func ParseCompression(s string) (Compression, error) {
	name, lvl, hasLevel := strings.Cut(strings.ToLower(strings.TrimSpace(s)), ":")
	if name == "auto" {
		if hasLevel {
			return Compression{}, fmt.Errorf("compression auto takes no level")
		}
		return Compression{Codec: CodecAuto}, nil
	}
	c := Compression{Codec: 254}
	for i, n := range codecNames {
		if n == name {
			c.Codec = Codec(i)
		}
	}
	if c.Codec == 254 {
		return Compression{}, fmt.Errorf("%w %q (valid: %s)", ErrUnknownCodec, name, strings.Join(CompressionNames(), ", "))
	}
	switch c.Codec { // the default level, explicit, so "zstd" reads as "zstd:1"
	case CodecZstd, CodecGzip:
		c.Level = 1
	}
	if hasLevel {
		l, err := strconv.Atoi(lvl)
		if err != nil {
			return Compression{}, fmt.Errorf("compression level %q: not a number", lvl)
		}
		max := map[Codec]int{CodecNone: 0, CodecLZ4: 9, CodecZstd: 22, CodecGzip: 9}[c.Codec]
		if l < 1 || l > max {
			if max == 0 {
				return Compression{}, fmt.Errorf("compression none takes no level")
			}
			return Compression{}, fmt.Errorf("compression level %d for %s: must be 1 to %d", l, c.Codec, max)
		}
		c.Level = l
	}
	return c, nil
}

// String returns the flag form, e.g. "zstd:3" or "none".
func (c Compression) String() string {
	if c.Level == 0 {
		return c.Codec.String()
	}
	return c.Codec.String() + ":" + strconv.Itoa(c.Level)
}

// Set parses s into c (pflag.Value).
func (c *Compression) Set(s string) error {
	v, err := ParseCompression(s)
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// Type returns the flag's type name for help output (pflag.Value).
func (c *Compression) Type() string { return "codec[:level]" }

// compressor compresses whole frames. Implementations are safe for
// concurrent use.
type compressor interface {
	// compress appends the compressed form of src to dst (whose bytes it
	// keeps: a frame header's room) and returns it; an lz4 block that does
	// not shrink appends nothing.
	compress(dst, src []byte) ([]byte, error)
}

// decompress decodes one frame of codec c into dst, which has length equal to
// the announced raw size; the payload must decode to exactly that many bytes.
func decompress(c Codec, dst, src []byte) error {
	switch c {
	case CodecNone:
		if len(src) != len(dst) {
			return fmt.Errorf("frame size %d != announced %d", len(src), len(dst))
		}
		copy(dst, src)
		return nil
	case CodecLZ4:
		n, err := lz4.UncompressBlock(src, dst)
		if err != nil {
			return fmt.Errorf("lz4: %w", err)
		}
		if n != len(dst) {
			return fmt.Errorf("lz4 frame decoded to %d bytes, announced %d", n, len(dst))
		}
		return nil
	case CodecZstd:
		d := zstdDecoder()
		out, err := d.DecodeAll(src, dst[:0])
		if err != nil {
			return fmt.Errorf("zstd: %w", err)
		}
		if len(out) != len(dst) || (len(out) > 0 && &out[0] != &dst[0]) {
			return fmt.Errorf("zstd frame decoded to %d bytes, announced %d", len(out), len(dst))
		}
		return nil
	case CodecGzip:
		zr := gzipReaders.Get().(*gzip.Reader)
		defer gzipReaders.Put(zr)
		if err := zr.Reset(bytes.NewReader(src)); err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		zr.Multistream(false)
		if _, err := io.ReadFull(zr, dst); err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		n, err := zr.Read(make([]byte, 1))
		if n != 0 {
			return fmt.Errorf("gzip frame decodes to more than announced %d bytes", len(dst))
		}
		if err != io.EOF { // the trailer's CRC-32 and size are checked at the end
			return fmt.Errorf("gzip: %w", err)
		}
		return nil
	}
	return fmt.Errorf("%w %d in frame", ErrUnknownCodec, c)
}

var gzipReaders = sync.Pool{New: func() any { return new(gzip.Reader) }}

var zstdDec struct {
	once sync.Once
	d    *zstd.Decoder
}

// zstdDecoder returns the process-wide zstd decoder used with DecodeAll
// (which is safe for concurrent use). Its memory is capped at maxFrameRaw so
// a hostile frame cannot make it allocate more.
func zstdDecoder() *zstd.Decoder {
	zstdDec.once.Do(func() {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxFrameRaw))
		if err != nil {
			panic(err) // only on invalid options
		}
		zstdDec.d = d
	})
	return zstdDec.d
}

// newCompressor returns the compressor for c.
func newCompressor(c Compression) (compressor, error) {
	switch c.Codec {
	case CodecNone:
		return nil, nil
	case CodecLZ4:
		return &lz4Compressor{level: c.Level}, nil
	case CodecZstd:
		lvl := c.Level
		if lvl == 0 {
			lvl = 1
		}
		z, err := zstdCompressorOf(lvl)
		if err != nil {
			return nil, err
		}
		return z, nil
	case CodecGzip:
		lvl := c.Level
		if lvl == 0 {
			lvl = 1
		}
		return &gzipCompressor{level: lvl}, nil
	}
	return nil, fmt.Errorf("%w %d", ErrUnknownCodec, c.Codec)
}

// zstdEncoders are the process-wide zstd encoders, kept per level and
// shared by every stream, so that the memory zstd takes grows with the
// number of frames compressed at once, not with the number of streams (a
// serve --listen endpoint serving hundreds of sessions) nor the levels a
// run has left. Each encoder has one state (WithEncoderConcurrency(1):
// klauspost's encoder allocates all its states up front); a compression
// takes a free encoder of its level or makes one, and gives it back. A
// sync.Pool would drop idle encoders at every collection and have each
// one made and warmed again, megabytes of allocation per frame on a
// stream that compresses one frame at a time, so the free lists keep
// them for the life of the process.
// Reaching the process only through one stream, an agent under sshd makes
// one encoder per level it uses.
//
// The window is capped at maxFrameRaw: every frame is compressed on its own
// and holds at most that much, so a larger window finds no more matches,
// while it multiplies the states' memory (one state, measured with
// runtime.MemStats after EncodeAll of 1 MiB of text: level 1 8.5 → 2.6 MiB,
// 3 17.6 → 3.6, 9 20.4 → 6.4, 19 50 → 36 MiB; the compressed sizes were
// identical).
var zstdEncoders struct {
	mu   sync.Mutex
	free map[int][]*zstd.Encoder // by level
}

// zstdCompressor compresses with the shared encoders of one level.
type zstdCompressor struct{ level int }

// zstdCompressorOf returns the compressor of level lvl, checking that
// klauspost accepts the level (it makes, and keeps, the first encoder).
func zstdCompressorOf(lvl int) (zstdCompressor, error) {
	z := zstdCompressor{lvl}
	e, err := z.take()
	if err != nil {
		return z, err
	}
	z.give(e)
	return z, nil
}

// take returns a free encoder of z's level, made if there is none.
func (z zstdCompressor) take() (*zstd.Encoder, error) {
	zstdEncoders.mu.Lock()
	free := zstdEncoders.free[z.level]
	if n := len(free); n > 0 {
		e := free[n-1]
		zstdEncoders.free[z.level] = free[:n-1]
		zstdEncoders.mu.Unlock()
		return e, nil
	}
	zstdEncoders.mu.Unlock()
	return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(z.level)),
		zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(maxFrameRaw), zstd.WithEncoderCRC(false))
}

// give returns e, taken from z, to the free encoders.
func (z zstdCompressor) give(e *zstd.Encoder) {
	zstdEncoders.mu.Lock()
	defer zstdEncoders.mu.Unlock()
	if zstdEncoders.free == nil {
		zstdEncoders.free = map[int][]*zstd.Encoder{}
	}
	zstdEncoders.free[z.level] = append(zstdEncoders.free[z.level], e)
}

func (z zstdCompressor) compress(dst, src []byte) ([]byte, error) {
	e, err := z.take()
	if err != nil {
		return nil, err
	}
	defer z.give(e)
	return e.EncodeAll(src, dst), nil
}

type lz4Compressor struct {
	level int
	mu    sync.Mutex
	c     lz4.Compressor
	hc    lz4.CompressorHC
}

func (l *lz4Compressor) compress(dst, src []byte) ([]byte, error) {
	bound := lz4.CompressBlockBound(len(src))
	keep := len(dst)
	if cap(dst) < keep+bound {
		dst = append(make([]byte, 0, keep+bound), dst...)
	}
	out := dst[keep : keep+bound]
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int
	var err error
	if l.level > 0 {
		l.hc.Level = lz4.CompressionLevel(1 << (8 + l.level))
		n, err = l.hc.CompressBlock(src, out)
	} else {
		n, err = l.c.CompressBlock(src, out)
	}
	if err != nil {
		return nil, fmt.Errorf("lz4: %w", err)
	}
	// n is 0 for an incompressible block
	return dst[:keep+n], nil
}

type gzipCompressor struct {
	level int
	pool  sync.Pool
}

func (g *gzipCompressor) compress(dst, src []byte) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	zw, _ := g.pool.Get().(*gzip.Writer)
	if zw == nil {
		var err error
		if zw, err = gzip.NewWriterLevel(buf, g.level); err != nil {
			return nil, err
		}
	} else {
		zw.Reset(buf)
	}
	defer g.pool.Put(zw)
	if _, err := zw.Write(src); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
