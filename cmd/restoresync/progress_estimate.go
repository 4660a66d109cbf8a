package main

import (
	"fmt"
	"time"
)

// stallAfter is how long a run may go without a byte or a file done before
// the display says "stalled Ns" instead of a rate and an ETA: long enough
// for a pause between batches or a slow fsync, short enough that a hung
// stream shows long before --timeout ends it.
const stallAfter = 5 * time.Second

// fitInterval is the shortest interval between two samples the ETA's fit
// takes: shorter ones are mostly the noise of batches landing at once.
const fitInterval = time.Second

// progressSample is a run's counts at one moment: files and payload bytes
// done, and the bytes that crossed the network (both directions).
type progressSample struct {
	at                 time.Time
	files, bytes, wire int64
}

// estimator turns a run's samples into its rates, its ETA and how long it
// has been stalled. It keeps only running sums, whatever the run's length.
// Not safe for concurrent use.
//
// The ETA comes from what this run has measured so far: a cost per file
// (opening, creating, fsyncing, renaming it) and a cost per byte, both in
// seconds, fitted by least squares to the intervals between samples (each
// interval's seconds ≈ a·files + b·MiB done in it), then applied to the
// files and bytes that remain. A byte rate alone says "3s" when the big
// files went first and thousands of small ones remain; the per-file cost
// counts them. Intervals with nothing done (a stall) weigh nothing in the
// fit; the display says the stall instead.
type estimator struct {
	start    time.Time
	last     progressSample // the last sample the fit took
	seen     progressSample // the last sample observed
	lastMove time.Time      // when files or bytes last grew
	// Sums of the fit over the intervals: f files, m MiB, t seconds.
	sff, sfm, smm, sft, smt float64
}

// begin starts the estimate at now, the moment the totals are known.
func (e *estimator) begin(now time.Time) {
	*e = estimator{start: now, lastMove: now}
	e.last.at, e.seen.at = now, now
}

// observe adds the counts at s.at (samples in time order).
func (e *estimator) observe(s progressSample) {
	if s.files != e.seen.files || s.bytes != e.seen.bytes {
		e.lastMove = s.at
	}
	e.seen = s
	dt := s.at.Sub(e.last.at)
	if dt < fitInterval {
		return
	}
	f, m := float64(s.files-e.last.files), float64(s.bytes-e.last.bytes)/(1<<20)
	t := dt.Seconds()
	e.sff += f * f
	e.sfm += f * m
	e.smm += m * m
	e.sft += f * t
	e.smt += m * t
	e.last = s
}

// costs returns the fitted seconds per file and per MiB, neither negative;
// ok is false before anything was done. When the intervals cannot tell the
// two apart (files and bytes always in the same proportion), or one cost
// comes out negative, the other alone is fitted.
func (e *estimator) costs() (perFile, perMiB float64, ok bool) {
	det := e.sff*e.smm - e.sfm*e.sfm
	if det > 1e-9*e.sff*e.smm && e.sff > 0 && e.smm > 0 {
		a := (e.sft*e.smm - e.sfm*e.smt) / det
		b := (e.sff*e.smt - e.sfm*e.sft) / det
		if a >= 0 && b >= 0 {
			return a, b, true
		}
		if a < 0 {
			return 0, e.smt / e.smm, true
		}
		return e.sft / e.sff, 0, true
	}
	switch {
	case e.smm > 0:
		return 0, e.smt / e.smm, true
	case e.sff > 0:
		return e.sft / e.sff, 0, true
	}
	return 0, 0, false
}

// eta returns the time left to do totalFiles and totalBytes, from the
// costs fitted so far; ok is false when it cannot be estimated (unknown
// totals, nothing measured yet).
func (e *estimator) eta(totalFiles, totalBytes int64) (time.Duration, bool) {
	if totalFiles < 0 || totalBytes < 0 {
		return 0, false
	}
	a, b, ok := e.costs()
	if !ok {
		return 0, false
	}
	left := a*float64(max(totalFiles-e.seen.files, 0)) + b*float64(max(totalBytes-e.seen.bytes, 0))/(1<<20)
	return time.Duration(left * float64(time.Second)).Round(time.Second), true
}

// stalled returns how long nothing has been done as of the last sample,
// when that is at least stallAfter.
func (e *estimator) stalled() (time.Duration, bool) {
	d := e.seen.at.Sub(e.lastMove)
	return d.Truncate(time.Second), d >= stallAfter
}

// rates returns the payload and wire rates of the whole run so far, in
// bytes per second.
func (e *estimator) rates() (payload, wire float64) {
	secs := e.seen.at.Sub(e.start).Seconds()
	if secs <= 0 {
		return 0, 0
	}
	return float64(e.seen.bytes) / secs, float64(e.seen.wire) / secs
}

// rateText is the rates and the ETA as the display prints them:
// "95.2 MiB/s payload, 60.1 MiB/s wire, ETA 5s" (the wire rate only when
// the run has a network side, the ETA only when it can be estimated), or
// "stalled 12s" after stallAfter without progress.
func (e *estimator) rateText(totalFiles, totalBytes int64, network bool) string {
	if d, ok := e.stalled(); ok {
		return fmt.Sprintf("stalled %s", d)
	}
	payload, wire := e.rates()
	s := mib(int64(payload)) + "/s"
	if network {
		s += " payload, " + mib(int64(wire)) + "/s wire"
	}
	if eta, ok := e.eta(totalFiles, totalBytes); ok {
		s += ", ETA " + eta.String()
	}
	return s
}
