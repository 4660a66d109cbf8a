package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// rshWaitDelay bounds how long Wait waits for stderr after the -e
	// program exits, in case a child (a ProxyCommand, say) keeps the pipe
	// open.
	rshWaitDelay = time.Second
	// rshTermGrace is how long Close lets the program end after SIGTERM,
	// so that it can say on stderr what it was doing, before SIGKILL.
	rshTermGrace = 250 * time.Millisecond
)

// NewRshDialer returns a Dialer that runs an external program per stream,
// like rsync's -e: o.Rsh is split into words (honouring single quotes,
// double quotes and backslashes, without other shell expansion) and run as
//
//	WORDS... [-l USER] [-p PORT] HOST RESTORESYNC serve --stdio
//
// where -l and -p appear only when loc sets them and RESTORESYNC is
// o.RemotePath (shell-quoted) or "restoresync". The other SSHOptions fields
// are ignored: configure the program instead. Errors: an empty or badly
// quoted o.Rsh, a local loc. The result is safe for concurrent use.
func NewRshDialer(loc Location, o SSHOptions) (Dialer, error) {
	argv, err := SplitCommandLine(o.Rsh)
	if err != nil {
		return nil, fmt.Errorf("-e %q: %w", o.Rsh, err)
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("-e %q: empty command", o.Rsh)
	}
	if !loc.Remote() {
		return nil, fmt.Errorf("-e %s: %q is not a remote location", argv[0], loc.String())
	}
	if strings.HasPrefix(loc.Host, "-") {
		return nil, fmt.Errorf("-e %s: host %q starts with '-'", argv[0], loc.Host)
	}
	args := append([]string(nil), argv[1:]...)
	if loc.User != "" {
		args = append(args, "-l", loc.User)
	}
	if loc.Port != 0 {
		args = append(args, "-p", strconv.Itoa(loc.Port))
	}
	remotePath := o.RemotePath
	if remotePath == "" {
		remotePath = "restoresync"
	}
	// Separate words, as rsync passes them: ssh joins them with spaces,
	// and programs that exec directly (docker exec -i) get an argv.
	args = append(args, loc.Host, ShellQuote(remotePath), "serve", "--stdio")
	display := loc.Host
	if loc.User != "" {
		display = loc.User + "@" + display
	}
	return &rshDialer{program: argv[0], args: args, display: argv[0] + " " + display}, nil
}

// rshDialer runs one external program per stream; immutable, so Dial is
// safe for concurrent use.
type rshDialer struct {
	program string
	args    []string
	display string // "ssh user@host", for errors
}

// Dial starts a new process. ctx only gates the start: once Dial returns,
// the process lives until the Stream's Close (as a connection outlives its
// net.Dialer context), so a short dial timeout cannot kill a stream.
// A program that cannot be started gives an error wrapping ErrConnect.
func (d *rshDialer) Dial(ctx context.Context) (Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", d.display, err)
	}
	cmd := exec.Command(d.program, d.args...)
	s := &rshStream{display: d.display, cmd: cmd, stderr: new(TailBuffer)}
	var err error
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("%s: %w", d.display, err)
	}
	// stdout is a pipe of our own, not exec's StdoutPipe: Wait closes
	// that one as the program is reaped, and a failed Write reaps it,
	// which would lose what the program printed before it exited (a
	// forced command's refusal, an SFTP-only server's answer) while no
	// Read had taken it yet. Reaping sets a read deadline instead (wait).
	pr, pw, err := os.Pipe()
	if err != nil {
		s.stdin.Close()
		return nil, fmt.Errorf("%s: %w", d.display, err)
	}
	s.stdout = pr
	cmd.Stdout = pw
	cmd.Stderr = s.stderr
	cmd.WaitDelay = rshWaitDelay
	err = cmd.Start()
	pw.Close() // the program has its copy; EOF comes when it closes it
	if err != nil {
		pr.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrConnect, d.display, err)
	}
	return s, nil
}

// rshStream is one -e process.
type rshStream struct {
	display string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  *os.File // read end of the program's stdout; Close closes it
	stderr  *TailBuffer

	readErr   error       // terminal read error; reader goroutine only
	gotOutput atomic.Bool // some stdout arrived: the remote command ran
	// head is the first bytes of stdout (refusal), appended by the reader
	// goroutine under headMu: a failed Write reads it too.
	head   []byte
	headMu sync.Mutex

	waitOnce sync.Once
	waitErr  error

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// Read returns the program's stdout. At its end Read returns io.EOF when the
// program exited 0. Status 255 before any output (ssh's own failure:
// unreachable host, authentication, host key) gives an error wrapping
// ErrConnect with the stderr tail; status 255 after some output (the
// connection, or the remote command, ended mid-transfer: OpenSSH exits 255
// when the remote command is killed by a signal) and other failures give
// an error wrapping ErrRemoteExited with the exit status and stderr tail.
func (s *rshStream) Read(p []byte) (int, error) {
	if s.readErr != nil {
		return 0, s.readErr
	}
	n, err := s.stdout.Read(p)
	if n > 0 && !s.gotOutput.Load() {
		s.gotOutput.Store(true)
	}
	if len(s.head) < headBytes && n > 0 {
		s.headMu.Lock()
		s.head = keepHead(s.head, p[:n])
		s.headMu.Unlock()
	}
	switch {
	case err == io.EOF:
		s.readErr = s.endError()
		err = s.readErr
	case err != nil && s.closed.Load():
		err = fmt.Errorf("%s: %w", s.display, net.ErrClosed)
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The program was reaped rshWaitDelay ago (a failed Write asks
		// how it ended) and something it left behind (a ProxyCommand,
		// say) still holds its stdout open: it has exited, and how is
		// this read's answer too.
		s.readErr = s.endError()
		err = s.readErr
	case err != nil:
		err = fmt.Errorf("%s: read: %w", s.display, err)
	}
	return n, err
}

// endError waits for the process and says why its stdout ended.
func (s *rshStream) endError() error {
	err := s.wait()
	if s.closed.Load() {
		return fmt.Errorf("%s: %w", s.display, net.ErrClosed)
	}
	var ee *exec.ExitError
	switch {
	case err == nil || errors.Is(err, exec.ErrWaitDelay):
		return io.EOF
	case errors.As(err, &ee) && ee.ExitCode() == 255 && s.gotOutput.Load():
		// The remote command ran and answered: the connection or the
		// command ended mid-transfer, as the built-in client reports an
		// agent's death.
		return fmt.Errorf("%w: %s exited with status 255 after some output: the SSH connection or the remote command ended mid-transfer (ssh exits 255 for both, and when the remote command is killed by a signal)%s",
			ErrRemoteExited, s.display, StderrSuffix(s.Stderr()))
	case errors.As(err, &ee) && ee.ExitCode() == 255:
		kind := ErrConnect
		if strings.Contains(s.Stderr(), "Host key verification failed") {
			kind = ErrHostKey // OpenSSH's words for an unknown or changed key
		}
		err := fmt.Errorf("%w: %s exited with status 255 before any output%s", kind, s.display, StderrSuffix(s.Stderr()))
		switch stderr := s.Stderr(); {
		case strings.Contains(stderr, "exec request failed"):
			// OpenSSH's words for a refused exec request.
			err = fmt.Errorf("%w: %w: %s exited with status 255 before any output%s", kind, ErrCommandRefused, s.display, StderrSuffix(stderr))
		case strings.Contains(stderr, "Permission denied ("):
			err = Mark(err, ErrAuth) // OpenSSH's words when no key was taken
		case strings.Contains(stderr, "Received disconnect from ") && strings.Contains(stderr, ":12: "):
			// OpenSSH's words for SSH_DISCONNECT_TOO_MANY_CONNECTIONS.
			err = Mark(err, ErrBusy)
		}
		return err
	case errors.As(err, &ee):
		err := fmt.Errorf("%w: %s: remote command failed: %s%s", ErrRemoteExited, s.display, ee.ProcessState, StderrSuffix(s.Stderr()))
		if ee.ExitCode() < 0 {
			return err // a signal
		}
		return refusal(err, ee.ExitCode(), s.firstOutput())
	default:
		return fmt.Errorf("%s: %w", s.display, err)
	}
}

// wait reaps the process once; later calls return the same result. What
// the program printed before it exited stays readable: reads end at its
// stdout's EOF, or rshWaitDelay after the reaping when a child of it
// still holds the pipe.
func (s *rshStream) wait() error {
	s.waitOnce.Do(func() {
		s.waitErr = s.cmd.Wait()
		s.stdout.SetReadDeadline(time.Now().Add(rshWaitDelay))
	})
	return s.waitErr
}

// Write sends p to the program's stdin. When the program has exited (its
// stdin is gone), the error says how, as Read's end does.
func (s *rshStream) Write(p []byte) (int, error) {
	n, err := s.stdin.Write(p)
	if err != nil {
		if s.closed.Load() {
			return n, fmt.Errorf("%s: %w", s.display, net.ErrClosed)
		}
		if eerr := s.exitedError(); eerr != nil {
			return n, eerr
		}
		return n, fmt.Errorf("%s: write: %w", s.display, err)
	}
	return n, nil
}

// exitedError says how the program ended, for a write that failed: it
// waits at most remoteExitWait for the program to exit and returns
// endError's answer (an error wrapping ErrRemoteExited for a clean exit,
// which ended before reading all that was sent), or nil when it did not
// exit.
func (s *rshStream) exitedError() error {
	if !s.exited(remoteExitWait) {
		return nil
	}
	err := s.endError()
	if err == io.EOF {
		err = fmt.Errorf("%w: %s exited with status 0 before reading all that was sent%s", ErrRemoteExited, s.display, StderrSuffix(s.Stderr()))
	}
	return err
}

// exited waits at most d for the program to be reaped and reports whether
// it was.
func (s *rshStream) exited(d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		s.wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// awaiting implements setupWaiter. Through an external program there is no
// telling whether the SSH connection or the remote agent is silent; its
// stderr (added by the caller) may say.
func (s *rshStream) awaiting() string { return s.silent("remote agent") }

// silent says that nothing came through the program, from the SSH
// connection or from peer ("remote agent", "remote command").
func (s *rshStream) silent(peer string) string {
	what := "no answer came through " + s.display + " (either the SSH connection or the " + peer + " is silent; "
	if trimSpace(s.Stderr()) == "" {
		return what + "the command printed nothing on stderr: ssh -v or -o ConnectTimeout tells which)"
	}
	return what + "its stderr follows)"
}

// CloseWrite closes the program's stdin.
func (s *rshStream) CloseWrite() error {
	if err := s.stdin.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("%s: close stdin: %w", s.display, err)
	}
	return nil
}

// Close ends the program and reaps it: SIGTERM, then SIGKILL when it is
// still running rshTermGrace later, so that what it printed on stderr
// until then is kept (Stderr). Safe to call more than once and from any
// goroutine; later calls wait for the first to finish.
func (s *rshStream) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		defer s.stdout.Close() // after the reaping: a blocked Read ends
		s.stdin.Close()
		if err := s.cmd.Process.Signal(syscall.SIGTERM); err == nil && s.exited(rshTermGrace) {
			return
		}
		if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			s.closeErr = fmt.Errorf("%s: kill: %w", s.display, err)
		}
		s.wait()
	})
	return s.closeErr
}

// Stderr returns the last 4 KiB of the program's stderr.
func (s *rshStream) Stderr() string { return s.stderr.String() }

// WithCommand implements CommandDialer: the program's arguments end with
// the host and command instead of the agent's command line.
func (d *rshDialer) WithCommand(command string) Dialer {
	c := *d
	c.args = append(append([]string(nil), d.args[:len(d.args)-3]...), command)
	return &c
}

// firstOutput returns a copy of head; safe from any goroutine.
func (s *rshStream) firstOutput() []byte {
	s.headMu.Lock()
	defer s.headMu.Unlock()
	return slices.Clone(s.head)
}
