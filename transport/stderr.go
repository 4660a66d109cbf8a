package transport

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// installHint is added to an error whose stderr says the agent was not
// found.
const installHint = " (is restoresync installed on the remote host? --remote-path names its binary there)"

// WithStderr appends what the remote wrote to stderr, which usually says
// why it failed ("restoresync: command not found"), leaving out the lines
// the error already says (the agent prints its error there too), and the
// install hint when the agent was not found. err already decorated by
// WithStderr is not decorated again.
func WithStderr(s Stream, err error) error {
	msg := trimSpace(s.Stderr())
	if extra := unsaid(msg, err.Error()); extra != "" {
		err = fmt.Errorf("%w; remote stderr: %s", err, extra)
	}
	if (strings.Contains(msg, "not found") || strings.Contains(err.Error(), "status 127")) && !strings.Contains(err.Error(), installHint) {
		err = fmt.Errorf("%w%s", err, installHint)
	}
	return err
}

// unsaid returns the lines of stderr that text does not contain, also
// without the "restoresync: " or "restoresync serve: " prefix the agent
// puts before its errors.
func unsaid(stderr, text string) string {
	var keep []string
	for _, l := range strings.Split(stderr, "\n") {
		l = strings.TrimRight(l, "\r ")
		if l == "" || strings.Contains(text, l) || strings.Contains(text, strings.TrimPrefix(l, "restoresync: ")) ||
			strings.Contains(text, strings.TrimPrefix(l, "restoresync serve: ")) {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == ' ' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}

// StderrSuffix formats a peer's stderr tail for an error message:
// ": remote stderr: TAIL", or "" when stderr holds only white space.
func StderrSuffix(stderr string) string {
	stderr = strings.TrimSpace(stderr)
	if stderr == "" {
		return ""
	}
	return ": remote stderr: " + stderr
}

// TailBuffer keeps the last 4 KiB written to it: a peer's stderr, for
// error messages. The zero value is ready to use; it is safe for concurrent
// use.
type TailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

// Write appends p, dropping the oldest bytes beyond the limit; it never
// fails.
func (t *TailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) >= stderrTailBytes {
		t.buf = append(t.buf[:0], p[len(p)-stderrTailBytes:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - stderrTailBytes; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// String returns the kept bytes, starting at a UTF-8 character boundary.
func (t *TailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
	}
	return string(b)
}
