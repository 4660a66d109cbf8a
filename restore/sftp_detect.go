package restore

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/restoresync/restoresync/transport"
)

// internalSFTPOnly is what OpenSSH's internal-sftp (ForceCommand
// internal-sftp) answers a command with, on the session's output, before
// it exits with status 1.
const internalSFTPOnly = "This service allows sftp connections only."

// sftpOnlyProbe is the command run to see whether the remote runs
// commands at all.
const sftpOnlyProbe = "echo restoresync-probe"

// sftpOnlyReason tells whether the remote of src allows SFTP only, once a
// command on it (the agent, or the remote's own tar or rsync) failed with
// err, and returns the reason auto gives for the sftp method; "" when the
// remote is not SFTP-only (or cannot be reached). SFTP-only means both:
// commands are refused (the server's reply to the exec request, or ssh's
// "exec request failed") or answered with internal-sftp's "This service
// allows sftp connections only." (in err, or else from a probe command),
// and the "sftp" subsystem answers the SFTP handshake.
func sftpOnlyReason(ctx context.Context, o Options, src transport.Location, err error) string {
	if o.Dialer != nil || !src.Remote() || err == nil || errors.Is(err, context.Canceled) || errors.Is(err, ErrUsage) {
		return ""
	}
	d, derr := dialer(o, src)
	if derr != nil {
		return ""
	}
	why := ""
	switch {
	case strings.Contains(err.Error(), internalSFTPOnly):
		why = "it answers commands with \"" + internalSFTPOnly + "\""
	case errors.Is(err, transport.ErrCommandRefused):
		why = "it refuses to run commands"
	default:
		cd, ok := d.(transport.CommandDialer)
		if !ok {
			return ""
		}
		if why = probeCommands(ctx, o, cd); why == "" {
			return ""
		}
	}
	sd, ok := d.(transport.SubsystemDialer)
	if !ok {
		return ""
	}
	c, serr := openSFTP(ctx, o, sd.WithSubsystem(sftpSubsystem))
	if serr != nil {
		return ""
	}
	c.c.Close()
	c.s.Close()
	return "no agent on the remote, and it allows SFTP only (" + why + "; its sftp subsystem answers): sftp"
}

// probeCommands runs sftpOnlyProbe on the remote and says how an
// SFTP-only server answered it; "" when the remote runs it (or another
// failure says nothing of SFTP).
func probeCommands(ctx context.Context, o Options, cd transport.CommandDialer) string {
	s, err := cd.WithCommand(sftpOnlyProbe).Dial(ctx)
	if err != nil {
		if errors.Is(err, transport.ErrCommandRefused) {
			return "it refuses to run commands"
		}
		return ""
	}
	defer s.Close()
	s = transport.FirstByteTimeout(s, o.SSH.Timeout)
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	s.CloseWrite()
	out, rerr := io.ReadAll(io.LimitReader(s, 4<<10))
	switch {
	case strings.Contains(string(out)+s.Stderr(), internalSFTPOnly):
		return "it answers commands with \"" + internalSFTPOnly + "\""
	case errors.Is(rerr, transport.ErrCommandRefused):
		return "it refuses to run commands"
	}
	return ""
}
