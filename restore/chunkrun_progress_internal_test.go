package restore

import "testing"

// --jobs auto measures the work left by the totals of every chunk planned
// so far, with a display that shows growing totals, one that does not, or
// none: a streamed list must not look like a run with nothing to do.
func TestChunkTotalsReachJobsAuto(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Progress
	}{
		{"no display", nil},
		{"display without growth", &countingProgress{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ob := &observer{p: tc.p}
			r := &chunkRun{ob: ob}
			r.progress(1000, 4<<20, false)
			r.progress(500, 1<<20, false)
			r.progress(20, 1<<10, true)
			s := ob.jobsSample()
			if s.totalFiles != 1520 || s.totalBytes != 4<<20+1<<20+1<<10 {
				t.Errorf("jobs sample totals %d files, %d bytes; want 1520 files, %d bytes", s.totalFiles, s.totalBytes, 4<<20+1<<20+1<<10)
			}
		})
	}
}

// countingProgress is a Progress that is not a ListProgress.
type countingProgress struct{ starts int }

func (c *countingProgress) Start(files int, bytes int64) { c.starts++ }
func (c *countingProgress) Add(files int, bytes int64)   {}
func (c *countingProgress) Streams(n int)                {}

// listRecorder is a ListProgress that records whether its totals were
// said to be partial (a Grow since Start, no ListDone yet).
type listRecorder struct {
	countingProgress
	partial bool
	total   int
}

func (l *listRecorder) Start(files int, bytes int64) {
	l.countingProgress.Start(files, bytes)
	l.total = files
}
func (l *listRecorder) Grow(files int, bytes int64) { l.partial = true; l.total += files }
func (l *listRecorder) ListDone()                   { l.partial = false }

// A display of a list that comes in several chunks learns that its totals
// are partial with the first chunk, not only once a second one arrives:
// until then it would show the first chunk's totals as final, with an
// ETA. A list of one chunk is final from its Start.
func TestFirstChunkTotalsArePartial(t *testing.T) {
	lr := &listRecorder{}
	r := &chunkRun{ob: &observer{p: lr}}
	r.progress(1000, 4<<20, false)
	if !lr.partial || lr.total != 1000 {
		t.Errorf("after the first of several chunks: partial %v, total %d; want partial, 1000", lr.partial, lr.total)
	}
	r.progress(20, 1<<10, true)
	if !lr.partial || lr.total != 1020 {
		t.Errorf("after the last chunk: partial %v, total %d; want partial until ListDone, 1020", lr.partial, lr.total)
	}
	one := &listRecorder{}
	r = &chunkRun{ob: &observer{p: one}}
	r.progress(30, 1<<10, true)
	if one.partial || one.total != 30 {
		t.Errorf("a list of one chunk: partial %v, total %d; want final, 30", one.partial, one.total)
	}
}
