package transfer

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os/exec"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/restoresync/restoresync/internal/testenv"
)

// TestSkipListMatchesRsyncRules checks --skip-compress's rules as rsync's
// manual gives them: suffixes after the last dot, case-insensitive,
// slash-separated, letters in brackets a class, '*' and '?' literal, the
// empty list skipping nothing, and the default list being rsync 3.2.7's.
func TestSkipListMatchesRsyncRules(t *testing.T) {
	l, err := ParseSkipList("gz/jpg/mp[34]/7z/bz2")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{
		"a.gz": true, "dir.x/photo.JPG": true, "song.mp3": true, "clip.mp4": true,
		"clip.mp5": false, "a.7z": true, "x.tar.bz2": true, "gz": false, "a.gz.txt": false,
		"a.": false, "a.jpeg": false, ".gz": true, "dir.gz/file": false,
	} {
		if got := l.Match(name); got != want {
			t.Errorf("Match(%q) = %v, want %v", name, got, want)
		}
	}
	lit, _ := ParseSkipList("a*/b?")
	if lit.Match("x.ab") || !lit.Match("x.a*") || !lit.Match("x.b?") {
		t.Error("'*' and '?' must be literal characters")
	}
	wide, _ := ParseSkipList("[abcdefgh][abcdefgh][abcdefgh]/gz") // 512 suffixes: matched by position
	if !wide.Match("x.ABH") || wide.Match("x.abz") || wide.Match("x.ab") || !wide.Match("y.gz") {
		t.Error("a rule of more suffixes than are expanded must match by position")
	}
	none, _ := ParseSkipList("")
	if none.Match("a.gz") {
		t.Error("the empty list must skip nothing")
	}
	if _, err := ParseSkipList("mp[34"); err == nil {
		t.Error("an unclosed bracket must be refused")
	}
	for _, name := range []string{"a.jpg", "b.PNG", "c.zip", "d.mp4", "e.zst", "f.webp", "g.tgz", "h.squashfs"} {
		if !defaultSkipList.Match(name) {
			t.Errorf("the default list does not skip %s", name)
		}
	}
	for _, name := range []string{"index.php", "dump.sql", "style.css", "mail/cur/1234:2,S", "a.pdf"} {
		if defaultSkipList.Match(name) {
			t.Errorf("the default list skips %s", name)
		}
	}
}

// BenchmarkSkipListMatch measures the default list's test of one name,
// which --compress auto makes for every file it sends: names of a
// hosting account's kinds, most of them in no rule.
func BenchmarkSkipListMatch(b *testing.B) {
	names := []string{
		"public_html/wp-content/plugins/akismet/class.akismet.php", "style.min.css", "app.js",
		"uploads/2024/05/IMG_2041.JPG", "logo.png", "mail/cur/1700000000.M1P2.host:2,S",
		"backup.tar.gz", "README", "cache/0f/9a1c.cache", "video.mp4",
	}
	b.ReportAllocs()
	n := 0
	for i := 0; b.Loop(); i++ {
		if defaultSkipList.Match(names[i%len(names)]) {
			n++
		}
	}
	if n == 0 {
		b.Fatal("the default list skipped none of the media names")
	}
}

// TestCompressedFormatsByMagic checks that the first bytes of files that
// real encoders wrote are recognised, whatever their names, and that text
// is not.
func TestCompressedFormatsByMagic(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 64, 64))
	noise := randomBytes(3, len(img.Pix))
	copy(img.Pix, noise)
	var jpg, pngb, gifb, gz, zipb, zst, lz bytes.Buffer
	if err := jpeg.Encode(&jpg, img, nil); err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(&pngb, img); err != nil {
		t.Fatal(err)
	}
	pal := image.NewPaletted(img.Rect, []color.Color{color.Black, color.White})
	if err := gif.Encode(&gifb, pal, nil); err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(&gz)
	zw.Write(textBytes(1, 1000))
	zw.Close()
	za := zip.NewWriter(&zipb)
	f, _ := za.Create("a.txt")
	f.Write(textBytes(1, 1000))
	za.Close()
	ze, _ := zstd.NewWriter(&zst)
	ze.Write(textBytes(1, 1000))
	ze.Close()
	lw := lz4.NewWriter(&lz)
	lw.Write(textBytes(1, 1000))
	lw.Close()
	cases := map[string][]byte{
		"jpeg": jpg.Bytes(), "png": pngb.Bytes(), "gif": gifb.Bytes(), "gzip": gz.Bytes(),
		"zip": zipb.Bytes(), "zstd": zst.Bytes(), "lz4": lz.Bytes(),
		// Headers as the formats' specifications give them.
		"webp":  []byte("RIFF\x24\x00\x00\x00WEBPVP8 "),
		"mp4":   []byte("\x00\x00\x00\x20ftypisom\x00\x00\x02\x00"),
		"mkv":   []byte("\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01"),
		"7z":    []byte("7z\xbc\xaf\x27\x1c\x00\x04"),
		"rar":   []byte("Rar!\x1a\x07\x01\x00"),
		"pdf":   []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"),
		"woff2": []byte("wOF2\x00\x01\x00\x00"),
	}
	for _, tool := range []struct{ format, name string }{{"xz", "xz"}, {"bzip2", "bzip2"}} {
		testenv.RequireTool(t, tool.name)
		cmd := exec.Command(tool.name, "-c")
		cmd.Stdin = bytes.NewReader(textBytes(1, 1000))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", tool.name, err)
		}
		cases[tool.format] = out
	}
	for format, b := range cases {
		if got := compressedFormat(b); got != format {
			t.Errorf("%s's first bytes %q: recognised as %q", format, b[:min(len(b), 12)], got)
		}
		if c, _ := classifyHead(b, 1<<20, new([]byte)); c != classCompressed {
			t.Errorf("%s: class %d, want already compressed", format, c)
		}
	}
	if got := compressedFormat([]byte("RIFF\x24\x00\x00\x00WAVEfmt ")); got != "" {
		t.Errorf("a WAV file is recognised as %q", got)
	}
	if got := compressedFormat(textBytes(1, 4096)); got != "" {
		t.Errorf("text is recognised as %q", got)
	}
}

// TestTrialCompression checks the trial that classifies a large file
// neither its name nor its magic bytes classify: random bytes are already
// compressed, text is compressible, and a file too small for a trial
// stays unknown.
func TestTrialCompression(t *testing.T) {
	var tmp []byte
	if c, ratio := classifyHead(randomBytes(5, 128<<10), 1<<20, &tmp); c != classCompressed || ratio < trialShrink {
		t.Errorf("random bytes: class %d, ratio %.3f; want already compressed", c, ratio)
	}
	c, ratio := classifyHead(textBytes(5, 128<<10), 1<<20, &tmp)
	if c != classCompressible || ratio <= 0 || ratio > 0.7 {
		t.Errorf("text: class %d, ratio %.3f; want compressible, about 0.45", c, ratio)
	}
	if c, _ := classifyHead(randomBytes(5, 128<<10), trialMinBytes-1, &tmp); c != classUnknown {
		t.Errorf("a file below trialMinBytes: class %d, want unknown (no trial)", c)
	}
}
