package transfer

import (
	"time"

	"github.com/restoresync/restoresync/transport"
)

// SetIdleTimeout makes the Conn fail with an error wrapping
// transport.ErrTimeout when
// no data moves on its stream for d while a request is outstanding (the
// stream is then closed under it). d <= 0 means no timeout. Call it once,
// right after Handshake, before any request.
func (c *Conn) SetIdleTimeout(d time.Duration) {
	if d <= 0 || c.idle != nil {
		return
	}
	c.idle = transport.StartIdleWatch(d,
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
