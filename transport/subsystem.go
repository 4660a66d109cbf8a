package transport

import (
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"
)

// SubsystemDialer is a Dialer that can also open an SSH subsystem (RFC
// 4254 section 6.5) instead of running a command: the sftp method's
// streams are the remote's "sftp" subsystem, which SFTP-only accounts
// (OpenSSH's ForceCommand internal-sftp) still serve. Both SSH dialers
// implement it.
type SubsystemDialer interface {
	Dialer
	// WithSubsystem returns a Dialer, with the same connection settings,
	// whose streams are the subsystem name on the remote host: the
	// built-in client sends a subsystem request, an -e program is run as
	// "WORDS... [-l USER] [-p PORT] -s HOST NAME" (OpenSSH's ssh -s). A
	// server that refuses the subsystem gives an error wrapping
	// ErrSubsystemRefused and ErrConnect (for -e, ssh's exit status 255
	// before any output: ErrConnect). Safe for concurrent use.
	WithSubsystem(name string) Dialer
}

// WithSubsystem implements SubsystemDialer.
func (d *sshDialer) WithSubsystem(name string) Dialer {
	c := *d
	c.subsystem = name
	c.command = "subsystem " + name // for messages
	return &c
}

// WithSubsystem implements SubsystemDialer: ssh's -s before the host,
// the subsystem's name in place of the agent's command line.
func (d *rshDialer) WithSubsystem(name string) Dialer {
	c := *d
	n := len(d.args)
	c.args = append(append(append([]string(nil), d.args[:n-4]...), "-s", d.args[n-4]), name)
	return &c
}

// subsystemRefused is the error of a subsystem request the server did
// not grant; it closes client.
func (d *sshDialer) subsystemRefused(client *ssh.Client, err error) error {
	client.Close()
	if strings.Contains(err.Error(), "request failed") {
		return fmt.Errorf("%w: %s: %w: %q (is it configured on the server: sshd_config's Subsystem?)", ErrConnect, d.display, ErrSubsystemRefused, d.subsystem)
	}
	return fmt.Errorf("%w: %s: subsystem %q: %w", ErrConnect, d.display, d.subsystem, err)
}

// commandRefused marks x/crypto/ssh's error for an exec request that the
// server answered with a failure ("ssh: command ... failed") with
// ErrCommandRefused.
func commandRefused(err error) error {
	if msg := err.Error(); strings.HasPrefix(msg, "ssh: command ") && strings.HasSuffix(msg, " failed") {
		return &refusedError{err}
	}
	return err
}

// refusedError is an exec request the server refused: its text is
// x/crypto/ssh's, and it wraps ErrCommandRefused.
type refusedError struct{ err error }

func (e *refusedError) Error() string   { return e.err.Error() + " (the server refused to run it)" }
func (e *refusedError) Unwrap() []error { return []error{e.err, ErrCommandRefused} }
