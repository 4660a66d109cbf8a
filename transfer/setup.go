package transfer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/restoresync/restoresync/transport"
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
// -e program is killed) and the error wraps transport.ErrConnect (exit 255, as ssh's
// ConnectTimeout); when t.Idle is shorter and expires first, the error
// wraps transport.ErrTimeout (exit 30). Either error names the option and says what
// did not answer: the TCP connection, the SSH server's handshake, the
// remote agent, or, with -e, the program (whose stderr is added). Other
// errors are Dial's and Handshake's; ctx ending first gives its error. An
// expired setup is reported by those marks, not as
// context.DeadlineExceeded. On error the stream is closed. A stream that
// d's SSHMux had parked (Conn.Release) whose handshake fails, short of a
// refusal, is replaced by a new one: its agent may have ended meanwhile.
// Safe for concurrent use (each call opens its own stream).
func Open(ctx context.Context, d transport.Dialer, h Hello, t Timeouts) (transport.Stream, *Conn, error) {
	sctx, cancel, expired := setupContext(ctx, t)
	defer cancel()
	s, err := d.Dial(sctx)
	if err != nil {
		return nil, nil, expired(err, transport.DialAwaiting(err))
	}
	c, err := Handshake(sctx, s, h)
	var refused *RemoteError
	for err != nil && transport.Reused(s) && sctx.Err() == nil && !errors.As(err, &refused) {
		// A parked agent that ended while it waited: a new stream.
		s.Close()
		if s, err = d.Dial(sctx); err != nil {
			return nil, nil, expired(err, transport.DialAwaiting(err))
		}
		c, err = Handshake(sctx, s, h)
	}
	if err != nil {
		s.Close() // waits for an -e program to end, so that its stderr is complete
		return nil, nil, withStderr(s, expired(err, transport.HandshakeAwaiting(s)))
	}
	c.SetIdleTimeout(t.Idle)
	return s, c, nil
}

// setupContext bounds one stream's setup by t (see Open): the context to
// dial and handshake with, its cancel, and expired, which turns a setup
// error into the transport.ErrConnect or transport.ErrTimeout one, naming what (a clause
// saying what did not answer), once the limit has passed (other errors,
// and any error once ctx ended, are returned as they are).
func setupContext(ctx context.Context, t Timeouts) (context.Context, context.CancelFunc, func(err error, what string) error) {
	limit, byIdle := t.Connect, false
	if limit <= 0 {
		limit = transport.DefaultConnectTimeout
	}
	if t.Idle > 0 && t.Idle < limit {
		limit, byIdle = t.Idle, true
	}
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, limit)
	// The dialer's own deadline can fire a moment before sctx's, so the
	// clock decides too.
	expired := func(err error, what string) error {
		if ctx.Err() != nil || !errors.Is(sctx.Err(), context.DeadlineExceeded) && time.Since(start) < limit {
			return err
		}
		took := time.Since(start).Round(time.Second / 10)
		if byIdle {
			return fmt.Errorf("%w: connection setup: no answer %v after it began (--timeout %v): %s",
				transport.ErrTimeout, took, t.Idle, what)
		}
		return fmt.Errorf("%w: connection setup timed out after %v (--contimeout %v): %s",
			transport.ErrConnect, took, limit, what)
	}
	return sctx, cancel, expired
}
