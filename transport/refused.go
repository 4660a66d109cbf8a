package transport

import (
	"bytes"
	"errors"
)

// What a rerun cannot fix. A remote command that ends with an exit status
// before it sends a byte on its stdout did not run, or refused to: a
// rerun of the same command meets the same answer. The streams mark that
// end with these kinds (the message stays as it is), checked with
// errors.Is.

// ErrRemoteRefused marks a remote command that exited with a non-zero
// status (not a signal) before any output on its stdout: the account may
// not run it (a forced command, a restricted shell), it is not installed
// (ErrRemoteNotFound), or it refused its arguments (a usage error found on
// the remote). The error also wraps ErrRemoteExited (exit 12).
var ErrRemoteRefused = errors.New("the remote host refused the command")

// ErrRemoteNotFound marks, with ErrRemoteRefused, a remote command that
// exited with status 127: the shell did not find it (or a tool it needs,
// which agent-less commands check for first).
var ErrRemoteNotFound = errors.New("the remote command is not installed")

// ErrSFTPOnly marks, with ErrRemoteRefused, an answer of a server that
// allows SFTP only: OpenSSH's internal-sftp forced on the account answers
// every command with sftpOnlyAnswer and exits 1.
var ErrSFTPOnly = errors.New("the server allows SFTP connections only")

// ErrAuth marks, with ErrConnect, an SSH authentication failure: the
// server took none of the keys offered.
var ErrAuth = errors.New("SSH authentication failed")

// sftpOnlyAnswer is what OpenSSH's sshd writes on stdout for a command
// when the account is forced to internal-sftp.
const sftpOnlyAnswer = "This service allows sftp connections only."

// IsSFTPOnlyAnswer reports whether out, the first bytes a remote command
// sent, is the answer of a server that allows SFTP only.
func IsSFTPOnlyAnswer(out []byte) bool {
	return bytes.HasPrefix(bytes.TrimSpace(out), []byte(sftpOnlyAnswer))
}

// Mark returns err, with its message unchanged, marked with kinds too:
// errors.Is(Mark(err, k), k) holds, and so does every errors.Is and As of
// err.
func Mark(err error, kinds ...error) error {
	if err == nil || len(kinds) == 0 {
		return err
	}
	return &markedError{err: err, kinds: kinds}
}

type markedError struct {
	err   error
	kinds []error
}

func (e *markedError) Error() string   { return e.err.Error() }
func (e *markedError) Unwrap() []error { return append([]error{e.err}, e.kinds...) }

// refusal marks err, the end of a remote command that exited with status
// (not by a signal) after sending head (the first bytes of its stdout, at
// most headBytes), with what a rerun cannot fix: a server that allows SFTP
// only, or a command that sent nothing and exited non-zero (127: not
// found); ExitBusy before any output is a server at its bound of sessions
// (ErrBusy, with ErrConnect). Other ends are returned as they are.
func refusal(err error, status int, head []byte) error {
	switch {
	case status == 0:
		return err
	case status == ExitBusy && len(head) == 0:
		return Mark(err, ErrConnect, ErrBusy)
	case IsSFTPOnlyAnswer(head):
		return Mark(err, ErrRemoteRefused, ErrSFTPOnly)
	case len(head) > 0:
		return err
	case status == 127:
		return Mark(err, ErrRemoteRefused, ErrRemoteNotFound)
	}
	return Mark(err, ErrRemoteRefused)
}

// headBytes is how much of a remote command's first output the streams
// keep, for refusal.
const headBytes = 64

// keepHead appends to head what of p fits in headBytes.
func keepHead(head []byte, p []byte) []byte {
	if n := headBytes - len(head); n > 0 {
		head = append(head, p[:min(n, len(p))]...)
	}
	return head
}
