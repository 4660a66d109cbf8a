package transport

import (
	"context"
	"io"
	"time"
)

// Stream is one bidirectional byte stream to a peer process running
// `restoresync serve --stdio` (or to an in-process server). Reads return what
// the peer wrote to its stdout; writes go to its stdin.
//
// A Stream is used by one goroutine for reading and one for writing at a
// time; Close may be called from any goroutine and unblocks both.
type Stream interface {
	io.Reader
	io.Writer
	// CloseWrite signals end of input to the peer (its stdin reaches EOF)
	// while reads stay possible.
	CloseWrite() error
	// Close tears the stream down: the connection or process behind it is
	// closed or killed, and blocked reads and writes return errors.
	Close() error
	// Stderr returns up to the last 4 KiB that the peer wrote to its stderr,
	// for error messages; "" when there is none or it is not captured.
	Stderr() string
}

// SSHOptions says how to reach a remote host. The zero value uses
// ~/.ssh/config, the default identities, ssh-agent and ~/.ssh/known_hosts,
// and runs "restoresync serve --stdio" on the remote.
type SSHOptions struct {
	// ConfigFile is an ssh_config file (-F); "" means ~/.ssh/config, and
	// "none" means no config file, like OpenSSH's -F none.
	ConfigFile string
	// Identities are private key files (-i), tried before the config's
	// IdentityFile entries, the agent's keys and the default key files.
	Identities []string
	// KnownHosts are known_hosts files (--known-hosts); empty means
	// ~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts.
	KnownHosts []string
	// RemotePath is the restoresync binary to run on the remote host
	// (--remote-path); "" means "restoresync" found through the remote PATH.
	RemotePath string
	// Rsh, when not empty, is a command line like rsync's -e ("ssh -p 2222"):
	// each stream runs that external program instead of the built-in client.
	Rsh string
	// Timeout bounds the TCP dial plus SSH handshake of each connection;
	// 0 means 30 seconds.
	Timeout time.Duration
	// Keepalive is the interval between keepalive requests on an idle
	// connection; 0 means 15 seconds, negative disables them.
	Keepalive time.Duration
	// Mux, when not nil, makes the built-in client's streams sessions on
	// a bounded set of shared SSH connections (see SSHMux) instead of one
	// connection each; nil: one connection per stream. -e ignores it.
	Mux *SSHMux
}

// Dialer opens streams to one remote host. Implementations are safe for
// concurrent use.
type Dialer interface {
	// Dial opens one new stream (a new SSH connection, or a new process for
	// Rsh) running the remote agent. Errors wrap ErrConnect when the host
	// could not be reached or authenticated.
	Dial(ctx context.Context) (Stream, error)
}

// CommandDialer is a Dialer that can also run another command than the
// agent on the remote host: agent-less methods run the remote's own tar or
// rsync. Both SSH dialers implement it.
type CommandDialer interface {
	Dialer
	// WithCommand returns a Dialer, with the same connection settings,
	// whose streams run command on the remote host: a shell command line,
	// quoted by the caller (see ShellQuote). Safe for concurrent use.
	WithCommand(command string) Dialer
}

// DefaultConnectTimeout is the connection setup bound when none is given
// (SSHOptions.Timeout, --contimeout 0): long enough for a slow link and a
// loaded server, short enough not to hang a run.
const DefaultConnectTimeout = 30 * time.Second
