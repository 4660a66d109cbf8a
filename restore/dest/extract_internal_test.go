package dest

import (
	"archive/tar"
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Device files in an archive are refused when not running as root (the
// test drops the writer's root flag, since tests run as root here); the
// fifo beside them is created.
func TestExtractDevicesNotRoot(t *testing.T) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range []tar.Header{
		{Typeflag: tar.TypeChar, Name: "null", Devmajor: 1, Devminor: 3},
		{Typeflag: tar.TypeBlock, Name: "sda", Devmajor: 8},
		{Typeflag: tar.TypeFifo, Name: "pipe"},
	} {
		h.Mode, h.ModTime, h.Format = 0o644, time.Unix(1700000000, 5), tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	dst := filepath.Join(t.TempDir(), "dst")
	w, err := NewWriter(dst, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.chown = false
	x := newExtractor(w)
	if err := x.extract(context.Background(), &b, false); err != nil {
		t.Fatal(err)
	}
	if err := x.finishAll(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, fe := range x.stats.Errors {
		got[fe.Path] = fe.Err.Error()
	}
	for _, p := range []string{"null", "sda"} {
		if !strings.Contains(got[p], "only be created by root") {
			t.Errorf("%s: error %q; want a refusal naming root", p, got[p])
		}
	}
	if len(got) != 2 {
		t.Errorf("errors: %v; want only the two devices", got)
	}
}

// Whatever name an archive holds, tarPath accepts only a clean relative
// path beneath the destination.
func FuzzTarPath(f *testing.F) {
	for _, s := range []string{"./", "a/b/", "./a", "/etc/passwd", "../x", "a/../../x", "a//b", ".//a", "a/./b", "\x00", "./.."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		p, err := tarPath(name)
		if err != nil {
			return
		}
		if strings.HasPrefix(p, "/") || p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") || strings.Contains(p, "//") || strings.IndexByte(p, 0) >= 0 {
			t.Fatalf("tarPath(%q) = %q", name, p)
		}
	})
}

// A hardlink to a regular file of the archive that was refused (here: it
// lies beneath an earlier symlink) says that its target could not be
// restored, not that the archive lacks it.
func TestExtractHardlinkToRefusedFile(t *testing.T) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range []tar.Header{
		{Typeflag: tar.TypeSymlink, Name: "s", Linkname: "/tmp"},
		{Typeflag: tar.TypeReg, Name: "s/f"},
		{Typeflag: tar.TypeLink, Name: "h", Linkname: "s/f"},
	} {
		h.Mode, h.ModTime, h.Format = 0o644, time.Unix(1700000000, 5), tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	w, err := NewWriter(filepath.Join(t.TempDir(), "dst"), WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	x := newExtractor(w)
	if err := x.extract(context.Background(), &b, false); err != nil {
		t.Fatal(err)
	}
	if err := x.finishAll(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, fe := range x.stats.Errors {
		got[fe.Path] = fe.Err.Error()
	}
	if !strings.Contains(got["s/f"], "a symlink earlier in the archive") {
		t.Errorf("s/f: error %q; want the refusal of a path through a symlink", got["s/f"])
	}
	if want := "hardlink to s/f, which could not be restored"; got["h"] != want {
		t.Errorf("h: error %q; want %q", got["h"], want)
	}
}
