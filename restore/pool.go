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
	// shared says the streams are sessions on a shared SSH connection
	// (transport.SSHMux), whose agents outlive the pool (Conn.Release).
	// A stream still being set up when the pool closes is then not torn
	// down: it completes in the background and is released, parked for
	// the next restore to the same host, instead of killing the agent
	// (a parked one it took, or a new one) and leaving the next restore
	// to start another. openCancel ends those setups (abort).
	shared     bool
	openCancel context.CancelFunc
	aborted    bool // the run failed: nothing is released (guarded by mu)

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
	p := &pool{conns: []*transfer.Conn{first}, ready: make(chan int, jobs), cancel: cancel,
		shared: first.Reusable(), openCancel: func() {}}
	octx := dctx // what bounds each stream's setup
	if p.shared {
		octx, p.openCancel = context.WithCancel(ctx)
	}
	p.ready <- 0
	if progress != nil {
		ctl := newJobsController(jobs, setup) // jobs is the bound; it is 1 below
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.grow(dctx, octx, d, h, to, ctl, t0, progress)
		}()
		jobs = 1 // no stream dialed up front
	}
	for range jobs - 1 {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			_, c, err := transfer.Open(octx, d, h, to)
			p.mu.Lock()
			defer p.mu.Unlock()
			switch {
			case err != nil:
				if p.dialErr == nil && dctx.Err() == nil {
					p.dialErr = err
				}
			case p.closed || dctx.Err() != nil: // the run is over: not needed
				p.discard(c)
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
func (p *pool) grow(dctx, octx context.Context, d transport.Dialer, h transfer.Hello, to transfer.Timeouts, ctl *jobsController, t0 time.Time, progress func() jobsSample) {
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
		if !ctl.decide(s) || dctx.Err() != nil {
			continue
		}
		_, c, err := transfer.Open(octx, d, h, to)
		p.mu.Lock()
		switch {
		case err != nil:
			// MaxStartups drops the connection, MaxSessions refuses
			// the channel: either way this remote takes no more.
			ctl.refused()
		case p.closed || dctx.Err() != nil:
			p.discard(c)
		default:
			p.conns = append(p.conns, c)
			p.ready <- len(p.conns) - 1 // never blocks: capacity jobs
		}
		p.mu.Unlock()
	}
}

// discard ends c, a stream set up after the pool closed (or its run
// ended). A shared stream is released for the next restore to the same
// host when the pool closed in good order; any other is torn down
// without a goodbye, which an agent that stalled would never answer.
// Called with mu held; the release runs in the background.
func (p *pool) discard(c *transfer.Conn) {
	if p.shared && !p.aborted && c.Reusable() {
		go c.Release()
		return
	}
	c.Abort()
	c.Close()
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
	p.openCancel()
	p.mu.Lock()
	p.aborted = true
	conns := p.conns
	p.mu.Unlock()
	for _, c := range conns {
		c.Abort()
	}
}

// close stops the background dials and closes every stream, in parallel
// (a stream on a shared SSH connection is released instead: its agent
// serves the next restore to the same host; one still being set up is
// not waited for, and is released once it is up).
// With abort (the run already failed) the streams are torn down without a
// goodbye, which a stalled agent would never answer, and errors are not
// reported. Otherwise each goodbye is bounded by the idle timeout, and
// abort, from another goroutine, still ends them at once.
func (p *pool) close(abort bool) error {
	p.cancel()
	if abort || !p.shared {
		p.openCancel()
		p.wg.Wait()
	}
	// A shared stream still being set up is not waited for: it sees
	// closed once it is up, and discard releases it.
	p.mu.Lock()
	p.closed = true
	p.aborted = p.aborted || abort
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
