package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vbauerster/cupwriter"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/sys/unix"
)

// plainInterval is how often --progress=plain prints a line.
const plainInterval = 3 * time.Second

// display shows a restore's progress on stderr; it implements
// restore.Progress and restore.ListProgress. Safe for concurrent use.
type display interface {
	Start(files int, bytes int64)
	Add(files int, bytes int64)
	Streams(n int)
	Grow(files int, bytes int64)
	ListDone()
	// stop ends the display; ok says whether the restore completed.
	stop(ok bool)
}

// counts are the numbers every display shows, and the estimator of its
// rates, ETA and stall. Safe for concurrent use.
type counts struct {
	totalFiles, doneFiles atomic.Int64
	totalBytes, doneBytes atomic.Int64
	streams               atomic.Int64
	started               atomic.Bool
	// listing says that the totals still grow: the sender is walking
	// the tree (restore.ListProgress's Grow, until ListDone).
	listing atomic.Bool
	grew    atomic.Bool // Grow was called: the bar follows the total
	wire    atomic.Pointer[func() int64]
	now     func() time.Time // time.Now; a test's clock

	mu  sync.Mutex
	est estimator
}

func (c *counts) Start(files int, bytes int64) {
	c.totalFiles.Store(int64(files))
	c.totalBytes.Store(bytes)
	c.mu.Lock()
	c.est.begin(c.clock())
	c.mu.Unlock()
	c.started.Store(true)
}

// Grow implements restore.ListProgress: a later chunk of the file list
// adds to the totals, and until ListDone there is no ETA.
func (c *counts) Grow(files int, bytes int64) {
	c.listing.Store(true)
	c.grew.Store(true)
	c.totalFiles.Add(int64(files))
	c.totalBytes.Add(bytes)
}

// ListDone implements restore.ListProgress: the totals are final.
func (c *counts) ListDone() { c.listing.Store(false) }

// Wire implements restore.WireProgress: total returns the bytes on the
// network so far, which the display shows as the wire rate beside the
// payload's (--bwlimit limits the wire's).
func (c *counts) Wire(total func() int64) { c.wire.Store(&total) }

func (c *counts) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// rateText samples the counts now and returns the rates and ETA, or the
// stall, as estimator.rateText says them.
func (c *counts) rateText() string {
	s := progressSample{at: c.clock(), files: c.doneFiles.Load(), bytes: c.doneBytes.Load()}
	w := c.wire.Load()
	if w != nil {
		s.wire = (*w)()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.est.observe(s)
	if c.listing.Load() { // partial totals: no ETA yet
		return c.est.rateText(-1, -1, w != nil) + ", no ETA while the sender walks the tree"
	}
	return c.est.rateText(c.totalFiles.Load(), c.totalBytes.Load(), w != nil)
}

func (c *counts) Add(files int, bytes int64) {
	c.doneFiles.Add(int64(files))
	c.doneBytes.Add(bytes)
}

func (c *counts) Streams(n int) { c.streams.Store(int64(n)) }

// filesText is "12/300 files" ("12 files" when the total is unknown,
// "12/300+ files" while it grows).
func (c *counts) filesText() string {
	if t := c.totalFiles.Load(); t >= 0 {
		if c.listing.Load() {
			return fmt.Sprintf("%d/%d+ files", c.doneFiles.Load(), t)
		}
		return fmt.Sprintf("%d/%d files", c.doneFiles.Load(), t)
	}
	return fmt.Sprintf("%d files", c.doneFiles.Load())
}

func (c *counts) streamsText() string {
	return count(int(c.streams.Load()), "stream")
}

// newDisplay returns the display for mode on w (stderr); nil for none.
// auto is a bar when w is a terminal, else plain.
func newDisplay(mode progressMode, w io.Writer) display {
	if mode == progressAuto {
		mode = progressPlain
		if isTerminal(w) {
			mode = progressBar
		}
	}
	switch mode {
	case progressBar:
		return newBarDisplay(w)
	case progressPlain:
		return newPlainDisplay(w, plainInterval)
	}
	return nil
}

// isTerminal reports whether w is a terminal with a known width (a bar
// needs one: a pseudo-terminal nobody sized is 0 columns wide).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	return err == nil && ws.Col > 0
}

// barDisplay is a live bar (vbauerster/mpb): bytes done of total, percent,
// payload and wire rates, ETA (or "stalled Ns"), then files done of total
// and active streams. Add only counts;
// a goroutine moves the bar to the counts at mpb's refresh rate.
type barDisplay struct {
	counts
	w    io.Writer
	p    *mpb.Progress
	bar  *mpb.Bar
	mu   sync.Mutex
	done chan struct{}
	wg   sync.WaitGroup
}

func newBarDisplay(w io.Writer) *barDisplay {
	return &barDisplay{w: w}
}

func (d *barDisplay) Start(files int, bytes int64) {
	d.counts.Start(files, bytes)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.p != nil {
		return // one bar per run
	}
	d.p = mpb.New(mpb.WithConsoleWriter(newBarWriter(d.w)), mpb.WithWidth(32), mpb.WithRefreshRate(barRefresh))
	extra := decor.Any(func(decor.Statistics) string {
		return d.filesText() + ", " + d.streamsText()
	}, decor.WCSyncSpaceR)
	rates := decor.Any(func(decor.Statistics) string { return d.rateText() }, decor.WCSyncSpace)
	defer d.follow()
	if bytes < 0 { // unknown total (tar): a spinner with the counts
		d.bar = d.p.New(0, mpb.SpinnerStyle(),
			mpb.PrependDecorators(decor.Current(decor.SizeB1024(0), "% .1f"), rates),
			mpb.AppendDecorators(extra))
		return
	}
	// The bar is made without a total, so that reaching one never marks
	// it complete ("done"): while the list is streamed, the first chunk's
	// total is passed long before the run ends. It shows the total it is
	// given; stop completes it.
	d.bar = d.p.New(0, mpb.BarStyle(),
		mpb.PrependDecorators(
			decor.Counters(decor.SizeB1024(0), "% .1f / % .1f"),
			decor.Percentage(decor.WCSyncSpace)),
		mpb.AppendDecorators(
			decor.OnComplete(rates, "done"),
			decor.Name("  "),
			extra))
	d.bar.SetTotal(bytes, false)
}

// barWriter is mpb's terminal writer (cupwriter) with a default size for
// a terminal that reports none: a pseudo-terminal nobody sized (script
// -qc, some CI runners) says 0 columns and 0 rows, and mpb would draw
// nothing in it.
type barWriter struct{ *cupwriter.Writer }

// Default size of an unsized terminal, the classic 80x24.
const (
	defaultCols = 80
	defaultRows = 24
)

func newBarWriter(w io.Writer) barWriter { return barWriter{cupwriter.New(w, false)} }

// GetTermSize returns the terminal's size, or 80 columns and 24 rows for
// whichever it reports as 0.
func (b barWriter) GetTermSize() (width, height int, err error) {
	width, height, err = b.Writer.GetTermSize()
	if err != nil {
		return 0, 0, err
	}
	return cmp.Or(width, defaultCols), cmp.Or(height, defaultRows), nil
}

// barRefresh is how often the bar is redrawn.
const barRefresh = 150 * time.Millisecond

// follow starts moving the bar to the byte count until stop. Called with
// d.mu held, once the bar exists.
func (d *barDisplay) follow() {
	d.done = make(chan struct{})
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		t := time.NewTicker(barRefresh)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if d.grew.Load() {
					d.bar.SetTotal(d.totalBytes.Load(), false) // it grew with the list
				}
				d.bar.SetCurrent(d.doneBytes.Load())
			case <-d.done:
				return
			}
		}
	}()
}

func (d *barDisplay) stop(ok bool) {
	d.mu.Lock()
	p, b := d.p, d.bar
	d.mu.Unlock()
	if p == nil {
		return
	}
	close(d.done)
	d.wg.Wait()
	b.SetCurrent(d.doneBytes.Load())
	if ok {
		b.SetTotal(-1, true) // complete, also with unknown totals
	} else {
		b.Abort(false)
	}
	p.Wait()
}

// plainDisplay prints one line every interval, for logs and pipes.
type plainDisplay struct {
	counts
	w    io.Writer
	done chan struct{}
	wg   sync.WaitGroup
}

func newPlainDisplay(w io.Writer, every time.Duration) *plainDisplay {
	d := &plainDisplay{w: w, done: make(chan struct{})}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if d.started.Load() {
					fmt.Fprintln(d.w, d.line())
				}
			case <-d.done:
				return
			}
		}
	}()
	return d
}

// line is "progress: 1.2 GiB of 4.0 GiB (30%), 110.5 MiB/s payload, 80.2
// MiB/s wire, ETA 26s, 1200/4000 files, 4 streams" ("stalled 12s" in place
// of the rates and ETA after stallAfter without progress).
func (d *plainDisplay) line() string {
	done, total := d.doneBytes.Load(), d.totalBytes.Load()
	s := "progress: " + mib(done)
	if total >= 0 {
		pct := 100.0
		if total > 0 {
			pct = float64(done) * 100 / float64(total)
		}
		s += fmt.Sprintf(" of %s (%.0f%%)", mib(total), pct)
	}
	return s + ", " + d.rateText() + ", " + d.filesText() + ", " + d.streamsText()
}

func (d *plainDisplay) stop(bool) {
	close(d.done)
	d.wg.Wait()
}

// mib formats bytes in MiB with one decimal.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// count formats n with noun, plural when n != 1.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
