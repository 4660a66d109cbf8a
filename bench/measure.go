package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

// measured is one timed run of a row.
type measured struct {
	wall    time.Duration
	cpu     time.Duration // user + system of the processes and their waited-for children
	peakRSS int64         // bytes: the largest sum over a step of its processes' peak RSS
	relayed int64         // bytes that went through the relays between pipeline stages
	stdout  []byte        // of the last stage of the last step
}

// runSteps runs steps one after the other, stopping at the first failure,
// and times them together. A step is one command or a two-stage pipeline
// whose bytes go through a counting relay in this process (so that a tar
// stream's size can be measured). The wall time covers the starts and
// waits only; the CPU time is the sum of every process's rusage.
func runSteps(ctx context.Context, steps [][]*exec.Cmd) (measured, error) {
	var m measured
	for _, st := range steps {
		start := time.Now()
		out, n, err := runStep(st)
		m.wall += time.Since(start)
		m.relayed += n
		m.stdout = out
		var rss int64
		for _, c := range st {
			m.cpu += cpuTime(c)
			rss += peakRSS(c)
		}
		m.peakRSS = max(m.peakRSS, rss)
		if err != nil {
			return m, err
		}
		if err := ctx.Err(); err != nil {
			return m, err
		}
	}
	return m, nil
}

// runStep runs one step (see runSteps) and returns the last command's
// standard output and the relayed byte count.
func runStep(st []*exec.Cmd) ([]byte, int64, error) {
	stderrs := make([]*bytes.Buffer, len(st))
	for i, c := range st {
		stderrs[i] = &bytes.Buffer{}
		c.Stderr = stderrs[i]
	}
	var stdout bytes.Buffer
	last := st[len(st)-1]
	if last.Stdout == nil {
		last.Stdout = &stdout
	}
	fail := func(c *exec.Cmd, i int, err error) error {
		msg := strings.TrimSpace(stderrs[i].String())
		if len(msg) > 600 {
			msg = msg[:600] + "..."
		}
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		return fmt.Errorf("%s: %w: %s", strings.Join(c.Args, " "), err, msg)
	}
	if len(st) == 1 {
		if err := last.Run(); err != nil {
			return stdout.Bytes(), 0, fail(last, 0, err)
		}
		return stdout.Bytes(), 0, nil
	}
	first := st[0]
	r, err := first.StdoutPipe()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", first.Path, err)
	}
	w, err := last.StdinPipe()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", last.Path, err)
	}
	if err := last.Start(); err != nil {
		return nil, 0, fail(last, 1, err)
	}
	if err := first.Start(); err != nil {
		w.Close()
		last.Wait()
		return nil, 0, fail(first, 0, err)
	}
	n, copyErr := io.Copy(w, r)
	w.Close()
	err1 := first.Wait()
	err2 := last.Wait()
	switch {
	case err1 != nil:
		return stdout.Bytes(), n, fail(first, 0, err1)
	case err2 != nil:
		return stdout.Bytes(), n, fail(last, 1, err2)
	case copyErr != nil:
		return stdout.Bytes(), n, fmt.Errorf("relay: %w", copyErr)
	}
	return stdout.Bytes(), n, nil
}

// cpuTime is the user + system time of a finished command, including its
// children that it waited for.
func cpuTime(c *exec.Cmd) time.Duration {
	if c.ProcessState == nil {
		return 0
	}
	ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSS is the peak resident set of a finished command or of the largest
// of the children it waited for, in bytes.
func peakRSS(c *exec.Cmd) int64 {
	if c.ProcessState == nil {
		return 0
	}
	ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return ru.Maxrss << 10 // KiB on Linux
}

// median returns the median of vs (the mean of the middle two for an even
// count); 0 for none.
func median[T int64 | float64](vs []T) T {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
