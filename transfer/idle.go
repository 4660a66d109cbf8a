package transfer

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrTimeout marks a stream on which no data moved, in either direction,
// for the idle timeout while the client was waiting for its peer: rsync's
// --timeout, whose message ("timeout in data send/receive") it keeps.
// Callers map it to exit code 30, as rsync does. Check with errors.Is.
var ErrTimeout = errors.New("timeout in data send/receive")

// idleWatch closes a stream on which no byte has moved for timeout while
// armed reports that the client waits on the peer (a request is
// outstanding). It checks four times per timeout, so it fires between
// timeout and 1.5 timeout after the last byte moved or the request was
// made (later when its goroutine is starved, never earlier).
type idleWatch struct {
	timeout  time.Duration
	moved    func() int64 // bytes moved so far, both directions
	armed    func() bool
	fire     func() // closes the stream
	stop     chan struct{}
	stopOnce sync.Once
	err      atomic.Pointer[error]
}

// startIdleWatch starts a watch; Stop ends it. moved, armed and fire are
// called from the watch's goroutine.
func startIdleWatch(timeout time.Duration, moved func() int64, armed func() bool, fire func()) *idleWatch {
	w := &idleWatch{timeout: timeout, moved: moved, armed: armed, fire: fire, stop: make(chan struct{})}
	go w.run()
	return w
}

func (w *idleWatch) run() {
	tick := time.NewTicker(max(w.timeout/4, time.Millisecond))
	defer tick.Stop()
	// The clock starts when a tick first sees the watch armed, or sees bytes
	// moved, and uses time.Now rather than the tick's time: a tick read late
	// (a starved goroutine) must never make the timeout fire early.
	last, lastN, wasArmed := time.Now(), w.moved(), false
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
			now := time.Now()
			n, armed := w.moved(), w.armed()
			if n != lastN || !armed || !wasArmed {
				last, lastN, wasArmed = now, n, armed
				continue
			}
			if idle := now.Sub(last); idle >= w.timeout {
				err := fmt.Errorf("%w: nothing received or sent for %v while waiting for the remote side (--timeout %v)",
					ErrTimeout, idle.Round(time.Second/10), w.timeout)
				w.err.Store(&err)
				w.fire()
				return
			}
		}
	}
}

// Err returns the timeout error once the watch has fired, else nil.
func (w *idleWatch) Err() error {
	if w == nil {
		return nil
	}
	if p := w.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Stop ends the watch; safe to call more than once, and on nil.
func (w *idleWatch) Stop() {
	if w != nil {
		w.stopOnce.Do(func() { close(w.stop) })
	}
}

// SetIdleTimeout makes the Conn fail with an error wrapping ErrTimeout when
// no data moves on its stream for d while a request is outstanding (the
// stream is then closed under it). d <= 0 means no timeout. Call it once,
// right after Handshake, before any request.
func (c *Conn) SetIdleTimeout(d time.Duration) {
	if d <= 0 || c.idle != nil {
		return
	}
	c.idle = startIdleWatch(d,
		func() int64 { s, r := c.WireBytes(); return s + r },
		func() bool { return c.pending.Load() > 0 },
		func() { c.s.Close() })
}

// Abort tears the stream down at once, without a goodbye: blocked calls on
// the Conn return errors. Safe to call from any goroutine, more than once;
// Close may still be called afterwards.
func (c *Conn) Abort() {
	c.idle.Stop()
	c.s.Close()
}

// IdleTimeoutStream wraps s so that, when no byte has moved through it for
// d, it is closed and its Read and Write return an error wrapping
// ErrTimeout: the idle timeout for streams that carry one long transfer
// (agent-less tar and rsync), which always wait on the peer. d <= 0 returns
// s itself. The result is used like s.
func IdleTimeoutStream(s Stream, d time.Duration) Stream {
	if d <= 0 {
		return s
	}
	is := &idleStream{Stream: s}
	is.w = startIdleWatch(d, is.n.Load, func() bool { return true }, func() { s.Close() })
	return is
}

type idleStream struct {
	Stream
	n atomic.Int64
	w *idleWatch
}

func (s *idleStream) Read(p []byte) (int, error) {
	n, err := s.Stream.Read(p)
	s.n.Add(int64(n))
	if err != nil {
		if terr := s.w.Err(); terr != nil {
			err = terr
		}
	}
	return n, err
}

func (s *idleStream) Write(p []byte) (int, error) {
	n, err := s.Stream.Write(p)
	s.n.Add(int64(n))
	if err != nil {
		if terr := s.w.Err(); terr != nil {
			err = terr
		}
	}
	return n, err
}

func (s *idleStream) Close() error {
	s.w.Stop()
	return s.Stream.Close()
}

// IdleTimedOut returns the timeout error of a stream made by
// IdleTimeoutStream that timed out, else nil: callers whose libraries do
// not wrap read errors use it to report the timeout, not its consequence.
func IdleTimedOut(s Stream) error {
	if is, ok := s.(*idleStream); ok {
		return is.w.Err()
	}
	return nil
}
