package restore

import (
	"testing"
	"time"
)

// jobsWorld is a recorded restore as --jobs auto sees it: totalBytes in
// totalFiles files, moved at rate(n) bytes per second by n streams, each
// new stream up setup after it was asked for (or refused when the remote
// takes no more than maxUp).
type jobsWorld struct {
	totalBytes int64
	totalFiles int
	rate       func(n int) float64
	setup      time.Duration
	maxUp      int // 0: no limit
}

// run drives a controller of max streams through the world tick by tick,
// as the pool does, and returns the streams opened and the controller's
// stop reason when the work is done.
func (w jobsWorld) run(t *testing.T, max int) (int, string) {
	t.Helper()
	c := newJobsController(max, w.setup)
	streams := 1
	var done float64
	var upAt time.Duration = -1
	for at := jobsTick; ; at += jobsTick {
		if done >= float64(w.totalBytes) {
			return streams, c.stop
		}
		if at > time.Hour {
			t.Fatal("the run never ends")
		}
		done = min(float64(w.totalBytes), done+w.rate(streams)*jobsTick.Seconds())
		if upAt >= 0 && at >= upAt {
			upAt = -1
			if w.maxUp > 0 && streams >= w.maxUp {
				c.refused()
			} else {
				streams++
			}
		}
		frac := done / float64(w.totalBytes)
		s := jobsSample{at: at, doneBytes: int64(done), totalBytes: w.totalBytes,
			doneFiles: int(frac * float64(w.totalFiles)), totalFiles: w.totalFiles, streams: streams}
		if c.decide(s) {
			if upAt >= 0 {
				t.Fatal("a stream was asked for while one was being dialed")
			}
			upAt = at + w.setup
		}
	}
}

// TestJobsAutoOnTraces checks --jobs auto's decisions on recorded restores:
// a small account stays on one stream, a big one grows while throughput
// does and stops when it does not, within --max-jobs, and a remote that
// refuses sessions stops it.
func TestJobsAutoOnTraces(t *testing.T) {
	linear := func(per float64, upTo int) func(int) float64 {
		return func(n int) float64 { return per * float64(min(n, upTo)) }
	}
	for _, tc := range []struct {
		name        string
		world       jobsWorld
		max         int
		wantStreams int
		wantStop    string
	}{
		// The small account: 42 MB in 1,531 files, 1 stream
		// at ~75 MB/s, 240 ms per connection: the work is over before a
		// second stream would pay for its setup.
		{"small account", jobsWorld{42e6, 1531, linear(75e6, 4), 240 * time.Millisecond, 0}, 4, 1, ""},
		// 2 GB that 3 streams fill (a link or the disks): a fourth is
		// tried, adds nothing, and no fifth is opened.
		{"big, 3 streams fill it", jobsWorld{2e9, 20000, linear(40e6, 3), 240 * time.Millisecond, 0}, 8, 4, jobsStopGain},
		// 2 GB that scales beyond --max-jobs: it stops there.
		{"big, scales", jobsWorld{2e9, 20000, linear(40e6, 16), 240 * time.Millisecond, 0}, 4, 4, jobsStopMax},
		// One stream is all the link takes: a second is tried, no third.
		{"big, one stream fills it", jobsWorld{2e9, 20000, linear(100e6, 1), 240 * time.Millisecond, 0}, 4, 2, jobsStopGain},
		// A remote that takes two sessions (MaxStartups): the third
		// connection is refused and no more are tried.
		{"refused", jobsWorld{2e9, 20000, linear(40e6, 16), 240 * time.Millisecond, 2}, 8, 2, jobsStopRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			streams, stop := tc.world.run(t, tc.max)
			if streams != tc.wantStreams || stop != tc.wantStop {
				t.Errorf("%d streams, stop %q; want %d, %q", streams, stop, tc.wantStreams, tc.wantStop)
			}
		})
	}
}

// TestJobsAutoWaitsForThePlan checks that nothing is opened before the
// plan gives the work to do, nor for a restore with nothing to transfer.
func TestJobsAutoWaitsForThePlan(t *testing.T) {
	c := newJobsController(4, 240*time.Millisecond)
	for i := range 50 {
		if c.decide(jobsSample{at: time.Duration(i) * jobsTick, streams: 1}) {
			t.Fatal("a stream was opened with no work known")
		}
	}
}

// TestJobsAutoOpensWhileListing checks that a tree still being walked
// gets a second stream: with a streamed list the listed work left stays
// small (the streams keep up with the walk), which the payback rule alone
// would take for a restore about to end. The same samples with the list
// complete open nothing.
func TestJobsAutoOpensWhileListing(t *testing.T) {
	for _, listing := range []bool{true, false} {
		c := newJobsController(4, 240*time.Millisecond)
		opened := false
		for i := 1; i <= 10 && !opened; i++ {
			done := int64(i) * 5e6 // 50 MB/s
			opened = c.decide(jobsSample{at: time.Duration(i) * jobsTick, doneBytes: done,
				totalBytes: done + 1e6, doneFiles: i * 3000, totalFiles: i*3000 + 500,
				streams: 1, listing: listing})
		}
		if opened != listing {
			t.Errorf("listing %v: a second stream opened: %v; want %v", listing, opened, listing)
		}
	}
}
