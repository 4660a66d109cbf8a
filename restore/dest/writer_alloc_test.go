package dest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// A whole small file costs no per-file copy buffer: WriteItem copies
// through the Writer's pooled bufio buffer, not os.File.ReadFrom's generic
// path, which allocates one per call (io.Copy's 32 KiB, or the size of a
// LimitedReader). On 200,000 files of the smallfiles profile that was a
// fifth of the receiving end's CPU in the garbage collector.
func TestWriteItemAllocatesNoCopyBuffer(t *testing.T) {
	dst := t.TempDir()
	w, err := NewWriter(dst, WriterOptions{WriteBufferBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	data := bytes.Repeat([]byte("restoresync "), 700) // 8,400 bytes
	mtime := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC).UnixNano()
	write := func(i int) {
		e := treewalk.Entry{Path: fmt.Sprintf("f%03d", i), Kind: treewalk.KindFile, Mode: 0o640,
			Uid: uint32(os.Geteuid()), Gid: uint32(os.Getegid()), Size: int64(len(data)), MtimeNs: mtime}
		it := &transfer.Item{Entry: e, Length: e.Size}
		if err := w.WriteItem(context.Background(), it, io.LimitReader(bytes.NewReader(data), e.Size)); err != nil {
			t.Fatal(err)
		}
	}
	write(0) // fills the buffer pool
	const n = 100
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 1; i <= n; i++ {
		write(i)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per >= uint64(len(data)) {
		t.Errorf("WriteItem allocated %d bytes per %d-byte file: a copy buffer per file?", per, len(data))
	}
	for _, i := range []int{1, n} {
		p := filepath.Join(dst, fmt.Sprintf("f%03d", i))
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: %d bytes, %v; want the data", p, len(got), err)
		}
		fi, _ := os.Stat(p)
		if fi.Mode().Perm() != 0o640 || fi.ModTime().UnixNano() != mtime {
			t.Errorf("%s: mode %v mtime %v", p, fi.Mode(), fi.ModTime())
		}
	}
}
