package integration

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/restoresync/restoresync/internal/testsshd"
)

// bigFileTree writes a tree with one incompressible file of size bytes.
func bigFileTree(t *testing.T, size int) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	if err := os.MkdirAll(filepath.Join(src, "www"), 0o755); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(src, "www", "video.mp4"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return src
}

// --bwlimit slows a pull over a real sshd across all streams: 5 MiB at
// 1 MiB/s takes at least 4 s (the bucket starts with a burst of 128 KiB).
// Off a terminal, progress is plain lines on stderr with the payload's and
// the wire's rates, and stdout keeps only the --json report.
func TestE2EBwlimitPlainProgress(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := bigFileTree(t, 5<<20)
	srv := testsshd.Start(t)
	dst := filepath.Join(t.TempDir(), "dst")
	args := append([]string{"restore", "--config", "none", "--json", "-j", "4", "--compress", "none", "--bwlimit", "1M", "--block-size", "1MiB"}, sshdArgs(srv)...)
	start := time.Now()
	r := mustRun(t, append(args, sshdURL(srv, src), dst)...)
	elapsed := time.Since(start)
	rep := parseReport(t, r)
	if rep.Bytes != 5<<20 {
		t.Errorf("report: %d bytes, want %d", rep.Bytes, 5<<20)
	}
	if elapsed < 4*time.Second || rep.Seconds < 4 {
		t.Errorf("5 MiB at --bwlimit 1M took %v (report: %.2f s), want at least 4 s", elapsed, rep.Seconds)
	}
	assertSameTree(t, src, dst)
	// Each line shows the payload's rate and the wire's, which --bwlimit
	// limits.
	lines := regexp.MustCompile(`(?m)^progress: [0-9.]+ MiB of 5\.0 MiB \([0-9]+%\), [0-9.]+ MiB/s payload, [0-9.]+ MiB/s wire, (ETA \S+, )?[0-9]/1 files, [0-9]+ streams?$`).FindAllString(r.stderr, -1)
	if len(lines) == 0 {
		t.Errorf("no plain progress line on stderr:\n%s", r)
	}
}

// rate matches a non-zero transfer rate as mpb prints it.
var rate = regexp.MustCompile(`[1-9][0-9.]* [KM]iB/s`)

// ansi matches terminal escape sequences.
var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

// In a real pseudo-terminal, --progress auto draws mpb's bar: bytes of the
// total, percent, rate, ETA, files and streams.
func TestE2EProgressBarPTY(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := bigFileTree(t, 3<<20)
	srv := testsshd.Start(t)
	dst := filepath.Join(t.TempDir(), "dst")
	args := append([]string{"restore", "--config", "none", "-j", "2", "--compress", "none", "--bwlimit", "1M"}, sshdArgs(srv)...)
	cmd, cancel := command(t, append(args, sshdURL(srv, src), dst)...)
	defer cancel()
	var stdout bytes.Buffer
	cmd.Stdout = &stdout // stdout is not the terminal: only the summary
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: 120})
	cmd.Stderr = tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	var screen bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(&screen, ptmx)
		done <- err
	}()
	werr := cmd.Wait()
	if err := <-done; err != nil && !errors.Is(err, syscall.EIO) { // EIO: the terminal's last writer is gone
		t.Errorf("read the pty: %v", err)
	}
	out := ansi.ReplaceAllString(screen.String(), "")
	if werr != nil {
		t.Fatalf("restore: %v\nterminal:\n%s", werr, out)
	}
	for _, want := range []string{"/ 3.0 MiB", "%", "ETA", "/1 files", "stream"} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal does not show %q:\n%q", want, out)
		}
	}
	// The rate: --bwlimit 1M holds it near 1 MiB/s, shown as KiB/s or MiB/s.
	if !rate.MatchString(out) {
		t.Errorf("the terminal shows no rate (N KiB/s or N MiB/s):\n%q", out)
	}
	if !strings.Contains(out, "3.0 MiB / 3.0 MiB") || !strings.Contains(out, "100 %") || !strings.Contains(out, "1/1 files") {
		t.Errorf("the bar does not end complete:\n%q", out)
	}
	if !strings.HasPrefix(stdout.String(), "restored 1 file") {
		t.Errorf("stdout: %q, want the summary line only", stdout.String())
	}
	assertSameTree(t, src, dst)
}
