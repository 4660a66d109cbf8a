package transport

import (
	"fmt"
	"sync"
	"time"
)

// FirstByteTimeout bounds the setup of a stream that carries one remote
// command (agent-less tar, rsync and find), which has no handshake of ours
// for Open to bound: when no byte has been read from s within connect
// (--contimeout; 0 means 30 s), s is closed (an -e program is stopped) and
// Read returns an error wrapping ErrConnect that names the option and what
// did not answer, with the program's stderr. Once a byte has been read it
// does nothing more. The result is used like s; its Read must not be called
// concurrently (Write may be).
func FirstByteTimeout(s Stream, connect time.Duration) Stream {
	if connect <= 0 {
		connect = DefaultConnectTimeout
	}
	fs := &firstByteStream{Stream: s, limit: connect, start: time.Now()}
	fs.timer = time.AfterFunc(connect, func() {
		fs.mu.Lock()
		fire := !fs.got
		fs.expired = fire
		fs.mu.Unlock()
		if fire {
			s.Close()
		}
	})
	return fs
}

type firstByteStream struct {
	Stream
	limit time.Duration
	start time.Time
	timer *time.Timer

	mu      sync.Mutex
	got     bool // a byte was read: the setup is over
	expired bool // the timer fired first and closed the stream
}

func (s *firstByteStream) Read(p []byte) (int, error) {
	n, err := s.Stream.Read(p)
	s.mu.Lock()
	expired, first := s.expired, !s.got
	if n > 0 && !s.got {
		s.got = true
		s.timer.Stop()
	}
	s.mu.Unlock()
	if err != nil && first && expired {
		err = WithStderr(s.Stream, fmt.Errorf("%w: connection setup timed out after %v (--contimeout %v): %s",
			ErrConnect, time.Since(s.start).Round(time.Second/10), s.limit, commandAwaiting(s.Stream)))
	}
	return n, err
}

// Close stops the timer and closes the stream.
func (s *firstByteStream) Close() error {
	s.timer.Stop()
	return s.Stream.Close()
}

// commandAwaiting says what a remote command's stream that sent nothing was
// waiting for.
func commandAwaiting(s Stream) string {
	if rs, ok := s.(*rshStream); ok {
		return rs.silent("remote command")
	}
	return "the remote command sent nothing"
}
