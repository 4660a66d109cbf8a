package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// --progress bar draws the bar in a pseudo-terminal that nobody sized (0
// columns, 0 rows, as under 'script -qc'), as if it were 80 columns wide;
// mpb alone draws nothing there.
func TestProgressBarUnsizedPTY(t *testing.T) {
	t.Parallel()
	tty, screen := ptyScreen(t)
	if ws, err := pty.GetsizeFull(tty); err != nil || ws.Cols != 0 {
		t.Fatalf("a new pty should be 0 columns wide: %+v %v", ws, err)
	}
	d := newDisplay(progressBar, tty)
	d.Start(2, 2<<20)
	d.Streams(2)
	d.Add(1, 1<<20)
	d.Add(1, 1<<20)
	d.stop(true)
	out := screen()
	for _, want := range []string{"2.0 MiB / 2.0 MiB", "100 %", "2/2 files", "2 streams"} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal does not show %q:\n%q", want, out)
		}
	}
}

// While the file list still grows, the bar never says "done": the bytes
// done pass the first chunk's total long before the run ends, and the bar
// keeps its rates and the growing total until the run stops.
func TestProgressBarNotDoneWhileListing(t *testing.T) {
	t.Parallel()
	tty, screen := ptyScreen(t)
	d := newDisplay(progressBar, tty)
	bd := d.(*barDisplay)
	d.Start(2, 2<<20)
	bd.Grow(0, 0)
	d.Add(2, 2<<20) // the first chunk's total reached
	time.Sleep(3 * barRefresh)
	bd.Grow(2, 2<<20)
	time.Sleep(3 * barRefresh)
	bd.mu.Lock()
	b := bd.bar
	bd.mu.Unlock()
	completed := b.Completed()
	d.stop(false)
	out := screen()
	if completed || strings.Contains(out, "done") {
		t.Errorf("the bar says done (completed %v) at half of a growing total:\n%q", completed, out)
	}
	if !strings.Contains(out, "4.0 MiB") {
		t.Errorf("the bar does not show the grown total 4.0 MiB:\n%q", out)
	}
}

// ptyScreen opens a pseudo-terminal (unsized) and reads everything
// written to it: screen closes the terminal and returns what it showed,
// without its escape sequences.
func ptyScreen(t *testing.T) (tty *os.File, screen func() string) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptmx.Close() })
	var buf bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(&buf, ptmx)
		done <- err
	}()
	return tty, func() string {
		tty.Close()
		if err := <-done; err != nil && !errors.Is(err, syscall.EIO) { // EIO: the terminal's last writer is gone
			t.Fatalf("read the pty: %v", err)
		}
		return ansi.ReplaceAllString(buf.String(), "")
	}
}
