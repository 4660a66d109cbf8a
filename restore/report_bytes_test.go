package restore_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/transfer"
)

// Report.Bytes counts the payload of the files put in place, not the
// blocks of a split file that never completed: when the connection breaks
// after some of an 8 MiB file's 1 MiB blocks have landed, the report says
// what DST holds under final names, never the blocks of a file that is not
// in place, after the agent was killed.
func TestReportBytesAfterBreakCountsPlacedFiles(t *testing.T) {
	src := filepath.Join(t.TempDir(), "site")
	TestDir{
		"big.bin":   TestFile{Size: 8 << 20},
		"small.txt": TestFile{Content: "hello\n"},
	}.build(t, src)
	for _, mode := range []string{"pull", "push"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			probe := &faults{}
			o := faultOptions(mode, src, filepath.Join(t.TempDir(), "probe"), probe)
			o.Jobs, o.Writer.BlockSizeBytes, o.Compression = 2, 1<<20, transfer.Compression{}
			run(t, o)
			total := probe.moved.Load()

			dst := filepath.Join(t.TempDir(), "site")
			f := &faults{breakAt: total * 6 / 10}
			o = faultOptions(mode, src, dst, f)
			o.Jobs, o.Writer.BlockSizeBytes, o.Compression = 2, 1<<20, transfer.Compression{}
			rep, err := restore.Run(context.Background(), o)
			if err == nil {
				t.Fatalf("break at %d of %d bytes: the restore succeeded", f.breakAt, total)
			}
			var placed int64
			files := 0
			filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() && !strings.HasPrefix(d.Name(), ".restoresync-") {
					fi, _ := d.Info()
					placed += fi.Size()
					files++
				}
				return nil
			})
			if _, err := os.Lstat(filepath.Join(dst, "big.bin")); err == nil {
				t.Fatalf("break at %d of %d bytes: big.bin completed; the break came too late to test anything", f.breakAt, total)
			}
			if rep.Bytes != placed || rep.Files != files {
				t.Errorf("break at %d of %d bytes: report says %d files, %d bytes; DST holds %d files, %d bytes under final names",
					f.breakAt, total, rep.Files, rep.Bytes, files, placed)
			}
		})
	}
}
