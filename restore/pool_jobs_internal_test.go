package restore

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/restoresync/restoresync/transfer"
)

// With --jobs auto the pool opens streams up to its bound while each one
// added pays (here: the work done grows with the streams open, and much
// is left), not just the first: the bound the controller gets is the
// one asked for, not the single stream dialed up front.
func TestPoolJobsAutoOpensUpToTheBound(t *testing.T) {
	src := t.TempDir()
	d := transfer.PipeDialer{Config: transfer.ServerConfig{Root: src, ReadOnly: true}}
	var pp atomic.Pointer[pool]
	var done atomic.Int64
	start := time.Now()
	progress := func() jobsSample {
		n := 1
		if p := pp.Load(); p != nil {
			n, _ = p.opened()
		}
		// Each stream moves 64 MiB a second; 1 TiB to go.
		done.Add(int64(n) * 64 << 20 / 10)
		return jobsSample{doneBytes: done.Load(), totalBytes: 1 << 40}
	}
	p, err := openPool(t.Context(), d, transfer.Hello{Role: transfer.RoleSender, Path: ".", Compression: "none"}, 3, transfer.Timeouts{}, progress)
	if err != nil {
		t.Fatal(err)
	}
	pp.Store(p)
	defer p.close(true)
	for {
		n, reason := p.opened()
		if n == 3 {
			break
		}
		if reason != "" {
			t.Fatalf("%d streams opened, stopped: %q; want 3", n, reason)
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("%d streams opened after a minute, want 3", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
