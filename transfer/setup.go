package transfer

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Timeouts bound a stream's life: its setup and its silences.
type Timeouts struct {
	// Connect bounds connection setup, from the start of Dial to the end
	// of our protocol handshake (Hello): TCP dial, SSH handshake and
	// authentication, the start of the remote agent and its answer, or,
	// with -e, the whole life of the program until the agent answers.
	// rsync's --contimeout; 0 means 30 seconds.
	Connect time.Duration
	// Idle is rsync's --timeout (see Conn.SetIdleTimeout); it bounds the
	// setup too, as a silence before the agent answered. 0 means none.
	Idle time.Duration
}

// Open dials one stream with d and does the protocol handshake h on it
// (connection setup), bounded by t.Connect and t.Idle; the Conn it returns
// has t.Idle as its idle timeout. The stream is returned too, for callers
// that must be able to tear it down without a goodbye.
//
// When the setup takes longer than t.Connect, the stream is torn down (an
// -e program is killed) and the error wraps ErrConnect (exit 255, as ssh's
// ConnectTimeout); when t.Idle is shorter and expires first, the error
// wraps ErrTimeout (exit 30). Other errors are Dial's and Handshake's; ctx
// ending first gives its error. An expired setup is reported by those
// marks, not as context.DeadlineExceeded. On error the stream is closed. Safe for
// concurrent use (each call opens its own stream).
func Open(ctx context.Context, d Dialer, h Hello, t Timeouts) (Stream, *Conn, error) {
	sctx, cancel, expired := setupContext(ctx, t)
	defer cancel()
	s, err := d.Dial(sctx)
	if err != nil {
		return nil, nil, expired(err)
	}
	c, err := Handshake(sctx, s, h)
	if err != nil {
		err = expired(err)
		s.Close()
		return nil, nil, withStderr(s, err)
	}
	c.SetIdleTimeout(t.Idle)
	return s, c, nil
}

// setupContext bounds one stream's setup by t (see Open): the context to
// dial and handshake with, its cancel, and expired, which turns a setup
// error into the ErrConnect or ErrTimeout one once the limit has passed
// (other errors, and any error once ctx ended, are returned as they are).
func setupContext(ctx context.Context, t Timeouts) (context.Context, context.CancelFunc, func(error) error) {
	limit, byIdle := t.Connect, false
	if limit <= 0 {
		limit = defaultSSHTimeout
	}
	if t.Idle > 0 && t.Idle < limit {
		limit, byIdle = t.Idle, true
	}
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, limit)
	expired := func(err error) error {
		if ctx.Err() != nil || !errors.Is(sctx.Err(), context.DeadlineExceeded) {
			return err
		}
		took := time.Since(start).Round(time.Second / 10)
		why := ""
		if !errors.Is(err, context.DeadlineExceeded) {
			why = " (" + err.Error() + ")"
		}
		if byIdle {
			return fmt.Errorf("%w: no answer from the remote agent %v after the connection began (--timeout %v)%s",
				ErrTimeout, took, t.Idle, why)
		}
		return fmt.Errorf("%w: connection setup timed out after %v (--contimeout %v): the remote agent did not answer the handshake%s",
			ErrConnect, took, limit, why)
	}
	return sctx, cancel, expired
}
