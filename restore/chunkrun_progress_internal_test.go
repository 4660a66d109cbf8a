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
