package integration

import (
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/restoresync/restoresync/internal/testreport"
	"github.com/restoresync/restoresync/internal/testsshd"
)

// mediaBytes returns the bytes of the tree's .jpg, .png and .mp4 files
// (each inode once): data that is already compressed.
func mediaBytes(t *testing.T, root string) int64 {
	t.Helper()
	var n int64
	seen := map[uint64]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".jpg", ".png", ".mp4":
		default:
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if ino := fi.Sys().(*syscall.Stat_t).Ino; !seen[ino] {
			seen[ino] = true
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func codecOf(rep testreport.Report, name string) (testreport.Codec, bool) {
	for _, c := range rep.Codecs {
		if c.Codec == name {
			return c, true
		}
	}
	return testreport.Codec{}, false
}

// --compress auto and --jobs auto, the defaults, over a real sshd: the
// tree arrives whole (content, modes, owners, times), the media (jpg, png,
// mp4) goes uncompressed and the text compressed, and the report's codecs
// add up; an explicit codec is the only one used.
func TestE2ECompressAuto(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := account.get(t)
	srcStats := statTree(t, src)
	media := mediaBytes(t, src)
	if media == 0 {
		t.Fatal("the account has no media files")
	}
	srv := testsshd.Start(t)

	t.Run("auto", func(t *testing.T) {
		t.Parallel()
		dst := filepath.Join(t.TempDir(), "alice")
		r := mustRun(t, append(append([]string{"restore", "--json"}, sshdArgs(srv)...), sshdURL(srv, src), dst)...)
		rep := parseReport(t, r)
		checkFreshReport(t, rep, srcStats, 0, "auto")
		assertSameTree(t, src, dst)
		assertNoTempFiles(t, dst)

		// A small image in a frame of mostly text travels with the
		// text's codec: 90% of the media at least goes as none.
		none, ok := codecOf(rep, "none")
		if !ok || none.WireBytes < media*9/10 || none.Files < 1 {
			t.Errorf("none: %+v; want most of the media's %d bytes uncompressed", none, media)
		}
		// Whether the text is compressed, and how hard, is the
		// controller's choice from the link and CPU it measures (on a
		// loopback link with both ends busy, none can be right); its
		// decisions are tested on recorded traces in package transfer.
		// What any choice must give: the media uncompressed (above),
		// every codec's bytes counted, and a codec that ran shrinking
		// what it was given or going raw.
		var files, raw, wire int64
		for _, c := range rep.Codecs {
			files += c.Files
			raw += c.Bytes
			wire += c.WireBytes
			if c.Codec != "none" && c.MiBPerSec <= 0 {
				t.Errorf("%s: no codec throughput: %+v", c.Codec, c)
			}
			if c.Codec != "none" && c.WireBytes > c.Bytes+c.Bytes/100+4096 {
				t.Errorf("%s grew the data it carried: %+v", c.Codec, c)
			}
		}
		if files <= 0 || files > int64(rep.Files) {
			t.Errorf("codecs count %d files, the restore wrote %d", files, rep.Files)
		}
		if raw < rep.Bytes || wire >= rep.WireBytes {
			t.Errorf("codecs: %d bytes in, %d on the wire; the payload is %d, the wire %d", raw, wire, rep.Bytes, rep.WireBytes)
		}
		if rep.LinkMiBPerSec <= 0 {
			t.Error("no link throughput in the report")
		}
	})

	t.Run("explicit", func(t *testing.T) {
		t.Parallel()
		dst := filepath.Join(t.TempDir(), "alice")
		r := mustRun(t, append(append([]string{"restore", "--json", "--compress", "zstd:3", "-j", "2"}, sshdArgs(srv)...), sshdURL(srv, src), dst)...)
		rep := parseReport(t, r)
		checkFreshReport(t, rep, srcStats, 2, "zstd:3")
		assertSameTree(t, src, dst)
		if len(rep.Codecs) != 1 || rep.Codecs[0].Codec != "zstd:3" {
			t.Errorf("codecs %+v; want zstd:3 alone (its frames that did not shrink went raw under its name)", rep.Codecs)
		}
	})

	t.Run("summary", func(t *testing.T) {
		t.Parallel()
		dst := filepath.Join(t.TempDir(), "alice")
		r := mustRun(t, append(append([]string{"restore", "--progress", "none"}, sshdArgs(srv)...), sshdURL(srv, src), dst)...)
		if !strings.Contains(r.stdout, "none ") || !strings.Contains(r.stdout, "link ") || !strings.Contains(r.stdout, "[raw, auto, ") {
			t.Errorf("the summary does not say what auto chose:\n%s", r.stdout)
		}
	})
}
