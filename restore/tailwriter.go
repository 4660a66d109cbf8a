package restore

import "sync"

// tailWriter keeps the last max bytes written to it (gokrazy's log, for
// error messages). Safe for concurrent use.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

// Write appends p, keeping only the tail; it never fails.
func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String returns the kept bytes.
func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
