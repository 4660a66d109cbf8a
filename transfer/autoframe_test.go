package transfer

import (
	"bufio"
	"bytes"
	"io"
	"testing"
)

// autoItem is one file's data as a sender writes it: its name and bytes.
type autoItem struct {
	name string
	data []byte
}

// writeItems writes the items' data as sendItemData does (beginItem, then
// chunks read straight into the frames) on a frame writer of c, and
// returns the wire bytes and the writer's stats.
func writeItems(t *testing.T, c Compression, items []autoItem) ([]byte, FrameStats) {
	t.Helper()
	var wire bytes.Buffer
	fw, err := newFrameWriter(&wire, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		fw.beginItem(it.name, 0, int64(len(it.data)))
		r := bytes.NewReader(it.data)
		for r.Len() > 0 {
			if _, err := fw.writeChunkFrom(r, min(r.Len(), chunkBytes), nil); err != nil {
				t.Fatal(err)
			}
		}
		fw.endItem()
		fw.Write([]byte{tagEnd})
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	return wire.Bytes(), fw.coder.Stats()
}

// wireFrame is one frame as read back: its codec tag and decoded bytes.
type wireFrame struct {
	codec Codec
	data  []byte
}

// readFrames decodes every frame of wire, keeping each frame's codec tag.
func readFrames(t *testing.T, wire []byte) []wireFrame {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(wire))
	var out []wireFrame
	var enc []byte
	for {
		c, err := br.Peek(1)
		if err == io.EOF {
			return out
		}
		codec := Codec(c[0])
		b, err := readFrame(br, &enc)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, wireFrame{codec, append([]byte(nil), *b...)})
	}
}

// frameOf returns the codec tags of the frames that hold marker.
func codecsHolding(frames []wireFrame, marker []byte) []Codec {
	var out []Codec
	for _, f := range frames {
		if bytes.Contains(f.data, marker) {
			out = append(out, f.codec)
		}
	}
	return out
}

// TestAutoFrameCodecTags checks the codec tag of the frames --compress auto
// sends: none for data of a file that its suffix, its magic bytes or a
// trial say is already compressed (even text named .jpg: the name is
// trusted, as rsync trusts it), a codec for text; that an explicit codec
// compresses everything; and that the data read back is the data sent.
func TestAutoFrameCodecTags(t *testing.T) {
	text := textBytes(7, 600<<10)
	random := randomBytes(7, 600<<10)
	jpegMagic := append([]byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00"), randomBytes(8, 600<<10)...)
	auto := DefaultCompression
	for _, tc := range []struct {
		name string
		c    Compression
		item autoItem
		want Codec // every frame's tag
	}{
		{"suffix", auto, autoItem{"wp-content/uploads/photo.JPG", text}, CodecNone},
		{"magic", auto, autoItem{"uploads/upload_123", jpegMagic}, CodecNone},
		{"trial", auto, autoItem{"backup/blob.dat", random}, CodecNone},
		{"explicit zstd", Compression{CodecZstd, 1}, autoItem{"photo.jpg", text}, CodecZstd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wire, st := writeItems(t, tc.c, []autoItem{tc.item})
			frames := readFrames(t, wire)
			var got []byte
			for _, f := range frames {
				if f.codec != tc.want {
					t.Errorf("a frame tagged %s, want %s", f.codec, tc.want)
				}
				got = append(got, f.data...)
			}
			if !bytes.Contains(got, tc.item.data[:1000]) || len(got) < len(tc.item.data) {
				t.Error("the frames do not carry the data")
			}
			var files int64
			for _, c := range st.Codecs {
				files += c.Files
			}
			if files != 1 {
				t.Errorf("stats count %d files, want 1: %+v", files, st)
			}
		})
	}

	// Text starts on zstd:1, and in a run of items of both kinds each
	// kind travels in frames of its own class.
	php := textBytes(9, 300<<10)
	photo := append([]byte("\x89PNG\r\n\x1a\n"), randomBytes(9, 400<<10)...)
	wire, st := writeItems(t, auto, []autoItem{{"index.php", php}, {"logo.png", photo}, {"style.css", textBytes(10, 100<<10)}})
	frames := readFrames(t, wire)
	if frames[0].codec != CodecZstd {
		t.Errorf("the first frame of text is %s, want zstd (auto's first rung)", frames[0].codec)
	}
	for _, c := range codecsHolding(frames, photo[100<<10:100<<10+64]) {
		if c != CodecNone {
			t.Errorf("a frame of the PNG's data is %s, want none", c)
		}
	}
	for _, c := range codecsHolding(frames, php[200<<10:200<<10+64]) {
		if c == CodecNone {
			t.Error("a frame of the PHP file's data went uncompressed")
		}
	}
	byCodec := map[string]CodecStats{}
	for _, c := range st.Codecs {
		byCodec[c.Codec] = c
	}
	if n := byCodec["none"]; n.Files != 1 || n.RawBytes < int64(len(photo)) || n.WireBytes <= n.RawBytes {
		t.Errorf("none: %+v, want the PNG: 1 file, its bytes raw", n)
	}
	if z := byCodec["zstd:1"]; z.Files < 1 || z.WireBytes >= z.RawBytes/2 {
		t.Errorf("zstd:1: %+v, want the text, shrunk", z)
	}
	var wireSum int64
	for _, c := range st.Codecs {
		wireSum += c.WireBytes
	}
	if wireSum != int64(len(wire)) || st.WireBytes != int64(len(wire)) {
		t.Errorf("stats count %d (%d) wire bytes, the wire has %d", wireSum, st.WireBytes, len(wire))
	}
}
