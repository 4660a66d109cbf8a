package transfer

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/pflag"
)

var _ pflag.Value = (*Compression)(nil)

func TestParseCompression(t *testing.T) {
	valid := []struct {
		in   string
		want Compression
	}{
		{"none", Compression{CodecNone, 0}},
		{"lz4", Compression{CodecLZ4, 0}},
		{"zstd", Compression{CodecZstd, 1}}, // the default level is explicit
		{"gzip", Compression{CodecGzip, 1}},
		{"ZSTD", Compression{CodecZstd, 1}},
		{" gzip:6 \n", Compression{CodecGzip, 6}},
		{"zstd:1", Compression{CodecZstd, 1}},
		{"zstd:22", Compression{CodecZstd, 22}},
		{"zstd:03", Compression{CodecZstd, 3}},
		{"gzip:1", Compression{CodecGzip, 1}},
		{"gzip:9", Compression{CodecGzip, 9}},
		{"lz4:1", Compression{CodecLZ4, 1}},
		{"lz4:9", Compression{CodecLZ4, 9}},
	}
	for _, tt := range valid {
		got, err := ParseCompression(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseCompression(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}

	invalid := []struct {
		in      string
		unknown bool   // wraps ErrUnknownCodec
		msg     string // in the error text
	}{
		{"", true, `""`},
		{"brotli", true, `"brotli"`},
		{"zstd1", true, `"zstd1"`},
		{"xz:3", true, `"xz"`},
		{"zst", true, `"zst"`},
		{"zstd:0", false, "must be 1 to 22"},
		{"zstd:23", false, "must be 1 to 22"},
		{"zstd:-1", false, "must be 1 to 22"},
		{"gzip:0", false, "must be 1 to 9"},
		{"gzip:10", false, "must be 1 to 9"},
		{"lz4:10", false, "must be 1 to 9"},
		{"none:1", false, "no level"},
		{"none:0", false, "no level"},
		{"zstd:", false, "not a number"},
		{"zstd:fast", false, `"fast": not a number`},
		{"zstd:1:2", false, "not a number"},
		{"zstd:99999999999999999999", false, "not a number"},
	}
	for _, tt := range invalid {
		got, err := ParseCompression(tt.in)
		if err == nil {
			t.Errorf("ParseCompression(%q) = %v, want an error", tt.in, got)
			continue
		}
		if got != (Compression{}) {
			t.Errorf("ParseCompression(%q) returned %v with its error", tt.in, got)
		}
		if errors.Is(err, ErrUnknownCodec) != tt.unknown {
			t.Errorf("ParseCompression(%q): error %q wraps ErrUnknownCodec: %v, want %v", tt.in, err, !tt.unknown, tt.unknown)
		}
		if !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("ParseCompression(%q): error %q does not say %q", tt.in, err, tt.msg)
		}
		if tt.unknown && !strings.Contains(err.Error(), "none, lz4, zstd, gzip") {
			t.Errorf("ParseCompression(%q): error %q does not list the valid codecs", tt.in, err)
		}
	}
}

// TestCompressionStringRoundTrip checks that every valid setting prints in
// the form ParseCompression reads back, and that Set and String agree.
func TestCompressionStringRoundTrip(t *testing.T) {
	max := map[Codec]int{CodecNone: 0, CodecLZ4: 9, CodecZstd: 22, CodecGzip: 9}
	for c, m := range max {
		first := 0
		if c == CodecZstd || c == CodecGzip {
			first = 1 // ParseCompression makes their default level explicit
		}
		for lvl := first; lvl <= m; lvl++ {
			want := Compression{c, lvl}
			var got Compression
			if err := got.Set(want.String()); err != nil || got != want {
				t.Errorf("Set(%q) = %v, %v; want %v", want.String(), got, err, want)
			}
		}
	}
	if s := DefaultCompression.String(); s != "auto" {
		t.Errorf("DefaultCompression = %q", s)
	}
	if got, err := ParseCompression("auto"); err != nil || got != DefaultCompression {
		t.Errorf(`ParseCompression("auto") = %v, %v`, got, err)
	}
	if _, err := ParseCompression("auto:3"); err == nil {
		t.Error(`ParseCompression("auto:3") succeeded`)
	}
	if s := Codec(9).String(); s != "codec(9)" {
		t.Errorf("Codec(9) = %q", s)
	}
	c := DefaultCompression
	if err := c.Set("bogus"); err == nil || c != DefaultCompression {
		t.Errorf("Set(bogus) = %v and changed the value to %v", err, c)
	}
	if (&c).Type() == "" {
		t.Error("empty Type")
	}
	names := CodecNames()
	names[0] = "changed"
	if CodecNames()[0] != "none" {
		t.Error("CodecNames returns the package's slice")
	}
}

// TestCompressorsRoundTrip compresses with every codec and level and decodes
// with decompress, reusing dst buffers of every capacity.
func TestCompressorsRoundTrip(t *testing.T) {
	inputs := [][]byte{{'a'}, text4k, textBytes(8, frameRawBytes), randomBytes(8, 5000)}
	for _, c := range testCompressions[1:] {
		comp, err := newCompressor(c)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		var dst []byte
		for _, in := range inputs {
			dst, err = comp.compress(dst[:0], in)
			if err != nil {
				t.Fatalf("%s: compress %d bytes: %v", c, len(in), err)
			}
			if len(dst) == 0 {
				if c.Codec != CodecLZ4 {
					t.Errorf("%s: empty output for %d bytes", c, len(in))
				}
				continue // lz4's "incompressible"
			}
			out := make([]byte, len(in))
			if err := decompress(c.Codec, out, dst); err != nil || !bytes.Equal(out, in) {
				t.Errorf("%s: round trip of %d bytes: %v", c, len(in), err)
			}
		}
	}
	if _, err := newCompressor(Compression{Codec: 7}); !errors.Is(err, ErrUnknownCodec) {
		t.Errorf("newCompressor(codec 7) = %v", err)
	}
	if err := decompress(7, make([]byte, 1), []byte{1}); !errors.Is(err, ErrUnknownCodec) {
		t.Errorf("decompress(codec 7) = %v", err)
	}
}

// TestCompressorsConcurrent uses one compressor from several goroutines, as
// the interface promises to allow (run with -race).
func TestCompressorsConcurrent(t *testing.T) {
	for _, c := range []Compression{{CodecLZ4, 0}, {CodecLZ4, 4}, {CodecZstd, 3}, {CodecGzip, 0}} {
		comp, err := newCompressor(c)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Go(func() {
				var dst []byte
				for i := range 5 {
					in := textBytes(uint64(g*10+i), 20_000+g)
					out, err := comp.compress(dst[:0], in)
					if err != nil {
						errs <- err
						return
					}
					dst = out
					got := make([]byte, len(in))
					if err := decompress(c.Codec, got, dst); err != nil || !bytes.Equal(got, in) {
						errs <- fmt.Errorf("goroutine %d round %d: %v", g, i, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("%s: %v", c, err)
		}
	}
}

// The zstd encoders a process keeps hold one state each and a window of
// one frame: compressing a frame at each level the auto ladder can pick
// below 10 costs about 13 MiB of heap, where klauspost's defaults (a
// window of 8 MiB and more, GOMAXPROCS states) cost 47 MiB and more.
func TestZstdEncodersMemoryBounded(t *testing.T) {
	zstdEncoders.mu.Lock()
	saved := zstdEncoders.free
	zstdEncoders.free = nil
	zstdEncoders.mu.Unlock()
	t.Cleanup(func() {
		zstdEncoders.mu.Lock()
		zstdEncoders.free = saved
		zstdEncoders.mu.Unlock()
	})
	src := bytes.Repeat([]byte("<?php echo esc_html( get_option( 'blogname' ) ); ?>\n"), maxFrameRaw/52)
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	var keep []compressor
	for _, lvl := range []int{1, 3, 9} {
		c, err := newCompressor(Compression{Codec: CodecZstd, Level: lvl})
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.compress(nil, src)
		if err != nil || len(out) == 0 || len(out) >= len(src) {
			t.Fatalf("zstd:%d: %d bytes from %d, %v", lvl, len(out), len(src), err)
		}
		keep = append(keep, c)
	}
	grown := int64(heap()) - int64(before)
	runtime.KeepAlive(keep)
	if grown > 20<<20 {
		t.Errorf("zstd encoders of levels 1, 3 and 9 hold %.1f MiB, want at most 20", float64(grown)/(1<<20))
	}
}
