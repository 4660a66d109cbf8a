package transfer

import (
	"bufio"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/restoresync/restoresync/transport"
)

// silentStream is a Stream whose peer never answers: reads block until
// Close, writes are swallowed.
type silentStream struct{ closed chan struct{} }

func (s *silentStream) Read([]byte) (int, error)    { <-s.closed; return 0, errors.New("closed") }
func (s *silentStream) Write(p []byte) (int, error) { return len(p), nil }
func (s *silentStream) CloseWrite() error           { return nil }
func (s *silentStream) Close() error {
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	return nil
}
func (s *silentStream) Stderr() string { return "" }

// A stream with a request outstanding and no byte moving fails with
// ErrTimeout after the idle timeout; with nothing outstanding it may stay
// idle as long as it likes; agent-less streams (IdleTimeoutStream) time
// out on any silence.
func TestIdleTimeout(t *testing.T) {
	const d = 200 * time.Millisecond
	s := &silentStream{closed: make(chan struct{})}
	fw, _ := newFrameWriter(s, Compression{})
	c := &Conn{s: s, enc: encoder{fw: fw}, dec: decoder{fr: newFrameReader(bufio.NewReader(s))}}
	c.SetIdleTimeout(d)
	time.Sleep(3 * d) // idle, nothing asked: no timeout
	if err := c.idle.Err(); err != nil {
		t.Fatalf("timed out with no request outstanding: %v", err)
	}
	start := time.Now()
	_, err := c.List(context.Background())
	if !errors.Is(err, transport.ErrTimeout) {
		t.Fatalf("List from a silent peer: %v; want ErrTimeout", err)
	}
	if took := time.Since(start); took < d || took > 20*d {
		t.Errorf("timed out after %v; the timeout is %v", took, d)
	}

	s2 := &silentStream{closed: make(chan struct{})}
	is := transport.IdleTimeoutStream(s2, d)
	if _, err := is.Read(make([]byte, 1)); !errors.Is(err, transport.ErrTimeout) {
		t.Fatalf("read from a silent agent-less stream: %v; want ErrTimeout", err)
	}
	is.Close()
}

// An rsync stream's idle timeout (RsyncStream.SetIdleTimeout) counts only
// time in which a Read or Write waits on the peer: silence with no call in
// progress (our own disk work between calls) never fires it, a Read from a
// silent peer does, and while local progress is reported (rsync's generator
// going through files) a pending Read does not time out.
func TestRsyncStreamIdleTimeout(t *testing.T) {
	const d = 200 * time.Millisecond
	s := &silentStream{closed: make(chan struct{})}
	rs := NewRsyncStream(s)
	var local atomic.Int64
	rs.SetIdleTimeout(d, local.Load)
	defer rs.Close()
	time.Sleep(3 * d) // no call in progress: no timeout
	if err := rs.TimedOut(); err != nil {
		t.Fatalf("timed out with no call in progress: %v", err)
	}
	stopBusy := make(chan struct{})
	go func() { // our side makes progress for 4 d, then stops
		tick := time.NewTicker(d / 8)
		defer tick.Stop()
		end := time.After(4 * d)
		for {
			select {
			case <-tick.C:
				local.Add(1)
			case <-end:
				close(stopBusy)
				return
			}
		}
	}()
	start := time.Now()
	_, err := rs.Read(make([]byte, 1))
	took := time.Since(start)
	if !errors.Is(err, transport.ErrTimeout) {
		t.Fatalf("read from a silent peer: %v; want ErrTimeout", err)
	}
	<-stopBusy
	if took < 4*d || took > 40*d {
		t.Errorf("timed out after %v; local progress lasted %v, the timeout is %v", took, 4*d, d)
	}
	if rs.TimedOut() == nil {
		t.Error("TimedOut() is nil after the timeout")
	}
}
