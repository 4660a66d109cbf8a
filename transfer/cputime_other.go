//go:build !linux

package transfer

import "time"

// threadCPU returns 0: the thread's CPU time is read on Linux only, and
// --compress auto then takes the cores for uncontended.
func threadCPU() time.Duration { return 0 }
