package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"
)

// startMemProfile, when $RESTORESYNC_MEMPROFILE is set, samples the heap
// every 100 ms and writes a pprof heap profile to
// $RESTORESYNC_MEMPROFILE.<pid> as the process ends, taken at the moment
// the live heap was largest (so it shows what the peak held, not what was
// left at the end). A way to see what makes either end's RSS grow.
func startMemProfile() (stop func()) {
	base := os.Getenv("RESTORESYNC_MEMPROFILE")
	if base == "" {
		return func() {}
	}
	runtime.MemProfileRate = 64 << 10
	var (
		mu   sync.Mutex
		peak uint64
		prof []byte
	)
	snap := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		mu.Lock()
		defer mu.Unlock()
		if ms.HeapAlloc <= peak {
			return
		}
		peak = ms.HeapAlloc
		var b bytesBuffer
		if pprof.Lookup("heap").WriteTo(&b, 0) == nil {
			prof = b
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				snap()
			case <-done:
				return
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		snap()
		mu.Lock()
		defer mu.Unlock()
		os.WriteFile(fmt.Sprintf("%s.%d", base, os.Getpid()), prof, 0o644)
	}
}

// bytesBuffer is an io.Writer that appends to itself.
type bytesBuffer []byte

func (b *bytesBuffer) Write(p []byte) (int, error) { *b = append(*b, p...); return len(p), nil }
