package main

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/spf13/cobra"

	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
)

// The admission bounds of serve --listen (transport.ListenConfig): a
// handshake is a few milliseconds of CPU, so 32 at once keep a 2-core
// server responsive; 128 sessions are 32 restores at the default --jobs 4,
// whose buffers the server holds at once.
const (
	defaultMaxStartups = 32
	defaultMaxSessions = 128
)

type serveOptions struct {
	stdio          bool
	listen         string
	root           string
	authorizedKeys string
	hostKey        string
	readOnly       bool
	maxStartups    int
	maxSessions    int
}

func newServeCmd() *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve (--stdio | --listen ADDR --root DIR --authorized-keys FILE)",
		Short: "Run the other end of a restore",
		Long: `Run the other end of a restore.

--stdio speaks the restoresync protocol on stdin/stdout: the client runs it on
the remote host over SSH. Paths are relative to the login directory, or to
--root when given.

--listen ADDR runs a built-in, read-only SSH endpoint that serves only what is
under --root: a client's path is taken relative to it
(ssh://user@host:2222/alice is ROOT/alice) and a path that would leave it is
refused. It also serves the SSH "sftp" subsystem, read-only, under the same
--root and keys (no path or symlink leads out of it, every write is refused):
browse a snapshot with sftp or FileZilla, or restore with --method sftp.
Clients authenticate with a key from --authorized-keys.`,
		Example: `  # a backup server without sshd setup
  restoresync serve --listen 0.0.0.0:2222 --root /snapshots \
      --authorized-keys /etc/restoresync/authorized_keys --host-key /etc/restoresync/host_key
  # a forced command in ~/.ssh/authorized_keys on a backup server
  command="restoresync serve --stdio --read-only --root /snapshots" ssh-ed25519 AAAA...`,
		Args: usageArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runServe(cmd.Context(), cmd, o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.stdio, "stdio", false, "serve one stream on stdin/stdout (run by the client over SSH)")
	f.StringVar(&o.listen, "listen", "", "serve SSH on this address, read-only (e.g. 127.0.0.1:2222; port 0 picks a free one)")
	f.StringVar(&o.root, "root", "", "serve only what is under this directory (required with --listen)")
	f.StringVar(&o.authorizedKeys, "authorized-keys", "", "OpenSSH authorized_keys file of the clients allowed (--listen)")
	f.StringVar(&o.hostKey, "host-key", "", "OpenSSH private host key (--listen; default: a new key for this run)")
	f.BoolVar(&o.readOnly, "read-only", false, "refuse to receive files (--stdio; --listen is always read-only)")
	f.IntVar(&o.maxStartups, "max-startups", defaultMaxStartups, "--listen: connections in their SSH handshake at once; more wait up to 20 s, then are refused saying so (0: no bound; OpenSSH's MaxStartups)")
	f.IntVar(&o.maxSessions, "max-sessions", defaultMaxSessions, "--listen: sessions (one per restore stream) served at once; more wait up to 20 s, then are refused saying the server is busy (0: no bound)")
	return cmd
}

func runServe(ctx context.Context, cmd *cobra.Command, o *serveOptions) error {
	cfg := transfer.ServerConfig{Root: o.root, ReadOnly: o.readOnly, Version: version, NewSink: restore.NewSink}
	switch {
	case o.stdio && o.listen == "":
		cfg.OneStream = true // this process serves this one stream
		return transfer.Serve(ctx, os.Stdin, os.Stdout, cfg)
	case o.listen != "" && !o.stdio:
		if o.maxStartups < 0 || o.maxSessions < 0 {
			return &usageError{"serve --listen: --max-startups and --max-sessions take a count, 0 for no bound"}
		}
		if o.root == "" || o.authorizedKeys == "" {
			return &usageError{"serve --listen needs --root and --authorized-keys"}
		}
		if fi, err := os.Stat(o.root); err != nil || !fi.IsDir() {
			return &usageError{fmt.Sprintf("serve --listen: --root %s is not a directory", o.root)}
		}
		cfg.ReadOnly = true
		errOut := cmd.ErrOrStderr()
		return transport.ListenAndServe(ctx, transport.ListenConfig{
			Addr:               o.listen,
			HostKeyFile:        o.hostKey,
			AuthorizedKeysFile: o.authorizedKeys,
			SFTPRoot:           o.root,
			MaxStartups:        o.maxStartups,
			MaxSessions:        o.maxSessions,
			Handler: func(ctx context.Context, s transport.ServerSession) error {
				return transfer.Serve(ctx, s.Stdin, s.Stdout, cfg)
			},
			Ready: func(addr net.Addr) {
				fmt.Fprintf(cmd.OutOrStdout(), "listening on %s, serving %s read-only\n", addr, o.root)
			},
			Logf: func(format string, args ...any) { fmt.Fprintf(errOut, "restoresync serve: "+format+"\n", args...) },
		})
	}
	return &usageError{"serve needs exactly one of --stdio or --listen ADDR"}
}
