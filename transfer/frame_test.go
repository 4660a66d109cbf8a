package transfer

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// testCompressions are the codecs and levels the frame tests run through:
// every codec at its default level, and the extremes of each level range.
var testCompressions = []Compression{
	{CodecNone, 0},
	{CodecLZ4, 0}, {CodecLZ4, 1}, {CodecLZ4, 9},
	{CodecZstd, 0}, {CodecZstd, 3}, {CodecZstd, 22},
	{CodecGzip, 0}, {CodecGzip, 9},
}

// randomBytes returns n incompressible bytes, the same for the same seed.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// textBytes returns n bytes of PHP- and SQL-like text (see genText), the
// same for the same seed.
func textBytes(seed uint64, n int) []byte {
	var b bytes.Buffer
	genText(&b, rand.New(rand.NewPCG(seed, 2)), n)
	return b.Bytes()[:n]
}

var textWords = strings.Fields(`function return array public private static class
	$this $user $post $id $name $email $query $result $row $options wp_query get_option
	add_action esc_html echo isset empty foreach else elseif null true false require_once
	SELECT INSERT INTO VALUES FROM WHERE AND ORDER BY LIMIT wp_posts wp_options wp_users
	post_title post_content post_status publish draft admin customer order product price`)

// genText writes at least n bytes of text shaped like a hosting account's
// files: PHP lines with identifiers and numbers, and SQL INSERT rows with
// random ids, dates and hashes. zstd:1 shrinks it about threefold, lz4
// about twofold: on the low side of real PHP sources and dumps.
func genText(w *bytes.Buffer, r *rand.Rand, n int) {
	for w.Len() < n {
		switch r.IntN(3) {
		case 0:
			fmt.Fprintf(w, "INSERT INTO `wp_posts` VALUES (%d,%d,'%d-%02d-%02d %02d:%02d:%02d','", r.IntN(1e6), r.IntN(50),
				2000+r.IntN(25), 1+r.IntN(12), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60))
			for range 4 + r.IntN(12) {
				w.WriteString(textWords[r.IntN(len(textWords))])
				w.WriteByte(' ')
			}
			fmt.Fprintf(w, "','publish',%d,'%x');\n", r.IntN(1000), r.Uint64())
		default:
			w.WriteString(strings.Repeat("    ", r.IntN(4)))
			for range 2 + r.IntN(8) {
				w.WriteString(textWords[r.IntN(len(textWords))])
				if r.IntN(3) == 0 {
					fmt.Fprintf(w, "(%d)", r.IntN(10000))
				}
				w.WriteByte(' ')
			}
			w.WriteString(";\n")
		}
	}
}

// encodeFrames writes each of writes through a frameWriter with c, calling
// Flush after the writes whose index is in flushAfter, and returns the wire
// bytes.
func encodeFrames(t testing.TB, c Compression, writes [][]byte, flushAfter ...int) []byte {
	t.Helper()
	var wire bytes.Buffer
	fw, err := newFrameWriter(&wire, c)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range writes {
		if n, err := fw.Write(p); n != len(p) || err != nil {
			t.Fatalf("Write(%d bytes) = %d, %v", len(p), n, err)
		}
		for _, f := range flushAfter {
			if f == i {
				if err := fw.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	return wire.Bytes()
}

// decodeFrames reads wire through a frameReader to its end. The reader's
// goroutine is always drained, so that it does not outlive the call.
func decodeFrames(wire []byte) ([]byte, error) {
	fr := newFrameReader(bufio.NewReader(bytes.NewReader(wire)))
	defer drainFrames(fr)
	return io.ReadAll(fr)
}

// drainFrames consumes what fr's goroutine still has to deliver, so that it
// ends.
func drainFrames(fr *frameReader) {
	for fr.next() == nil {
	}
}

// frameHeader is one frame's header as found on the wire.
type frameHeader struct {
	codec          Codec
	rawLen, encLen uint64
}

// parseFrames splits wire into frame headers without decoding payloads.
func parseFrames(t testing.TB, wire []byte) []frameHeader {
	t.Helper()
	var hs []frameHeader
	r := bytes.NewReader(wire)
	for r.Len() > 0 {
		c, _ := r.ReadByte()
		raw, err := binary.ReadUvarint(r)
		if err != nil {
			t.Fatalf("frame %d: rawLen: %v", len(hs), err)
		}
		enc, err := binary.ReadUvarint(r)
		if err != nil {
			t.Fatalf("frame %d: encLen: %v", len(hs), err)
		}
		if _, err := r.Seek(int64(enc), io.SeekCurrent); err != nil || uint64(r.Len()) > uint64(len(wire)) {
			t.Fatalf("frame %d: seek: %v", len(hs), err)
		}
		hs = append(hs, frameHeader{Codec(c), raw, enc})
	}
	return hs
}

// rawFrame builds one frame from its header fields and payload, which need
// not agree with each other.
func rawFrame(codec byte, rawLen, encLen uint64, payload []byte) []byte {
	b := []byte{codec}
	b = binary.AppendUvarint(b, rawLen)
	b = binary.AppendUvarint(b, encLen)
	return append(b, payload...)
}

// validFrame builds a frame of codec c that decodes to exactly raw,
// compressed with c even when that does not shrink it.
func validFrame(t testing.TB, c Codec, raw []byte) []byte {
	t.Helper()
	p := compressWith(t, c, raw)
	return rawFrame(byte(c), uint64(len(raw)), uint64(len(p)), p)
}

// compressWith compresses raw with c's default level.
func compressWith(t testing.TB, c Codec, raw []byte) []byte {
	t.Helper()
	if c == CodecNone {
		return raw
	}
	comp, err := newCompressor(Compression{Codec: c})
	if err != nil {
		t.Fatal(err)
	}
	p, err := comp.compress(nil, raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) == 0 { // lz4's "incompressible": force a literal-only block
		p = make([]byte, lz4.CompressBlockBound(len(raw)))
		n, err := lz4.CompressBlock(raw, p, nil)
		if err != nil || n == 0 {
			t.Fatalf("lz4 CompressBlock: %d, %v", n, err)
		}
		p = p[:n]
	}
	return p
}

func TestFrameRoundTrip(t *testing.T) {
	sizes := []struct {
		name       string
		writes     []int
		flushAfter []int
	}{
		{"empty", []int{0}, nil},
		{"1", []int{1}, nil},
		{"frame-1", []int{frameRawBytes - 1}, nil},
		{"frame", []int{frameRawBytes}, nil},
		{"3frames+7", []int{3*frameRawBytes + 7}, nil},
		{"flush-middle", []int{1000, frameRawBytes, 0, 5, 3}, []int{0, 2, 3}},
		{"small-writes", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, []int{6}},
	}
	data := map[string][]byte{
		"random": randomBytes(1, 3*frameRawBytes+2000),
		"text":   textBytes(1, 3*frameRawBytes+2000),
	}
	for _, c := range testCompressions {
		for kind, src := range data {
			for _, sz := range sizes {
				t.Run(c.String()+"/"+kind+"/"+sz.name, func(t *testing.T) {
					t.Parallel()
					var writes [][]byte
					var want []byte
					off := 0
					for _, n := range sz.writes {
						writes = append(writes, src[off:off+n])
						want = append(want, src[off:off+n]...)
						off += n
					}
					wire := encodeFrames(t, c, writes, sz.flushAfter...)
					got, err := decodeFrames(wire)
					if err != nil {
						t.Fatalf("decode: %v", err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("decoded %d bytes, want %d (equal prefix: %d)", len(got), len(want), commonPrefix(got, want))
					}
					checkFrameHeaders(t, c, kind, wire, len(want), len(sz.flushAfter) > 0)
				})
			}
		}
	}
}

// checkFrameHeaders checks what a frameWriter put on the wire: full frames
// of frameRawBytes, no empty frame, and the codec byte: CodecNone when the
// codec could not shrink the frame (random data), the configured codec when
// it could (text, in frames big enough to compress).
func checkFrameHeaders(t *testing.T, c Compression, kind string, wire []byte, total int, flushed bool) {
	t.Helper()
	hs := parseFrames(t, wire)
	var sum uint64
	for i, h := range hs {
		sum += h.rawLen
		if h.rawLen == 0 || h.rawLen > frameRawBytes {
			t.Errorf("frame %d: rawLen %d", i, h.rawLen)
		}
		if !flushed && i < len(hs)-1 && h.rawLen != frameRawBytes {
			t.Errorf("frame %d of %d: rawLen %d, want full frames", i, len(hs), h.rawLen)
		}
		switch {
		case h.codec == CodecNone:
			if h.encLen != h.rawLen {
				t.Errorf("frame %d: uncompressed with encLen %d != rawLen %d", i, h.encLen, h.rawLen)
			}
			if kind == "text" && c.Codec != CodecNone && h.rawLen >= 4096 {
				t.Errorf("frame %d: %d bytes of text sent uncompressed with %s", i, h.rawLen, c)
			}
		case h.codec != c.Codec:
			t.Errorf("frame %d: codec %s, want %s or none", i, h.codec, c.Codec)
		case h.encLen >= h.rawLen:
			t.Errorf("frame %d: %s frame of %d bytes does not shrink %d", i, h.codec, h.encLen, h.rawLen)
		case kind == "random":
			t.Errorf("frame %d: random data sent as %s (%d -> %d)", i, h.codec, h.rawLen, h.encLen)
		}
	}
	if sum != uint64(total) {
		t.Errorf("frames carry %d bytes, want %d", sum, total)
	}
	if total == 0 && len(wire) != 0 {
		t.Errorf("no data but %d wire bytes", len(wire))
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// TestFrameWriterIncompressibleGoesRaw checks the rule directly on one frame
// per codec: random bytes are sent with codec byte 0 and encLen == rawLen.
func TestFrameWriterIncompressibleGoesRaw(t *testing.T) {
	src := randomBytes(7, 100_000)
	for _, c := range testCompressions[1:] {
		wire := encodeFrames(t, c, [][]byte{src})
		if wire[0] != byte(CodecNone) {
			t.Errorf("%s: codec byte %d for random data, want %d", c, wire[0], CodecNone)
		}
		want := rawFrame(0, uint64(len(src)), uint64(len(src)), src)
		if !bytes.Equal(wire, want) {
			t.Errorf("%s: wire is not one raw frame (%d bytes, want %d)", c, len(wire), len(want))
		}
	}
}

// TestFrameStreamMixesCodecs checks that a reader accepts a stream whose
// frames use different codecs, as the format allows.
func TestFrameStreamMixesCodecs(t *testing.T) {
	var wire, want []byte
	for i, c := range []Codec{CodecZstd, CodecNone, CodecLZ4, CodecGzip, CodecZstd} {
		raw := textBytes(uint64(i), 10_000+i)
		wire = append(wire, validFrame(t, c, raw)...)
		want = append(want, raw...)
	}
	got, err := decodeFrames(wire)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("decode: %d bytes, %v; want %d bytes", len(got), err, len(want))
	}
}

func TestFrameReaderRejects(t *testing.T) {
	text := textBytes(3, 5000)
	zstdText := compressWith(t, CodecZstd, text)
	tests := []struct {
		name string
		wire []byte
		want []error // every one must be wrapped
	}{
		{"codec 4", rawFrame(4, 1, 1, []byte{0}), []error{ErrProtocol, ErrUnknownCodec}},
		{"codec 254", rawFrame(254, 1, 1, []byte{0}), []error{ErrProtocol, ErrUnknownCodec}}, // 255 is framesEnd
		{"rawLen 0", rawFrame(0, 0, 0, nil), []error{ErrProtocol}},
		{"rawLen 0 zstd", rawFrame(2, 0, 9, []byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 1, 0, 0}), []error{ErrProtocol}},
		{"rawLen too big", rawFrame(0, maxFrameRaw+1, 1, []byte{0}), []error{ErrProtocol}},
		{"rawLen 2^64-1", rawFrame(0, 1<<64-1, 1, []byte{0}), []error{ErrProtocol}},
		{"encLen too big", rawFrame(2, 100, maxFrameEnc+1, nil), []error{ErrProtocol}},
		{"encLen 2^63", rawFrame(2, 100, 1<<63, nil), []error{ErrProtocol}},
		{"none encLen != rawLen", rawFrame(0, 10, 9, make([]byte, 9)), []error{ErrProtocol}},
		{"truncated payload", rawFrame(0, 10, 10, make([]byte, 5)), []error{io.ErrUnexpectedEOF}},
		{"truncated zstd payload", rawFrame(2, uint64(len(text)), uint64(len(zstdText)), zstdText[:len(zstdText)-3]), []error{io.ErrUnexpectedEOF}},
		{"truncated after codec", []byte{2}, []error{io.ErrUnexpectedEOF}},
		{"truncated rawLen", []byte{2, 0x80}, []error{io.ErrUnexpectedEOF}},
		{"truncated encLen", []byte{2, 10}, []error{io.ErrUnexpectedEOF}},
		{"zstd garbage", rawFrame(2, 10, 10, []byte("0123456789")), []error{ErrProtocol}},
		{"gzip garbage", rawFrame(3, 10, 10, []byte("0123456789")), []error{ErrProtocol}},
		{"lz4 garbage", rawFrame(1, 100, 4, []byte{0xff, 0xff, 0xff, 0xff}), []error{ErrProtocol}},
		{"lz4 empty", rawFrame(1, 10, 0, nil), []error{ErrProtocol}},
		{"zstd empty", rawFrame(2, 10, 0, nil), []error{ErrProtocol}},
		{"gzip empty", rawFrame(3, 10, 0, nil), []error{ErrProtocol}},
	}
	// A payload of each codec announcing one byte more, or one byte less,
	// than it decodes to.
	for _, c := range []Codec{CodecLZ4, CodecZstd, CodecGzip} {
		p := compressWith(t, c, text)
		for _, delta := range []int{-1, +1, -len(text) + 1, maxFrameRaw - len(text)} {
			tests = append(tests, struct {
				name string
				wire []byte
				want []error
			}{fmt.Sprintf("%s announces %+d", c, delta), rawFrame(byte(c), uint64(len(text)+delta), uint64(len(p)), p), []error{ErrProtocol}})
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Lead with a good frame: the bad one must fail after it,
			// and the good frame's data must still be delivered.
			good := []byte("before ")
			wire := append(validFrame(t, CodecNone, good), tt.wire...)
			got, err := decodeFrames(wire)
			if err == nil {
				t.Fatalf("decoded %d bytes without error", len(got))
			}
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("error %q does not wrap %q", err, w)
				}
			}
			if !bytes.Equal(got, good) {
				t.Errorf("delivered %q before the error, want %q", got, good)
			}
		})
	}
}

// TestFrameReaderVarintOverflow feeds a header whose rawLen varint is longer
// than 64 bits. The reader must stop with a protocol error.
func TestFrameReaderVarintOverflow(t *testing.T) {
	wire := append([]byte{0}, bytes.Repeat([]byte{0xff}, 10)...)
	wire = append(wire, 1, 1, 'x')
	_, err := decodeFrames(wire)
	if err == nil {
		t.Fatal("no error")
	}
	if !errors.Is(err, ErrProtocol) {
		t.Fatalf("error %q does not wrap ErrProtocol", err)
	}
}

// TestFrameReaderCorruptGzipTrailer flips a bit of the CRC-32 in a gzip
// member's trailer: the payload decodes to the announced size, but the
// check that gzip exists for fails.
func TestFrameReaderCorruptGzipTrailer(t *testing.T) {
	text := textBytes(4, 3000)
	p := compressWith(t, CodecGzip, text)
	p[len(p)-8] ^= 1 // CRC-32, little-endian, 8 bytes from the end
	_, err := decodeFrames(rawFrame(byte(CodecGzip), uint64(len(text)), uint64(len(p)), p))
	if !errors.Is(err, ErrProtocol) {
		t.Fatalf("gzip frame with a bad CRC: error %v, want a protocol error", err)
	}
}

// TestFrameReaderDecompressionBomb sends frames that announce at most
// maxFrameRaw but decode to 100 MiB. They must fail, and decoding them
// must not allocate more than a few MiB.
func TestFrameReaderDecompressionBomb(t *testing.T) {
	const bombBytes = 100 << 20
	zeros := make([]byte, 1<<20)

	// zstd, with the content size in the frame header (what a hostile
	// encoder would announce honestly) and without (streamed).
	zstdBomb := func(withSize bool) []byte {
		var buf bytes.Buffer
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		if withSize {
			e.ResetContentSize(&buf, bombBytes)
		} else {
			e.Reset(&buf)
		}
		for range bombBytes / len(zeros) {
			e.Write(zeros)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	for range bombBytes / len(zeros) {
		zw.Write(zeros)
	}
	zw.Close()

	bombs := []struct {
		name    string
		codec   Codec
		payload []byte
	}{
		{"zstd with content size", CodecZstd, zstdBomb(true)},
		{"zstd streamed", CodecZstd, zstdBomb(false)},
		{"gzip", CodecGzip, gz.Bytes()},
	}
	for _, b := range bombs {
		if len(b.payload) > maxFrameEnc {
			t.Fatalf("%s: bomb payload %d bytes does not fit a frame", b.name, len(b.payload))
		}
		for _, rawLen := range []uint64{1, 1 << 20} {
			wire := rawFrame(byte(b.codec), rawLen, uint64(len(b.payload)), b.payload)
			// Warm up: the decoders and pools are allocated on first use.
			decodeFrames(wire)
			decodeFrames(validFrame(t, b.codec, text4k))
			var perRun uint64 = 1 << 63
			for range 3 { // the least of three: other goroutines allocate too
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				got, err := decodeFrames(wire)
				runtime.ReadMemStats(&after)
				if !errors.Is(err, ErrProtocol) {
					t.Fatalf("%s rawLen %d: decoded %d bytes, error %v; want a protocol error", b.name, rawLen, len(got), err)
				}
				perRun = min(perRun, after.TotalAlloc-before.TotalAlloc)
			}
			t.Logf("%s (%d-byte payload) announcing %d bytes: %.2f MiB allocated", b.name, len(b.payload), rawLen, float64(perRun)/(1<<20))
			if perRun > 6<<20 {
				t.Errorf("%s announcing %d bytes: %.1f MiB allocated decoding it, want at most 6", b.name, rawLen, float64(perRun)/(1<<20))
			}
		}
	}
}

var text4k = textBytes(99, 4096)

// TestFrameWriterReportsWriteError checks that a failing network write
// surfaces from Write, Flush or Close, and that the writer does not block.
func TestFrameWriterReportsWriteError(t *testing.T) {
	pr, pw := io.Pipe()
	pr.CloseWithError(errors.New("link down"))
	fw, err := newFrameWriter(pw, DefaultCompression)
	if err != nil {
		t.Fatal(err)
	}
	src := textBytes(5, 10*frameRawBytes)
	fw.Write(src)
	fw.Flush()
	if err := fw.Close(); err == nil || !strings.Contains(err.Error(), "link down") {
		t.Fatalf("Close = %v, want the write error", err)
	}
}
