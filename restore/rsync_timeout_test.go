package restore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/transport"
)

// --timeout with --method rsync through the agent: the rsync stream stalls 2 MiB in, mid-file, as when the agent is
// stopped; the run fails with the idle timeout's error (exit 30) within a
// bounded time instead of waiting for ever, every file under its final name
// has the source's content, no temporary file of ours is left, and a rerun
// completes the tree.
func TestFaultStallTimeoutRsync(t *testing.T) {
	src := filepath.Join(t.TempDir(), "alice")
	faultTree(t, src)
	// rsync cannot restore 255-byte names (its temporary name is longer).
	must(t, os.Remove(filepath.Join(src, "public_html", strings.Repeat("n", 255))))
	dst := filepath.Join(t.TempDir(), "alice")
	f := &faults{stallAt: 2 << 20}
	o := faultOptions("pull", src, dst, f)
	o.Method = restore.MethodRsync
	o.IdleTimeout = time.Second
	// Without the timeout the run would wait for ever: bound the test.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	_, err := restore.Run(ctx, o)
	took := time.Since(start)
	if !errors.Is(err, transport.ErrTimeout) {
		t.Fatalf("after %v: error %v; want the idle timeout", took, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "timeout in data send/receive") || !strings.Contains(msg, "--timeout 1s") {
		t.Errorf("message %q lacks rsync's wording or the flag", msg)
	}
	if took > 20*time.Second {
		t.Errorf("the 1 s idle timeout took %v to fire", took)
	}
	if f.moved.Load() < 2<<20 {
		t.Errorf("the stream stalled after %d bytes, not mid-transfer", f.moved.Load())
	}
	assertPlacedContent(t, src, dst)
	if n := removeGokrazyTemps(t, src, dst); n > 0 {
		t.Logf("gokrazy left %d temporary files (not swept; README)", n)
	}
	assertNoTempFiles(t, dst)
	o.Dialer = options("pull", src, dst).Dialer
	o.IdleTimeout = 0 // 1 s is too short for a loaded test machine
	run(t, o)
	assertSameTree(t, src, dst)
}
