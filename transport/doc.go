// Package transport is how bytes reach the far side of a restore: a
// Stream is one bidirectional byte stream to a process on the backup host
// (or to the read-only endpoint of this program), and a Dialer opens
// them. It frames nothing: what crosses a Stream is the business of its
// user (package transfer's protocol, a remote tar's archive, the rsync
// protocol).
//
// The ways to dial, in the words of rsync and OpenSSH:
//
//	ParseLocation("user@host:PATH" | "ssh://user@host:port/PATH" | PATH)
//	NewSSHDialer(loc, opts)  built-in x/crypto/ssh client: ssh_config, known_hosts,
//	                         identities and ssh-agent; one SSH connection per stream
//	opts.Mux = NewSSHMux(n, 10) the same, streams as sessions on at most n shared
//	                         connections (restore --accounts)
//	NewRshDialer(loc, opts)  -e COMMAND: one process per stream (rsync's --rsh)
//	d.WithCommand(cmd)       the same host, another remote command (agent-less tar, rsync)
//	d.WithSubsystem("sftp")  the same host, an SSH subsystem instead (the sftp method)
//	LimitDialer(d, lim)      --bwlimit: the streams share one token bucket
//	ListenAndServe(cfg)      serve --listen: a read-only SSH endpoint that runs
//	                         cfg.Handler for each "serve --stdio" session, and
//	                         serves the sftp subsystem read-only (cfg.SFTPRoot),
//	                         within cfg.MaxStartups and cfg.MaxSessions
//
// and the wrappers a caller puts around a Stream: FirstByteTimeout (the
// setup of a remote command, --contimeout), IdleTimeoutStream and
// IdleWatch (rsync's --timeout), CountingReader and CountingWriter (wire
// bytes).
//
// Guarantees: every blocking step is bounded: the TCP dial and the SSH
// handshake by SSHOptions.Timeout, a lost link by keepalives, a silent
// peer by the caller's timeouts; Close unblocks a Stream's reads and
// writes from any goroutine. The built-in client checks host keys against
// known_hosts (StrictHostKeyChecking is always on). Errors say which peer
// and which step failed and wrap the sentinels of errors.go: ErrConnect
// (exit 255, as rsync), ErrHostKey, ErrRemoteExited (exit 12), ErrTimeout
// (exit 30); ErrCommandRefused and ErrSubsystemRefused (with ErrConnect);
// and the kinds of refused.go mark what a rerun cannot fix
// (ErrRemoteRefused, ErrRemoteNotFound, ErrSFTPOnly, ErrAuth), keeping the
// message as it is.
//
// An interrupted stream leaves nothing behind here: closing it closes the
// SSH connection or stops the -e program (SIGTERM, then SIGKILL), so the
// remote command sees its stdin end.
//
// Files: stream.go — Stream, Dialer, CommandDialer, SSHOptions;
// location.go — Location and ParseLocation; ssh.go — the built-in SSH
// client's dialer and its bounded setup; sshstream.go — its streams and
// keepalives; sshmux.go — SSHMux, streams as sessions on shared
// connections; park.go — Park, CanPark, Reused: a stream whose agent
// awaits another session, kept by the mux for the next Dial; hostkeyerror.go — HostKeyError; sshconfig.go — ssh_config,
// known_hosts and keys for it; rsh.go — the -e program dialer;
// subsystem.go — SubsystemDialer, refused commands and subsystems;
// listen.go — the serve --listen endpoint; admission.go — its bounds
// (MaxStartups, MaxSessions), ErrBusy, the memory returned when idle;
// listen_sftp.go — its read-only SFTP server over an os.Root;
// shellword.go — SplitCommandLine and ShellQuote;
// awaiting.go — what a setup that timed out was waiting for; firstbyte.go
// — FirstByteTimeout; idle.go — IdleWatch and IdleTimeoutStream;
// bwlimit.go — Limiter and LimitDialer; count.go — counting readers and
// writers; stderr.go — a peer's stderr tail in error messages; errors.go —
// the sentinels; refused.go — the kinds of what a rerun cannot fix, Mark.
package transport
