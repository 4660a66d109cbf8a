package restore_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/restoresync/restoresync/restore"
)

// recorder is a restore.Progress that keeps what it was told.
type recorder struct {
	mu                     sync.Mutex
	starts                 int
	totalFiles, doneFiles  int
	totalBytes, doneBytes  int64
	maxStreams, lastStream int
	// streamless counts the Adds of bytes made while no stream was
	// counted.
	streamless int
}

func (r *recorder) Start(files int, bytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts++
	r.totalFiles, r.totalBytes = files, bytes
}

func (r *recorder) Add(files int, bytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.doneFiles += files
	r.doneBytes += bytes
	if bytes > 0 && r.lastStream == 0 {
		r.streamless++
	}
}

func (r *recorder) Streams(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maxStreams = max(r.maxStreams, n)
	r.lastStream = n
}

// With --jobs auto, the streams that move data are counted while they do:
// bytes added with no stream counted would show "0 streams" as data moves.
func TestProgressStreamsJobsAuto(t *testing.T) {
	src := filepath.Join(t.TempDir(), "alice")
	accountFixture().build(t, src)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			var rec recorder
			o := options(mode, src, filepath.Join(t.TempDir(), "alice"))
			o.Jobs = 0 // auto
			o.Progress = &rec
			rep := run(t, o)
			if rep.Files == 0 || rec.maxStreams < 1 || rec.lastStream != 0 {
				t.Errorf("%d files; streams peaked at %d and ended at %d", rep.Files, rec.maxStreams, rec.lastStream)
			}
			if rec.streamless > 0 {
				t.Errorf("%d times bytes were added with 0 streams counted", rec.streamless)
			}
		})
	}
}

// The raw method tells Progress the totals up front and adds up to them,
// in every mode (split files and deltas included), with streams counted up
// and back down; Logger gets one "restored" record per file written.
func TestProgressAndFileLog(t *testing.T) {
	src := filepath.Join(t.TempDir(), "alice")
	accountFixture().build(t, src)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "alice")
			for round, change := range []bool{false, true} {
				if change { // a delta (pull, push) for a changed big file
					p := filepath.Join(src, "public_html", "uploads", "2024", "05", "big.mp4")
					b, _ := os.ReadFile(p)
					b[len(b)/2] ^= 0xff
					os.WriteFile(p, b, 0o644)
					defer func() { b[len(b)/2] ^= 0xff; os.WriteFile(p, b, 0o644) }()
				}
				var rec recorder
				var logBuf bytes.Buffer
				o := options(mode, src, dst)
				o.Jobs = 3
				o.Writer.BlockSizeBytes = 1 << 20 // big.mp4 (5 MiB) travels as 6 blocks
				o.Progress = &rec
				o.Logger = slog.New(slog.NewJSONHandler(&logBuf, nil))
				rep := run(t, o)
				if rec.starts != 1 || rec.totalFiles != rep.Files || rec.totalBytes != rep.Bytes {
					t.Errorf("round %d: Start called %d times with %d files, %d bytes; the report has %d, %d",
						round, rec.starts, rec.totalFiles, rec.totalBytes, rep.Files, rep.Bytes)
				}
				if rec.doneFiles != rep.Files || rec.doneBytes != rep.Bytes {
					t.Errorf("round %d: Add summed to %d files, %d bytes; the report has %d, %d",
						round, rec.doneFiles, rec.doneBytes, rep.Files, rep.Bytes)
				}
				if rep.Files > 0 && (rec.maxStreams < 1 || rec.maxStreams > 3 || rec.lastStream != 0) {
					t.Errorf("round %d: streams peaked at %d and ended at %d", round, rec.maxStreams, rec.lastStream)
				}
				logged := 0
				dec := json.NewDecoder(&logBuf)
				for dec.More() {
					var r struct{ Msg, Path, Action string }
					if err := dec.Decode(&r); err != nil {
						t.Fatal(err)
					}
					if r.Msg == "restored" {
						logged++
					}
					if change && r.Path == "public_html/uploads/2024/05/big.mp4" && mode != "local" && r.Action != restore.ActionDelta {
						t.Errorf("big.mp4 logged as %q, want %q", r.Action, restore.ActionDelta)
					}
				}
				if logged != rep.Files {
					t.Errorf("round %d: %d files logged, the report has %d", round, logged, rep.Files)
				}
				if change && mode != "local" && rep.DeltaFiles == 0 {
					t.Errorf("round %d: no delta", round)
				}
			}
		})
	}
}
