package transfer

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"unsafe"

	"github.com/restoresync/restoresync/treewalk"
)

// span is the memory of a slice, as addresses (it keeps nothing alive).
type span struct{ lo, hi uintptr }

func spanOf(p []byte) span {
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	return span{lo, lo + uintptr(len(p))}
}

func (s span) within(spans []span) bool {
	for _, o := range spans {
		if s.lo >= o.lo && s.hi <= o.hi {
			return true
		}
	}
	return false
}

// spanReader records the memory each Read is given.
type spanReader struct {
	r     io.Reader
	spans []span
}

func (r *spanReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.spans = append(r.spans, spanOf(p[:n]))
	return n, err
}

type spanSource struct{ r *spanReader }

func (s spanSource) Open(ctx context.Context, it *Item) (io.ReadCloser, error) {
	return io.NopCloser(s.r), nil
}

// spanWriter records the memory and the bytes of each Write.
type spanWriter struct {
	wire   bytes.Buffer
	writes []span
	lens   []int
}

func (w *spanWriter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, spanOf(p))
	w.lens = append(w.lens, len(p))
	return w.wire.Write(p)
}

// TestItemDataReadIntoFrames: with --compress none the sender copies no
// byte of a file in user space: the file is read into the frame that goes
// out, and each frame (header and payload) is one Write of that memory.
func TestItemDataReadIntoFrames(t *testing.T) {
	data := randomBytes(3, 3*frameRawBytes+1000)
	sr := &spanReader{r: bytes.NewReader(data)}
	w := &spanWriter{}
	fw, err := newFrameWriter(w, Compression{Codec: CodecNone})
	if err != nil {
		t.Fatal(err)
	}
	enc := &encoder{fw: fw}
	it := &Item{Entry: treewalk.Entry{Path: "f", Kind: treewalk.KindFile, Size: int64(len(data))}, Length: int64(len(data))}
	if err := sendItemData(context.Background(), enc, spanSource{sr}, it, chunkBytes); err != nil {
		t.Fatal(err)
	}
	reads := sr.spans
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	frames := parseFrames(t, w.wire.Bytes())
	if len(w.writes) != len(frames) {
		t.Errorf("%d Writes for %d frames, want one each", len(w.writes), len(frames))
	}
	got, err := decodeFrames(w.wire.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if want := messageBytes(t, func(e *encoder) { refItemData(e, data, chunkBytes, nil) }); !bytes.Equal(got, want) {
		t.Fatalf("message stream differs from chunks of the file's bytes")
	}
	// Every frame but the last (the end tag) ends with file bytes: they
	// must be where the file was read to.
	for i, s := range w.writes[:len(w.writes)-1] {
		tail := span{s.hi - 1000, s.hi}
		if !tail.within(reads) {
			t.Errorf("frame %d: its last bytes were written from memory no read filled: copied", i)
		}
	}
}

// TestReadFrameNoneInPlace: an uncompressed frame's payload is read from
// the stream straight into the decoded frame, not into a buffer copied
// from.
func TestReadFrameNoneInPlace(t *testing.T) {
	raw := randomBytes(4, 200<<10)
	sr := &spanReader{r: bytes.NewReader(rawFrame(byte(CodecNone), uint64(len(raw)), uint64(len(raw)), raw))}
	res := readFrame(bufio.NewReaderSize(sr, 16), nil)
	if res.err != nil || res.b == nil {
		t.Fatal(res.err, "or no decoded frame")
	}
	b := res.b
	if !bytes.Equal(*b, raw) {
		t.Fatal("frame decoded to other bytes")
	}
	// bufio serves the first bytes from its buffer, then reads into the
	// frame itself.
	if s := spanOf((*b)[64:]); !s.within(sr.spans) {
		t.Errorf("the payload was not read into the decoded frame: copied")
	}
}

// refItemData writes a whole item's data as the wire defines it: the
// bytes src yields, in reads of readBytes cut into chunks of at most
// chunkBytes, then the end tag, or an error tag after the bytes read.
func refItemData(e *encoder, src []byte, readBytes int, readErr error) {
	for len(src) > 0 {
		n := min(readBytes, len(src))
		for d := src[:n]; len(d) > 0; {
			k := min(len(d), chunkBytes)
			e.byte(tagChunk)
			e.bytes(d[:k])
			d = d[k:]
		}
		src = src[n:]
	}
	if readErr != nil {
		e.byte(tagErr)
		e.str(readErr.Error())
		return
	}
	e.byte(tagEnd)
}

// TestItemDataShortReadBytes: a file that fails or shrinks while it is
// read gives the receiver exactly the chunks of the bytes that were read,
// then the error tag, wherever the chunk stood in its frames (its header
// split across two frames, its data across three), as a file that was
// read into a buffer first does.
func TestItemDataShortReadBytes(t *testing.T) {
	file := randomBytes(5, 2*chunkBytes+7)
	const hdr = 4 // tag and a 3-byte length of a full chunk
	prefixes := []int{0, 1, frameRawBytes - hdr - 1, frameRawBytes - 2, frameRawBytes - 1, frameRawBytes, frameRawBytes - chunkBytes/2}
	stops := []int{0, 1, chunkBytes / 3, chunkBytes/2 - 3, chunkBytes - 1, chunkBytes, chunkBytes + 1, 2*chunkBytes - 1, len(file)}
	for _, prefix := range prefixes {
		for _, stop := range stops {
			for _, fail := range []bool{false, true} {
				t.Run(fmt.Sprintf("prefix=%d/stop=%d/fail=%v", prefix, stop, fail), func(t *testing.T) {
					src := &memSource{files: map[string][]byte{"f": file}}
					if fail {
						src.failAt = map[string]int{"f": stop}
					} else {
						src.short = map[string]int{"f": stop}
					}
					it := &Item{Entry: treewalk.Entry{Path: "f", Kind: treewalk.KindFile, Size: int64(len(file))}, Length: int64(len(file))}
					var itemErr error
					got := messageWire(t, Compression{}, func(e *encoder) {
						e.fw.Write(make([]byte, prefix))
						itemErr = sendItemData(context.Background(), e, src, it, chunkBytes)
					})
					if stop < len(file) && itemErr == nil {
						t.Fatal("no item error for a short file")
					}
					want := messageWire(t, Compression{}, func(e *encoder) {
						e.fw.Write(make([]byte, prefix))
						refItemData(e, file[:stop], chunkBytes, itemErr)
					})
					if !bytes.Equal(got, want) {
						i := commonPrefix(got, want)
						t.Errorf("stream differs at byte %d of %d (want %d)", i, len(got), len(want))
					}
				})
			}
		}
	}
}

// readBufferItems is an ItemWriter that reads each item as the safe
// writer does, into the free part of a 1 MiB buffer, and counts the bytes
// each Read served out of a decoded frame of fr (a copy) rather than
// decoded where the Read wanted them.
type readBufferItems struct {
	fr     *frameReader
	got    bytes.Buffer
	copied int
}

func (w *readBufferItems) WriteItem(ctx context.Context, it *Item, r io.Reader) error {
	buf := make([]byte, 1<<20)
	off := 0
	for {
		n, err := r.Read(buf[off:])
		if c := w.fr.cur; n > 0 && c != nil && w.fr.off >= n && bytes.Equal((*c)[w.fr.off-n:w.fr.off], buf[off:off+n]) {
			w.copied += n
		}
		off += n
		if off == len(buf) || err != nil {
			w.got.Write(buf[:off])
			off = 0
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// TestItemDataDecodedIntoReadBuffer: with a codec, the bytes of a frame
// that one Read of an item takes most of are decoded straight into that
// Read's buffer; only the rest of the frame (the next chunk's header and
// first bytes) is copied aside for the next Read. The item starts past
// the middle of a frame, so each later frame holds more of one chunk than
// of the next.
func TestItemDataDecodedIntoReadBuffer(t *testing.T) {
	data := textBytes(6, 6*frameRawBytes)
	const prefix = frameRawBytes * 7 / 8
	for _, c := range []Codec{CodecLZ4, CodecZstd, CodecGzip} {
		t.Run(c.String(), func(t *testing.T) {
			it := &Item{Entry: treewalk.Entry{Path: "f", Kind: treewalk.KindFile, Size: int64(len(data))}, Length: int64(len(data))}
			wire := messageWire(t, Compression{Codec: c}, func(e *encoder) {
				e.fw.Write(textBytes(7, prefix))
				if err := sendItemData(context.Background(), e, &memSource{files: map[string][]byte{"f": data}}, it, chunkBytes); err != nil {
					t.Fatal(err)
				}
			})
			for _, f := range parseFrames(t, wire) {
				if f.codec != c && f.rawLen > 1<<10 {
					t.Fatalf("a frame went out as %v: the data did not compress", f.codec)
				}
			}
			fr := newFrameReader(bufio.NewReaderSize(bytes.NewReader(wire), 64<<10))
			defer drainFrames(fr)
			if _, err := io.ReadFull(fr, make([]byte, prefix)); err != nil {
				t.Fatal(err)
			}
			w := &readBufferItems{fr: fr}
			itemErr, err := recvItemData(context.Background(), &decoder{fr: fr}, w, it)
			if itemErr != nil || err != nil {
				t.Fatal(itemErr, err)
			}
			if !bytes.Equal(w.got.Bytes(), data) {
				t.Fatal("the item's bytes differ from the file's")
			}
			if w.copied*2 > len(data) {
				t.Errorf("%d of the item's %d bytes were copied out of decoded frames, want under half", w.copied, len(data))
			}
			t.Logf("%s: %d of %d bytes copied out of decoded frames", c, w.copied, len(data))
		})
	}
}
