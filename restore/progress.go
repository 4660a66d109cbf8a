package restore

import (
	"context"
	"log/slog"
	"sync/atomic"
)

// Progress is told how a restore advances, for a live display. Run calls it
// from several goroutines at once: implementations must be safe for
// concurrent use and should return quickly (they are called on the data
// path). Options.Progress nil means no progress is reported.
//
// The raw method reports totals, files, bytes and streams; the tar method
// reports files and bytes as they are extracted, with unknown totals; the
// rsync method reports nothing (gokrazy's receiver writes the files).
type Progress interface {
	// Start gives what the restore will transfer: regular files to write
	// and their payload in bytes. Either is -1 when not known in advance
	// (a tar stream). Called at most once, before any Add.
	Start(files int, bytes int64)
	// Add reports data written: files completed (0 for a block of a file
	// split across streams) and payload bytes.
	Add(files int, bytes int64)
	// Streams reports how many streams are moving data now.
	Streams(n int)
}

// File actions in per-file log records (the "action" attribute).
const (
	// ActionWrite: the file's data was sent whole and written.
	ActionWrite = "write"
	// ActionDelta: the file was rebuilt from DST's copy and a delta.
	ActionDelta = "delta"
)

// observer joins Options.Progress and Options.Logger for the methods. Safe
// for concurrent use.
type observer struct {
	p       Progress
	log     *slog.Logger
	streams atomic.Int32
}

func newObserver(o *Options) *observer {
	return &observer{p: o.Progress, log: o.Logger}
}

func (ob *observer) start(files int, bytes int64) {
	if ob != nil && ob.p != nil {
		ob.p.Start(files, bytes)
	}
}

func (ob *observer) add(files int, bytes int64) {
	if ob != nil && ob.p != nil {
		ob.p.Add(files, bytes)
	}
}

// streamUp and streamDown count the streams moving data.
func (ob *observer) streamUp() {
	if ob != nil && ob.p != nil {
		ob.p.Streams(int(ob.streams.Add(1)))
	}
}

func (ob *observer) streamDown() {
	if ob != nil && ob.p != nil {
		ob.p.Streams(int(ob.streams.Add(-1)))
	}
}

// file logs one restored regular file at level Info: its path (relative to
// DST, slash-separated), size in bytes and action.
func (ob *observer) file(path string, size int64, action string) {
	if ob == nil || ob.log == nil || !ob.log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	ob.log.LogAttrs(context.Background(), slog.LevelInfo, "restored",
		slog.String("path", path), slog.Int64("size", size), slog.String("action", action))
}
