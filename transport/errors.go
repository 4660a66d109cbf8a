package transport

import (
	"errors"
	"fmt"
)

// ErrConnect marks errors reaching or authenticating to a remote host:
// TCP dial, SSH handshake, authentication, host key checks, a lost
// connection, a connection setup that timed out, and an -e program exiting
// with status 255 before any output (after some, the remote side ended
// early: ErrRemoteExited). Callers map it to
// exit code 255, as rsync does. Check with errors.Is.
var ErrConnect = errors.New("ssh connection failed")

// ErrHostKey marks host key verification failures: an unknown host, a
// changed or revoked key. It wraps ErrConnect, so errors.Is(err, ErrConnect)
// holds for it too. The error itself is usually a *HostKeyError.
var ErrHostKey = fmt.Errorf("%w: host key verification failed", ErrConnect)

// ErrRemoteExited marks a stream whose remote command (the agent, or the
// remote tar or rsync) ended with a status or a signal while the client
// still expected data: what rsync reports as "connection unexpectedly
// closed". Callers map it to exit code 12, as rsync does; a rerun completes
// the restore. Check with errors.Is.
var ErrRemoteExited = errors.New("the remote side ended early")

// ErrTimeout marks a stream on which no data moved, in either direction,
// for the idle timeout while the client was waiting for its peer: rsync's
// --timeout, whose message ("timeout in data send/receive") it keeps.
// Callers map it to exit code 30, as rsync does. Check with errors.Is.
var ErrTimeout = errors.New("timeout in data send/receive")

// ErrDaemonSyntax is returned by ParseLocation for rsync daemon addresses
// ("host::module", "rsync://host/module"), which restoresync does not speak.
var ErrDaemonSyntax = errors.New("rsync daemon syntax is not supported")

// ErrCommandRefused marks, with ErrConnect, a server that refused to run a
// command at all (its reply to the SSH exec request was a failure), as
// SFTP-only servers do; a subsystem may still answer there (see
// SubsystemDialer). Check with errors.Is.
var ErrCommandRefused = errors.New("the SSH server refused to run a command")

// ErrSubsystemRefused marks, with ErrConnect, a server that refused the
// subsystem asked for (no "sftp" subsystem configured). Check with
// errors.Is.
var ErrSubsystemRefused = errors.New("the SSH server refused the subsystem")
