package restore

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
)

// MethodAuto, the default, chooses the method per restore from what it can
// see, and says why in Report.MethodReason:
//
//  1. When the restoresync agent answers on the remote (or both sides are
//     local): raw. It is the fastest full copy measured here (parallel
//     streams, batched small files), and for files DST already holds in
//     another version it sends native deltas, which moved fewer bytes than
//     rsync on a 1% change (see the README's benchmarks).
//  2. When the remote has no agent (pull only; --remote-path none, or the
//     agent is not found): if DST already holds files, rsync against the
//     remote's own rsync, so that unchanged data is not sent again;
//     otherwise the remote's own tar on one stream, the cheaper full copy.
//  3. When the remote allows SFTP only (commands are refused, or answered
//     with internal-sftp's "This service allows sftp connections only.",
//     and its sftp subsystem answers: sftp_detect.go): sftp, the one
//     method such a server can serve (several SRCs, -R and --files-from
//     still need the agent).
const MethodAuto Method = "auto"

func init() { registerMethod(MethodAuto, runAuto) }

func runAuto(ctx context.Context, o Options, src, dst transport.Location, rep *Report) error {
	agentless := src.Remote() && o.SSH.RemotePath == NoAgent && o.Dialer == nil
	if o.selective() {
		// Only raw does all of the selection options.
		if agentless {
			return fmt.Errorf("%w: %s need the restoresync agent on the remote (the raw method), not --remote-path none", ErrUsage, o.selectionFlags())
		}
		rep.Method, rep.MethodReason = string(MethodRaw), "selection options ("+o.selectionFlags()+"): raw, the method that does them all"
		err := runRaw(ctx, o, src, dst, rep)
		if sftpSelection(o) && noAgentAnswer(err, rep) {
			if reason := sftpOnlyReason(ctx, o, src, err); reason != "" {
				return autoSFTP(ctx, o, src, dst, rep, err, reason)
			}
		}
		return err
	}
	if !agentless {
		rep.Method = string(MethodRaw)
		local := !src.Remote() && !dst.Remote()
		if local {
			rep.MethodReason = "both sides are local: raw"
		}
		err := runRaw(ctx, o, src, dst, rep)
		if !local {
			rep.MethodReason = rawReason(err, rep)
		}
		if err == nil || !src.Remote() || o.Dialer != nil || !noAgentAnswer(err, rep) {
			return err
		}
		if reason := sftpOnlyReason(ctx, o, src, err); reason != "" {
			return autoSFTP(ctx, o, src, dst, rep, err, reason)
		}
		if !agentMissing(err) {
			return err
		}
		if o.Warnf != nil {
			o.Warnf("no restoresync agent on %s (%v): using the remote's own tools", src.Host, err)
		}
		*rep = Report{Compression: rep.Compression, Jobs: rep.Jobs}
	}
	o.SSH.RemotePath = NoAgent // the remote's own tools from here on
	if o.Verify && o.Warnf != nil {
		o.Warnf("--verify applies to the raw method only: the remote's own tools run without it")
	}
	o.Verify = false
	var err error
	if holdsFiles(dst.Path) {
		rep.Method, rep.MethodReason = string(MethodRsync), "no agent on the remote and DST already holds files: the remote's rsync, for deltas"
		err = runRsync(ctx, o, src, dst, rep)
	} else {
		rep.Method, rep.MethodReason = string(MethodTar), "no agent on the remote and DST is missing or empty: the remote's tar, one full stream"
		err = runTar(ctx, o, src, dst, rep)
	}
	if err != nil && rep.Files == 0 && (noCommands(err) || errors.Is(err, transport.ErrRemoteExited) || errors.Is(err, transfer.ErrProtocol)) {
		if reason := sftpOnlyReason(ctx, o, src, err); reason != "" {
			return autoSFTP(ctx, o, src, dst, rep, err, reason)
		}
	}
	return err
}

// noCommands reports whether err, a remote command's failure, may be an
// SFTP-only server's: no agent answered, or the command was refused.
func noCommands(err error) bool {
	return agentMissing(err) || errors.Is(err, transport.ErrCommandRefused)
}

// noAgentAnswer reports whether err, raw's failure with rep, may be an
// SFTP-only server's: noCommands, or the remote command exited before
// the agent said anything (internal-sftp's message and exit may beat the
// handshake, which then sees only the exit).
func noAgentAnswer(err error, rep *Report) bool {
	return noCommands(err) ||
		errors.Is(err, transport.ErrRemoteExited) && rep.WireBytes == 0 && !errors.As(err, new(*transfer.RemoteError))
}

// sftpSelection reports whether the sftp method does every selection
// option set: filters, --delete, --dry-run and -i, not several SRCs, -R
// or --files-from.
func sftpSelection(o Options) bool {
	return len(o.MoreSrc) == 0 && !o.Relative && o.FilesFrom == nil
}

// autoSFTP runs the sftp method in place of the method that failed with
// err on an SFTP-only remote, reason saying why.
func autoSFTP(ctx context.Context, o Options, src, dst transport.Location, rep *Report, err error, reason string) error {
	if o.Warnf != nil {
		o.Warnf("%s allows SFTP only (%v): using the sftp method", src.Host, err)
	}
	if o.Verify && o.Warnf != nil {
		o.Warnf("--verify applies to the raw method only: the sftp method runs without it")
	}
	if c := o.Compression.Codec; c != transfer.CodecAuto && c != transfer.CodecNone {
		if o.Warnf != nil {
			o.Warnf("--compress %s applies to the raw method only: the sftp method sends uncompressed", o.Compression)
		}
		o.Compression = transfer.Compression{Codec: transfer.CodecNone}
	}
	*rep = Report{Method: string(MethodSFTP), MethodReason: reason, Compression: rep.Compression, Jobs: o.Jobs}
	o.Verify = false
	return runSFTP(ctx, o, src, dst, rep)
}

// rawReason is Report.MethodReason for raw chosen by auto with a remote
// side, once runRaw returned err: it claims the agent only when the agent
// answered (streams came up, so wire bytes were counted, or it sent its
// own error, such as a missing SRC).
func rawReason(err error, rep *Report) string {
	if err == nil || rep.WireBytes > 0 || errors.As(err, new(*transfer.RemoteError)) {
		return "the restoresync agent answered: raw, with deltas for files DST already holds"
	}
	return "raw, tried first: the run failed before the restoresync agent answered (see the error)"
}

// holdsFiles reports whether the local directory dir exists and is not
// empty.
func holdsFiles(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	return err == nil && len(names) > 0
}
