package dest

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Whatever two entries an archive holds (names, link names and types
// chosen by the fuzzer, after a planted symlink on the destination), the
// extractor writes nothing outside the destination and follows no symlink:
// the sandbox around it keeps exactly its canary.
func FuzzTarExtract(f *testing.F) {
	seeds := []struct {
		n1, l1 string
		t1     byte
		n2, l2 string
		t2     byte
	}{
		{"public_html/index.php", "", tar.TypeReg, "public_html/copy.php", "public_html/index.php", tar.TypeLink},
		{"../outside/canary", "", tar.TypeReg, "/etc/passwd", "", tar.TypeReg},
		{"planted/canary", "", tar.TypeReg, "planted", "", tar.TypeDir},
		{"evil", "../outside", tar.TypeSymlink, "evil/canary", "", tar.TypeReg},
		{"link", "../outside/canary", tar.TypeLink, "./a/./b/", "", tar.TypeDir},
		{"planted", "elsewhere", tar.TypeSymlink, "planted/x", "", tar.TypeReg},
		{"fifo", "", tar.TypeFifo, "fifo/x", "", tar.TypeReg},
	}
	for _, s := range seeds {
		f.Add(s.n1, s.l1, s.t1, s.n2, s.l2, s.t2, []byte("overwritten\n"))
	}
	f.Fuzz(func(t *testing.T, n1, l1 string, t1 byte, n2, l2 string, t2 byte, data []byte) {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, h := range []tar.Header{{Name: n1, Linkname: l1, Typeflag: t1}, {Name: n2, Linkname: l2, Typeflag: t2}} {
			h.Mode, h.ModTime, h.Format = 0o644, time.Unix(1700000000, 7), tar.FormatPAX
			if h.Typeflag == tar.TypeReg {
				h.Size = int64(len(data))
			}
			if tw.WriteHeader(&h) != nil {
				return // not an archive tar can write
			}
			if h.Typeflag == tar.TypeReg {
				tw.Write(data)
			}
		}
		if tw.Close() != nil {
			return
		}
		sandbox := t.TempDir()
		outside := filepath.Join(sandbox, "outside")
		canary := filepath.Join(outside, "canary")
		dst := filepath.Join(sandbox, "dst")
		must := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(os.MkdirAll(outside, 0o755))
		must(os.WriteFile(canary, []byte("canary\n"), 0o600))
		must(os.MkdirAll(dst, 0o755))
		must(os.Symlink("../outside", filepath.Join(dst, "planted")))

		w, err := NewWriter(dst, WriterOptions{})
		must(err)
		x := newExtractor(w)
		if x.extract(context.Background(), &b, false) == nil {
			x.finishAll(context.Background(), nil)
		}
		w.Close()

		names := func(dir string) []string {
			ents, _ := os.ReadDir(dir)
			var out []string
			for _, e := range ents {
				out = append(out, e.Name())
			}
			return out
		}
		if got := names(sandbox); !slices.Equal(got, []string{"dst", "outside"}) {
			t.Fatalf("the sandbox holds %v", got)
		}
		if got := names(outside); !slices.Equal(got, []string{"canary"}) {
			t.Fatalf("outside holds %v", got)
		}
		fi, err := os.Lstat(canary)
		content, _ := os.ReadFile(canary)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 || string(content) != "canary\n" || fi.Sys() == nil {
			t.Fatalf("the canary changed: %v %v %q", fi, err, content)
		}
	})
}
