package restore

import (
	"context"
	"io"

	"golang.org/x/time/rate"

	"github.com/restoresync/restoresync/transport"
)

// Bandwidth limit (--bwlimit): one token bucket shared by every stream of a
// restore, charged on the client side of each stream for the bytes it
// reads and writes, so the peer needs no change: a pull is slowed where it
// reads, a push where it writes (the few bytes of requests and replies the
// other way count too).

// limiter is the shared bucket. Safe for concurrent use.
type limiter struct {
	l     *rate.Limiter
	burst int
}

// newLimiter returns a bucket of bytesPerSec bytes/s, nil for no limit. The
// burst is an eighth of a second's worth, at least 16 KiB (a few frames)
// and at most 1 MiB, so that the rate holds over any second or so.
func newLimiter(bytesPerSec int64) *limiter {
	if bytesPerSec <= 0 {
		return nil
	}
	burst := int(min(max(bytesPerSec/8, 16<<10), 1<<20))
	return &limiter{l: rate.NewLimiter(rate.Limit(bytesPerSec), burst), burst: burst}
}

// limitDialer wraps d so that its streams share lim; d is returned as is
// when lim is nil. A transport.CommandDialer stays one.
func limitDialer(d transport.Dialer, lim *limiter) transport.Dialer {
	if lim == nil {
		return d
	}
	if cd, ok := d.(transport.CommandDialer); ok {
		return limitedCommandDialer{limitedDialer{cd, lim}, cd}
	}
	return limitedDialer{d, lim}
}

type limitedDialer struct {
	d   transport.Dialer
	lim *limiter
}

func (d limitedDialer) Dial(ctx context.Context) (transport.Stream, error) {
	s, err := d.d.Dial(ctx)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	return &limitedStream{Stream: s, lim: d.lim, ctx: lctx, cancel: cancel}, nil
}

type limitedCommandDialer struct {
	limitedDialer
	cd transport.CommandDialer
}

func (d limitedCommandDialer) WithCommand(command string) transport.Dialer {
	return limitDialer(d.cd.WithCommand(command), d.lim)
}

// limitedStream charges the bucket for what passes through it. Close
// cancels a wait in progress.
type limitedStream struct {
	transport.Stream
	lim    *limiter
	ctx    context.Context
	cancel context.CancelFunc
}

// Read reads at most a burst, then waits for the tokens of what it read.
func (s *limitedStream) Read(p []byte) (int, error) {
	if len(p) > s.lim.burst {
		p = p[:s.lim.burst]
	}
	n, err := s.Stream.Read(p)
	if n > 0 {
		if werr := s.lim.l.WaitN(s.ctx, n); werr != nil && err == nil {
			err = io.ErrClosedPipe
		}
	}
	return n, err
}

// Write waits for the tokens of each burst-sized piece before writing it.
func (s *limitedStream) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		n := min(len(p), s.lim.burst)
		if err := s.lim.l.WaitN(s.ctx, n); err != nil {
			return written, io.ErrClosedPipe
		}
		m, err := s.Stream.Write(p[:n])
		written += m
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

func (s *limitedStream) Close() error {
	s.cancel()
	return s.Stream.Close()
}
