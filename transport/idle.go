package transport

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// IdleWatch closes a stream on which no byte has moved for timeout while
// armed reports that the client waits on the peer (a request is
// outstanding): rsync's --timeout, for Conn's requests, an RsyncStream's
// calls and IdleTimeoutStream. It checks four times per timeout, so it fires between
// timeout and 1.5 timeout after the last byte moved or the request was
// made (later when its goroutine is starved, never earlier).
type IdleWatch struct {
	timeout  time.Duration
	moved    func() int64 // bytes moved so far, both directions
	armed    func() bool
	fire     func() // closes the stream
	stop     chan struct{}
	stopOnce sync.Once
	err      atomic.Pointer[error]
}

// StartIdleWatch starts a watch of timeout; Stop ends it. moved returns the
// bytes moved so far in both directions, armed whether the client now waits
// on its peer, and fire closes the stream; all three are called from the
// watch's goroutine, so they must be safe for that. Once it fired, Err
// returns an error wrapping ErrTimeout.
func StartIdleWatch(timeout time.Duration, moved func() int64, armed func() bool, fire func()) *IdleWatch {
	w := &IdleWatch{timeout: timeout, moved: moved, armed: armed, fire: fire, stop: make(chan struct{})}
	go w.run()
	return w
}

func (w *IdleWatch) run() {
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

// Err returns the timeout error once the watch has fired, else nil; safe
// from any goroutine, and on nil.
func (w *IdleWatch) Err() error {
	if w == nil {
		return nil
	}
	if p := w.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Stop ends the watch; safe to call more than once, and on nil.
func (w *IdleWatch) Stop() {
	if w != nil {
		w.stopOnce.Do(func() { close(w.stop) })
	}
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
	is.w = StartIdleWatch(d, is.n.Load, func() bool { return true }, func() { s.Close() })
	return is
}

type idleStream struct {
	Stream
	n atomic.Int64
	w *IdleWatch
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
