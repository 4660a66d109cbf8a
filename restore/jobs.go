package restore

import (
	"time"
)

// --jobs auto: the raw method over a network starts with one stream and
// opens the next only while that pays. jobsController decides; the pool
// (pool.go) asks it every jobsTick and dials.

// jobsTick is how often the pool consults the controller: about half of
// an SSH connection's setup here (~240 ms), so that a decision is not
// late by more than a connection would take anyway.
const jobsTick = 100 * time.Millisecond

// Controller tuning.
const (
	// jobsMeasureTicks is how many ticks of data a stream count is
	// measured for before it is judged: one tick holds too few batches.
	jobsMeasureTicks = 3
	// jobsMinGain is how much more throughput the last stream opened must
	// have brought for another to be tried: below it the link, the disks
	// or the cores are the limit, and more streams only cost connections.
	jobsMinGain = 1.1
	// jobsPayback is how many times a connection's setup time the work
	// left must take at the current rate for a new stream to be worth
	// opening: it comes up after its setup, and must then have work to
	// share.
	jobsPayback = 3
	// jobsFileBytes is what one file counts for in the work measure, in
	// bytes: a small file costs a round of metadata and a create on top
	// of its data.
	jobsFileBytes = 32 << 10
)

// jobsSample is what the run has done when the controller is consulted.
type jobsSample struct {
	// at is the time since the pool was opened.
	at time.Duration
	// doneBytes and doneFiles are the payload written and the files
	// completed so far; totalBytes and totalFiles what the run will
	// transfer (0 until the plan is known).
	doneBytes, totalBytes int64
	doneFiles, totalFiles int
	// streams is the number of streams open.
	streams int
	// listing says the totals are partial: the sender is still walking
	// the tree, and the work left is at least what is listed and not
	// done, plus what the walk has yet to find.
	listing bool
}

// work is the sample's work done and total, in bytes (jobsFileBytes per
// file).
func (s jobsSample) work() (done, total float64) {
	return float64(s.doneBytes) + float64(s.doneFiles)*jobsFileBytes,
		float64(s.totalBytes) + float64(s.totalFiles)*jobsFileBytes
}

// jobsController decides when --jobs auto opens one more stream: after a
// stream count was measured for jobsMeasureTicks, if the work left at the
// measured rate would take jobsPayback times a connection's setup or more
// (or is not known yet: the sender still walks a tree whose listed part
// the streams keep up with, so that the listed work left is always
// small while the tree may be of any size),
// if the last stream opened brought jobsMinGain more throughput (the
// first extra one always gets its chance), and within max. A refused
// connection (the remote's MaxStartups or MaxSessions) stops it for good.
// A pure function of its samples and the setup time it was given; one
// goroutine (the pool's) owns it.
type jobsController struct {
	max int
	// setup is what the first stream took to open.
	setup time.Duration
	// base is the sample at which the current stream count started to be
	// measured; prevRate is the rate of the count before it (bytes of
	// work per second), 0 before a second stream.
	base     *jobsSample
	prevRate float64
	ticks    int
	pending  bool // a stream was asked for and has not come up
	asked    int  // the stream count when it was asked for
	// stop says why no more streams will be opened ("" while they may).
	stop string
}

func newJobsController(max int, setup time.Duration) *jobsController {
	return &jobsController{max: max, setup: setup}
}

// Reasons the controller stopped opening streams, for the report.
const (
	jobsStopMax     = "max-jobs reached"
	jobsStopGain    = "throughput stopped growing"
	jobsStopRefused = "the remote refused more sessions"
)

// refused tells the controller that a stream could not be opened.
func (c *jobsController) refused() {
	c.pending = false
	c.stop = jobsStopRefused
}

// decide books s and says whether to open one more stream now.
func (c *jobsController) decide(s jobsSample) bool {
	if c.stop != "" {
		return false
	}
	if s.streams >= c.max {
		c.stop = jobsStopMax
		return false
	}
	if c.pending {
		if s.streams <= c.asked {
			return false // still dialing
		}
		c.pending = false
		c.base = nil // measure the new count from now
	}
	if s.totalBytes == 0 && s.totalFiles == 0 {
		return false // no plan yet, or nothing to transfer
	}
	if c.base == nil || c.base.streams != s.streams {
		b := s
		c.base, c.ticks = &b, 0
		return false
	}
	c.ticks++
	if c.ticks < jobsMeasureTicks {
		return false
	}
	done0, _ := c.base.work()
	done, total := s.work()
	dt := (s.at - c.base.at).Seconds()
	if dt <= 0 {
		return false
	}
	rate := (done - done0) / dt
	if c.prevRate > 0 && rate < jobsMinGain*c.prevRate {
		c.stop = jobsStopGain
		return false
	}
	if rate <= 0 {
		return false // nothing moved: the streams wait on something else
	}
	left := (total - done) / rate
	if !s.listing && left < jobsPayback*c.setup.Seconds() {
		return false // the work left would be over before a stream pays
	}
	c.prevRate = rate
	c.pending = true
	c.asked = s.streams
	return true
}
