package dest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
	"golang.org/x/sys/unix"
)

// When a block of a split file fails, its temporary file goes, and a later
// block of it fails with transfer.ErrSplitGone.
func TestSplitBlockAfterFailedBlock(t *testing.T) {
	dst := t.TempDir()
	w, err := NewWriter(dst, WriterOptions{BlockSizeBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	e := treewalk.Entry{Path: "big.bin", Kind: treewalk.KindFile, Mode: 0o644, Size: 3072}
	dirfd, base, err := w.parent(e.Path)
	if err != nil {
		t.Fatal(err)
	}
	err = w.prepareSplit(dirfd, e.Path, base, e.Size)
	unix.Close(dirfd)
	if err != nil {
		t.Fatal(err)
	}
	block := func(i int64) *transfer.Item {
		return &transfer.Item{Entry: e, Offset: i * 1024, Length: 1024, Split: true}
	}
	short := bytes.NewReader(make([]byte, 100)) // the sender's data ends early
	if err := w.WriteItem(t.Context(), block(1), short); !errors.Is(err, transfer.ErrSizeMismatch) {
		t.Fatalf("short block: %v; want ErrSizeMismatch", err)
	}
	if _, err := os.Lstat(filepath.Join(dst, tempName(base))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the temporary file is still there after a failed block: %v", err)
	}
	err = w.WriteItem(t.Context(), block(2), bytes.NewReader(make([]byte, 1024)))
	if !errors.Is(err, transfer.ErrSplitGone) || !strings.Contains(err.Error(), "block at 2048") {
		t.Fatalf("later block: %v; want block at 2048 wrapping ErrSplitGone", err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "big.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("big.bin is in place: %v", err)
	}
}
