package dest

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/restoresync/restoresync/transfer"
)

// A name repeated in a tar stream: on the agent's stream (which never
// repeats one) the later entries are refused with an error naming them,
// and the first is kept; in an archive file, as with GNU tar, the last
// one wins.
func TestExtractRepeatedNames(t *testing.T) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range []struct {
		h    tar.Header
		data string
	}{
		{tar.Header{Typeflag: tar.TypeReg, Name: "index.php"}, "first"},
		{tar.Header{Typeflag: tar.TypeReg, Name: "index.php"}, "second"},
		{tar.Header{Typeflag: tar.TypeSymlink, Name: "index.php", Linkname: "/etc/passwd"}, ""},
		{tar.Header{Typeflag: tar.TypeDir, Name: "uploads/"}, ""},
		{tar.Header{Typeflag: tar.TypeReg, Name: "uploads"}, "a file in place of the dir"},
	} {
		e.h.Mode, e.h.ModTime, e.h.Format, e.h.Size = 0o644, time.Unix(1700000000, 5), tar.FormatPAX, int64(len(e.data))
		if err := tw.WriteHeader(&e.h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.data))
	}
	tw.Close()
	for _, agent := range []bool{true, false} {
		t.Run(map[bool]string{true: "agent", false: "archive"}[agent], func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "dst")
			w, err := NewWriter(dst, WriterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			x := newExtractor(w)
			if agent {
				x.protoErr = transfer.ErrProtocol
			}
			if err := x.extract(context.Background(), bytes.NewReader(b.Bytes()), false); err != nil {
				t.Fatal(err)
			}
			if err := x.finishAll(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			if !agent {
				// The last index.php, the symlink, wins.
				if target, err := os.Readlink(filepath.Join(dst, "index.php")); err != nil || target != "/etc/passwd" {
					t.Errorf("archive: index.php is %q, %v; want the last entry, the symlink", target, err)
				}
				return
			}
			repeated := 0
			for _, fe := range x.stats.Errors {
				if !strings.Contains(fe.Err.Error(), "listed twice") {
					t.Errorf("%s: %s", fe.Path, fe.Err.Error())
				}
				repeated++
			}
			if repeated != 3 {
				t.Errorf("errors %+v; want 3 repeated names refused", x.stats.Errors)
			}
			if got, err := os.ReadFile(filepath.Join(dst, "index.php")); err != nil || string(got) != "first" {
				t.Errorf("agent: index.php = %q, %v; want the first entry's", got, err)
			}
			if fi, err := os.Lstat(filepath.Join(dst, "uploads")); err != nil || !fi.IsDir() {
				t.Errorf("agent: uploads: %v, %v; want the directory", fi, err)
			}
		})
	}
}
