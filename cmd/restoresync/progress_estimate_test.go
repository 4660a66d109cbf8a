package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// fakeClock is a display's clock that moves only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// newTestPlain returns a plain display on clk that never prints by
// itself: the test reads its line.
func newTestPlain(t *testing.T, clk *fakeClock) *plainDisplay {
	d := newPlainDisplay(io.Discard, time.Hour)
	t.Cleanup(func() { d.stop(true) })
	d.now = clk.now
	return d
}

// A run whose intervals cost 2 ms a file and 0.04 s a MiB (25 MiB/s), big
// and small files mixed in varying proportions: after 4 s, 650 files and
// 67.5 MiB done, 4000 small files and 32.5 MiB left, which take
// 0.002·4000 + 0.04·32.5 = 9.3 s. The line says ETA 9s; the payload's
// average rate alone (16.9 MiB/s) would say 2s.
func TestProgressETAFromFilesAndBytes(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	d := newTestPlain(t, clk)
	d.Start(4650, 100<<20)
	for _, files := range []int{100, 300, 50, 200} {
		mibs := (1 - 0.002*float64(files)) / 0.04
		clk.advance(time.Second)
		d.Add(files, int64(mibs*(1<<20)))
		d.line()
	}
	line := d.line()
	want := "progress: 67.5 MiB of 100.0 MiB (68%), 16.9 MiB/s, ETA 9s, 650/4650 files, 0 streams"
	if line != want {
		t.Errorf("line:\n%s\nwant:\n%s", line, want)
	}
}

// After stallAfter without a byte or a file, the line says how long the
// run has been stalled in place of a falling average rate and an ETA; the
// rate comes back with the next data.
func TestProgressSaysStalled(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	d := newTestPlain(t, clk)
	d.Start(10, 10<<20)
	for range 3 {
		clk.advance(time.Second)
		d.Add(1, 1<<20)
		d.line()
	}
	clk.advance(4 * time.Second) // a pause, not yet a stall
	if line := d.line(); !strings.Contains(line, "(30%), 0.4 MiB/s, ETA ") {
		t.Errorf("4 s without data: %s", line)
	}
	clk.advance(8 * time.Second)
	want := "progress: 3.0 MiB of 10.0 MiB (30%), stalled 12s, 3/10 files, 0 streams"
	if line := d.line(); line != want {
		t.Errorf("12 s without data:\n%s\nwant:\n%s", line, want)
	}
	clk.advance(time.Second)
	d.Add(1, 1<<20)
	if line := d.line(); strings.Contains(line, "stalled") || !strings.Contains(line, "MiB/s") {
		t.Errorf("data again: %s", line)
	}
}

// With a network side, the line shows the wire's rate (what --bwlimit
// limits) beside the payload's: compressed, 8 MiB of payload took 2 MiB on
// the wire in 2 s.
func TestProgressShowsWireRate(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	d := newTestPlain(t, clk)
	var wire int64
	d.Wire(func() int64 { return wire })
	d.Start(2, 16<<20)
	clk.advance(2 * time.Second)
	d.Add(1, 8<<20)
	wire = 2 << 20
	want := "progress: 8.0 MiB of 16.0 MiB (50%), 4.0 MiB/s payload, 1.0 MiB/s wire, ETA 2s, 1/2 files, 0 streams"
	if line := d.line(); line != want {
		t.Errorf("line:\n%s\nwant:\n%s", line, want)
	}
}

// While the file list still grows (restore.ListProgress), the line
// says the total so far with a "+" and gives no ETA; once the list is
// done, the grown total and an ETA.
func TestPlainLineWhileListing(t *testing.T) {
	d := newPlainDisplay(io.Discard, time.Hour)
	defer d.stop(true)
	now := time.Unix(1000, 0)
	d.now = func() time.Time { return now }
	d.Start(10, 10<<20)
	d.Grow(10, 10<<20)
	for range 5 {
		now = now.Add(time.Second)
		d.Add(1, 1<<20)
		d.line()
	}
	l := d.line()
	if !strings.Contains(l, "of 20.0 MiB") || !strings.Contains(l, "5/20+ files") || strings.Contains(l, ", ETA ") || !strings.Contains(l, "no ETA while the sender walks the tree") {
		t.Errorf("while listing: %q", l)
	}
	d.ListDone()
	now = now.Add(time.Second)
	d.Add(1, 1<<20)
	if l := d.line(); !strings.Contains(l, "6/20 files") || !strings.Contains(l, ", ETA ") {
		t.Errorf("listed: %q", l)
	}
}
