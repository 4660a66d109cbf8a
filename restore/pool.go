package restore

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
)

// pool is the set of streams to one remote agent. The first stream is
// opened before the restore starts: it proves that the host is reachable and
// speaks our protocol, and it carries the file list. The others are dialed
// in the background and join the data transfer as they come up, so that
// connection setup (a few hundred milliseconds per SSH connection on a busy
// sshd) overlaps with the walk, the plan and the first batches, and a small
// restore is not held up by connections it does not need. Safe for
// concurrent use.
type pool struct {
	mu      sync.Mutex
	conns   []*transfer.Conn
	closed  bool
	dialErr error // the first background dial's failure, if any

	ready  chan int // indices of usable streams; closed when dialing is over
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// jobsStop is why --jobs auto opened no more streams (jobsController).
	jobsStop string
}

// openPool dials the first stream and starts dialing jobs-1 more, each
// with the timeouts to (connection setup and idle). With progress not nil
// (--jobs auto), jobs is the most streams it opens: the others are
// dialed one at a time, when a jobsController consulted every jobsTick
// with progress's samples says so.
func openPool(ctx context.Context, d transport.Dialer, h transfer.Hello, jobs int, to transfer.Timeouts, progress func() jobsSample) (*pool, error) {
	t0 := time.Now()
	_, first, err := transfer.Open(ctx, d, h, to)
	if err != nil {
		return nil, err
	}
	setup := time.Since(t0)
	dctx, cancel := context.WithCancel(ctx)
	p := &pool{conns: []*transfer.Conn{first}, ready: make(chan int, jobs), cancel: cancel}
	p.ready <- 0
	if progress != nil {
		ctl := newJobsController(jobs, setup) // jobs is the bound; it is 1 below
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.grow(dctx, d, h, to, ctl, t0, progress)
		}()
		jobs = 1 // no stream dialed up front
	}
	for range jobs - 1 {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			_, c, err := transfer.Open(dctx, d, h, to)
			p.mu.Lock()
			defer p.mu.Unlock()
			switch {
			case err != nil:
				if p.dialErr == nil && dctx.Err() == nil {
					p.dialErr = err
				}
			case p.closed || dctx.Err() != nil: // the run is over: not needed
				c.Abort() // no goodbye: the agent may have stalled
				c.Close()
			default:
				p.conns = append(p.conns, c)
				p.ready <- len(p.conns) - 1 // never blocks: capacity jobs
			}
		}()
	}
	go func() {
		p.wg.Wait()
		close(p.ready)
	}()
	return p, nil
}

// grow opens streams one at a time while ctl says so (--jobs auto), until
// it says no more or dctx ends.
func (p *pool) grow(dctx context.Context, d transport.Dialer, h transfer.Hello, to transfer.Timeouts, ctl *jobsController, t0 time.Time, progress func() jobsSample) {
	tick := time.NewTicker(jobsTick)
	defer tick.Stop()
	defer func() {
		p.mu.Lock()
		p.jobsStop = ctl.stop
		p.mu.Unlock()
	}()
	for ctl.stop == "" {
		select {
		case <-dctx.Done():
			return
		case <-tick.C:
		}
		s := progress()
		s.at = time.Since(t0)
		p.mu.Lock()
		s.streams = len(p.conns)
		p.mu.Unlock()
		if !ctl.decide(s) {
			continue
		}
		_, c, err := transfer.Open(dctx, d, h, to)
		p.mu.Lock()
		switch {
		case err != nil:
			// MaxStartups drops the connection, MaxSessions refuses
			// the channel: either way this remote takes no more.
			ctl.refused()
		case p.closed || dctx.Err() != nil:
			c.Abort()
			c.Close()
		default:
			p.conns = append(p.conns, c)
			p.ready <- len(p.conns) - 1 // never blocks: capacity jobs
		}
		p.mu.Unlock()
	}
}

// opened returns how many streams were opened, and why --jobs auto opened
// no more ("" with a fixed -j, or when the run ended first).
func (p *pool) opened() (int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns), p.jobsStop
}

// conn returns stream i (an index received from ready).
func (p *pool) conn(i int) *transfer.Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns[i]
}

// streams delivers the indices of usable streams, stream 0 at once.
func (p *pool) streams() <-chan int { return p.ready }

// degraded returns why fewer streams than asked came up, or nil.
func (p *pool) degraded() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dialErr
}

func (p *pool) wireBytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, c := range p.conns {
		s, r := c.WireBytes()
		n += s + r
	}
	return n
}

// abort tears every stream down at once (the run was cancelled): blocked
// reads and writes fail, so the workers end promptly. Safe to call from any
// goroutine; close must still be called.
func (p *pool) abort() {
	p.cancel()
	p.mu.Lock()
	conns := p.conns
	p.mu.Unlock()
	for _, c := range conns {
		c.Abort()
	}
}

// close stops the background dials and closes every stream, in parallel
// (a stream on a shared SSH connection is released instead: its agent
// serves the next restore to the same host).
// With abort (the run already failed) the streams are torn down without a
// goodbye, which a stalled agent would never answer, and errors are not
// reported. Otherwise each goodbye is bounded by the idle timeout, and
// abort, from another goroutine, still ends them at once.
func (p *pool) close(abort bool) error {
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.mu.Unlock()
	var g errgroup.Group
	errs := make([]error, len(conns))
	for i, c := range conns {
		if abort {
			c.Abort()
		}
		g.Go(func() error {
			if !abort && c.Reusable() {
				// A shared connection's agent stays for the next
				// restore to the same host (restore --accounts).
				errs[i] = c.Release()
			} else {
				errs[i] = c.Close()
			}
			return nil
		})
	}
	g.Wait()
	if abort {
		return nil
	}
	return errors.Join(errs...)
}

// remotePool opens the streams to loc with hello h.
func remotePool(ctx context.Context, o Options, loc transport.Location, h transfer.Hello) (*pool, error) {
	d, err := dialer(o, loc)
	if err != nil {
		return nil, err
	}
	h.Version = o.Version
	h.Compression = o.Compression.String()
	h.ReadBufferBytes = o.ReadBufferBytes
	h.Verify = o.Verify
	if o.SkipCompress != nil {
		h.SkipCompress = o.SkipCompress
	}
	var progress func() jobsSample
	if o.jobsAuto {
		progress = o.ob.jobsSample
	}
	return openPool(ctx, d, h, o.Jobs, o.timeouts(), progress)
}
