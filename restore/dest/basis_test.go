package dest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/restoresync/restoresync/delta"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Plan does not take the signature of a symlink, and OpenBasis does not
// open one, even to a regular file.
func TestWriterBasisSymlink(t *testing.T) {
	dst := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	must(t, os.WriteFile(outside, bytes.Repeat([]byte("s"), 5000), 0o600))
	must(t, os.Symlink(outside, filepath.Join(dst, "f")))
	w, err := NewWriter(dst, WriterOptions{Delta: true})
	must(t, err)
	defer w.Close()
	e := treewalk.Entry{Path: "f", Kind: treewalk.KindFile, Mode: 0o644, Size: 5000, MtimeNs: 1}
	res, err := w.Plan(context.Background(), []treewalk.Entry{e})
	must(t, err)
	if len(res.Need) != 1 || len(res.Signatures) != 0 {
		t.Fatalf("plan over a symlink: need %v, %d signatures", res.Need, len(res.Signatures))
	}
	sig, err := delta.ComputeSignature(bytes.NewReader(bytes.Repeat([]byte("s"), 5000)), 5000, nil)
	must(t, err)
	if b, err := w.OpenBasis(context.Background(), &transfer.Item{Entry: e, Length: 5000, Delta: sig}); err == nil {
		b.Close()
		t.Fatal("OpenBasis opened a symlink")
	}
}
