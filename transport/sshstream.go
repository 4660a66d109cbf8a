package transport

import (
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// sshStream is one SSH connection with one session running the agent.
type sshStream struct {
	display string
	command string
	client  *ssh.Client
	session *ssh.Session
	stdin   io.WriteCloser
	stdout  io.Reader
	stderr  *TailBuffer

	readErr error // terminal read error; reader goroutine only
	// head is the first bytes of stdout (refusal), appended by the reader
	// goroutine under headMu: a failed Write reads it too.
	head   []byte
	headMu sync.Mutex

	waitOnce sync.Once
	waitErr  error

	// shared, when not nil, says that client is an SSHMux connection that
	// other streams use too: Close ends the session only.
	shared *muxSession
	// reused says that a Dial took the stream from the mux's parked ones.
	reused bool

	lost      atomic.Pointer[error] // set when keepalives went unanswered
	closed    atomic.Bool
	closeOnce sync.Once
	done      chan struct{} // closed by Close
}

// Read returns the remote agent's stdout. At its end Read returns io.EOF
// when the command exited 0, an error with the exit status and stderr
// tail otherwise, and an error wrapping ErrConnect when the connection was
// lost.
func (s *sshStream) Read(p []byte) (int, error) {
	if s.readErr != nil {
		return 0, s.readErr
	}
	n, err := s.stdout.Read(p)
	if len(s.head) < headBytes && n > 0 {
		s.headMu.Lock()
		s.head = keepHead(s.head, p[:n])
		s.headMu.Unlock()
	}
	if err == io.EOF {
		s.readErr = s.endError()
		err = s.readErr
	} else if err != nil {
		err = s.ioError("read", err)
	}
	return n, err
}

// endError says why stdout ended: a clean exit gives io.EOF.
func (s *sshStream) endError() error {
	if err := s.closedError(); err != nil {
		return err
	}
	s.waitOnce.Do(func() { s.waitErr = s.session.Wait() })
	if err := s.closedError(); err != nil {
		return err
	}
	var ee *ssh.ExitError
	var me *ssh.ExitMissingError
	switch {
	case s.waitErr == nil:
		return io.EOF
	case errors.As(s.waitErr, &ee):
		how := "status " + strconv.Itoa(ee.ExitStatus())
		if ee.Signal() != "" {
			how = "signal " + ee.Signal()
		}
		err := fmt.Errorf("%w: %s: remote %s exited with %s%s", ErrRemoteExited, s.display, commandName(s.command), how, StderrSuffix(s.Stderr()))
		if ee.Signal() != "" {
			return err
		}
		return refusal(err, ee.ExitStatus(), s.firstOutput())
	case errors.As(s.waitErr, &me):
		return fmt.Errorf("%w: %s: connection closed before the remote command exited%s", ErrConnect, s.display, StderrSuffix(s.Stderr()))
	case s.waitErr.Error() == "ssh: session not started":
		// A subsystem's session (WithSubsystem): x/crypto/ssh has no exit
		// status to wait for there, only the channel's end.
		return fmt.Errorf("%w: %s: the server ended the %s%s", ErrRemoteExited, s.display, s.command, StderrSuffix(s.Stderr()))
	default:
		return fmt.Errorf("%s: remote %s: %w", s.display, commandName(s.command), s.waitErr)
	}
}

// closedError reports a local Close or a keepalive timeout, else nil.
func (s *sshStream) closedError() error {
	if p := s.lost.Load(); p != nil {
		return *p
	}
	if s.closed.Load() {
		return fmt.Errorf("%s: %w", s.display, net.ErrClosed)
	}
	return nil
}

func (s *sshStream) ioError(op string, err error) error {
	if cerr := s.closedError(); cerr != nil {
		return cerr
	}
	return fmt.Errorf("%s: %s: %w", s.display, op, err)
}

// Write sends p to the remote agent's stdin. When the remote command has
// ended (the channel is closed: io.EOF), the error says how, as Read's end
// does: it wraps ErrRemoteExited with the exit status or signal.
func (s *sshStream) Write(p []byte) (int, error) {
	n, err := s.stdin.Write(p)
	if err != nil {
		if cerr := s.closedError(); cerr == nil && errors.Is(err, io.EOF) {
			if eerr := s.exitedError(); eerr != nil {
				return n, eerr
			}
		}
		err = s.ioError("write", err)
	}
	return n, err
}

// exitedError says how the remote command ended, for a write that found
// the channel closed: endError's answer, or, for a clean exit, an error
// wrapping ErrRemoteExited (the command ended before reading what was
// sent). It waits at most remoteExitWait for the exit status and returns
// nil when none came.
func (s *sshStream) exitedError() error {
	done := make(chan struct{})
	go func() {
		s.waitOnce.Do(func() { s.waitErr = s.session.Wait() })
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(remoteExitWait):
		return nil
	}
	err := s.endError()
	if err == io.EOF {
		err = fmt.Errorf("%w: %s: remote %s exited with status 0 before reading all that was sent%s", ErrRemoteExited, s.display, commandName(s.command), StderrSuffix(s.Stderr()))
	}
	return err
}

// awaiting implements setupWaiter: the session is up, so what did not
// answer is the remote command.
func (s *sshStream) awaiting() string {
	return fmt.Sprintf("the remote agent (%q, started over SSH) did not answer our protocol handshake", s.command)
}

// CloseWrite sends EOF to the remote agent's stdin.
func (s *sshStream) CloseWrite() error {
	if err := s.stdin.Close(); err != nil {
		return s.ioError("close stdin", err)
	}
	return nil
}

// Close closes the session and the connection; safe to call more than
// once and from any goroutine.
func (s *sshStream) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.done)
		if s.shared != nil {
			s.endShared() // the connection stays up for its other sessions
			return
		}
		// The connection goes first: closing only the channel (the
		// session) does not unblock a Write waiting for window space from
		// a peer that stopped reading (x/crypto/ssh's channel.Close sends
		// a close message and returns; writers are released only when the
		// peer's close arrives or the connection ends).
		if cerr := s.client.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) {
			err = fmt.Errorf("%s: close: %w", s.display, cerr)
		}
		s.session.Close()
	})
	return err
}

// Stderr returns the last 4 KiB of the remote agent's stderr.
func (s *sshStream) Stderr() string { return s.stderr.String() }

// keepaliveLoop sends a keepalive@openssh.com request every interval and
// closes the connection when maxMissed in a row go unanswered (OpenSSH's
// ServerAliveInterval and ServerAliveCountMax). Any reply counts,
// including OpenSSH's "request failed".
func (s *sshStream) keepaliveLoop(interval time.Duration, maxMissed int) {
	t := time.NewTicker(interval)
	defer t.Stop()
	connDone := make(chan struct{})
	go func() {
		s.client.Wait()
		close(connDone)
	}()
	var pending atomic.Int32
	for {
		select {
		case <-s.done:
			return
		case <-connDone:
			return
		case <-t.C:
		}
		if pending.Load() >= int32(maxMissed) {
			err := fmt.Errorf("%w: %s: connection lost: no reply to %d keepalives sent %v apart (ServerAliveInterval, ServerAliveCountMax)",
				ErrConnect, s.display, maxMissed, interval)
			s.lost.Store(&err)
			s.client.Close()
			return
		}
		pending.Add(1)
		// SendRequest blocks until the reply or the connection's end.
		go func() {
			if _, _, err := s.client.SendRequest("keepalive@openssh.com", true, nil); err == nil {
				pending.Store(0)
			}
		}()
	}
}

// commandName names a remote command in an error: `command "restoresync
// serve --sender"` when it is one short line, else `shell script (824
// bytes)`, so that an agent-less script (many lines) does not fill the
// message that says what failed; the status and stderr say that.
func commandName(command string) string {
	const maxQuoted = 80 // bytes: a command line that fits in a message
	if len(command) <= maxQuoted && !strings.ContainsAny(command, "\n;|") {
		return "command " + strconv.Quote(command)
	}
	return fmt.Sprintf("shell script (%d bytes)", len(command))
}

// firstOutput returns a copy of head; safe from any goroutine.
func (s *sshStream) firstOutput() []byte {
	s.headMu.Lock()
	defer s.headMu.Unlock()
	return slices.Clone(s.head)
}
