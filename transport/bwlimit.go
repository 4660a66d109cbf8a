package transport

import (
	"context"
	"io"

	"golang.org/x/time/rate"
)

// Bandwidth limit (rsync's --bwlimit): one token bucket shared by every
// stream of a restore, charged on the client side of each stream for the
// bytes it reads and writes, so the peer needs no change: a pull is slowed
// where it reads, a push where it writes (the few bytes of requests and
// replies the other way count too).

// Limiter is a token bucket of bytes per second that the streams of
// LimitDialer share. Safe for concurrent use.
type Limiter struct {
	l     *rate.Limiter
	burst int
}

// NewLimiter returns a bucket of bytesPerSec bytes/s, nil (no limit) when
// bytesPerSec <= 0. The burst is an eighth of a second's worth, at least
// 16 KiB (a few frames) and at most 1 MiB, so that the rate holds over any
// second or so.
func NewLimiter(bytesPerSec int64) *Limiter {
	if bytesPerSec <= 0 {
		return nil
	}
	burst := int(min(max(bytesPerSec/8, 16<<10), 1<<20))
	return &Limiter{l: rate.NewLimiter(rate.Limit(bytesPerSec), burst), burst: burst}
}

// LimitDialer wraps d so that its streams share lim: each Read returns at
// most a burst and waits for the tokens of what it read, each Write waits
// for the tokens of every burst-sized piece before writing it, and Close
// ends a wait in progress (the call then fails with io.ErrClosedPipe). d
// is returned as is when lim is nil; a CommandDialer stays one. Safe for
// concurrent use, as d is.
func LimitDialer(d Dialer, lim *Limiter) Dialer {
	if lim == nil {
		return d
	}
	if cd, ok := d.(CommandDialer); ok {
		return limitedCommandDialer{limitedDialer{cd, lim}, cd}
	}
	return limitedDialer{d, lim}
}

type limitedDialer struct {
	d   Dialer
	lim *Limiter
}

func (d limitedDialer) Dial(ctx context.Context) (Stream, error) {
	s, err := d.d.Dial(ctx)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	return &limitedStream{Stream: s, lim: d.lim, ctx: lctx, cancel: cancel}, nil
}

type limitedCommandDialer struct {
	limitedDialer
	cd CommandDialer
}

func (d limitedCommandDialer) WithCommand(command string) Dialer {
	return LimitDialer(d.cd.WithCommand(command), d.lim)
}

// limitedStream charges the bucket for what passes through it. Close
// cancels a wait in progress.
type limitedStream struct {
	Stream
	lim    *Limiter
	ctx    context.Context
	cancel context.CancelFunc
}

func (s *limitedStream) unwrap() Stream { return s.Stream }

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
