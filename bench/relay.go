package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// relayChunkBytes is the most one read of the relay moves; relayQueue
// chunks may wait in each direction (16 MiB), which bounds its memory.
const (
	relayChunkBytes = 64 << 10
	relayQueue      = 256
)

// RelayOptions configure Relay.
type RelayOptions struct {
	// Listen is the address to accept connections on ("127.0.0.1:2223").
	Listen string
	// To is the address each accepted connection is relayed to.
	To string
	// Delay is added to each direction: every chunk read is written out
	// Delay after it arrived (0 relays at once). A round trip through
	// the relay thus takes 2 × Delay more.
	Delay time.Duration
	// Ready, when not nil, is called with the listening address once
	// connections are accepted.
	Ready func(addr net.Addr)
}

// Relay accepts TCP connections on o.Listen and relays each to o.To, both
// ways, holding every chunk for o.Delay: a link with latency for a
// benchmark lab on a kernel without netem (bandwidth is shaped apart, with
// tc). It returns when ctx is done (nil) or the listener fails.
func Relay(ctx context.Context, o RelayOptions) error {
	if o.To == "" {
		return errors.New("relay: no address to relay to")
	}
	l, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	if o.Ready != nil {
		o.Ready(l.Addr())
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("relay: %w", err)
		}
		wg.Go(func() { relayConn(ctx, c, o) })
	}
}

// relayConn relays one client connection until both directions end.
func relayConn(ctx context.Context, c net.Conn, o RelayOptions) {
	defer c.Close()
	var d net.Dialer
	s, err := d.DialContext(ctx, "tcp", o.To)
	if err != nil {
		return
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { c.Close(); s.Close() })
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { delayCopy(s, c, o.Delay) })
	delayCopy(c, s, o.Delay)
	wg.Wait()
}

// delayCopy copies src to dst, writing each chunk delay after it was read,
// and half-closes dst at the end of src.
func delayCopy(dst, src net.Conn, delay time.Duration) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	ch := make(chan chunk, relayQueue)
	go func() {
		defer close(ch)
		for {
			b := make([]byte, relayChunkBytes)
			n, err := src.Read(b)
			if n > 0 {
				ch <- chunk{b[:n], time.Now().Add(delay)}
			}
			if err != nil {
				return
			}
		}
	}()
	failed := false
	for c := range ch {
		if failed {
			continue // drain, so that the reader ends
		}
		if d := time.Until(c.at); d > 0 {
			time.Sleep(d)
		}
		if _, err := dst.Write(c.b); err != nil {
			failed = true
			src.Close()
		}
	}
	if tc, ok := dst.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
	} else {
		io.Closer(dst).Close()
	}
}
