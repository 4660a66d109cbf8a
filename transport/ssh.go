package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// sshCiphers is the cipher preference of both the client and the built-in
// server: AES-GCM is fastest with AES-NI, ChaCha20 on CPUs without it, and
// the CTR modes are for old peers.
var sshCiphers = []string{
	ssh.CipherAES128GCM,
	ssh.CipherChaCha20Poly1305,
	ssh.CipherAES256GCM,
	ssh.CipherAES128CTR,
	ssh.CipherAES256CTR,
}

const (
	// defaultKeepalive matches common ServerAliveInterval settings and stays
	// below typical NAT idle timeouts.
	defaultKeepalive = 15 * time.Second
	// keepaliveMaxMissed is OpenSSH's ServerAliveCountMax default.
	keepaliveMaxMissed = 3
	// stderrTailBytes is how much of the peer's stderr a Stream keeps.
	stderrTailBytes = 4 << 10
	// remoteExitWait bounds how long a write that found the remote
	// command gone waits for its exit status, to say how it ended.
	remoteExitWait = 2 * time.Second
	// clientVersion identifies restoresync in server logs.
	clientVersion = "SSH-2.0-restoresync"
)

// sshDialer is the built-in SSH client. It is immutable after
// NewSSHDialer, so Dial is safe for concurrent use.
type sshDialer struct {
	display     string // user@host:port, for errors
	addr        string // host:port to dial
	hostname    string
	port        int
	hostKeyAddr string // host:port looked up in known_hosts
	knownFiles  []string
	known       ssh.HostKeyCallback
	config      ssh.ClientConfig // template; Auth is set per Dial
	signers     []ssh.Signer     // -i and IdentityFile keys
	fallback    []ssh.Signer     // default ~/.ssh/id_* keys
	keyFiles    []string         // files behind signers and fallback
	skipped     []string         // notes on keys that could not be used
	agentSock   string           // "" means no agent
	command     string
	subsystem   string // when not "", requested instead of command (WithSubsystem)
	timeout     time.Duration
	keepalive   time.Duration
	// keepaliveMax is how many keepalives may go unanswered in a row
	// before the connection is declared lost (ServerAliveCountMax).
	keepaliveMax int
	// mux, when not nil, shares connections among the streams (SSHOptions.Mux).
	mux *SSHMux
}

// NewSSHDialer returns a Dialer that reaches loc with the built-in SSH
// client (golang.org/x/crypto/ssh); each Dial opens a new TCP connection.
//
// Settings come from loc first, then the ssh_config file (o.ConfigFile, with
// Host, HostName, Port, User, IdentityFile, IdentitiesOnly, IdentityAgent,
// HostKeyAlias, UserKnownHostsFile, GlobalKnownHostsFile,
// ServerAliveInterval and ServerAliveCountMax), then defaults.
// Keys are tried in order: o.Identities, IdentityFile entries, ssh-agent
// (SSH_AUTH_SOCK), ~/.ssh/id_ed25519, id_ecdsa, id_rsa. Encrypted key files
// are skipped (load them into ssh-agent). Host keys must be in the
// known_hosts files; StrictHostKeyChecking is always on.
//
// Errors (not wrapping ErrConnect) come from a bad config file, an -i file
// that cannot be read or parsed, a ProxyJump/ProxyCommand setting (use -e
// ssh for those), or unreadable known_hosts files. The result is safe for
// concurrent use.
func NewSSHDialer(loc Location, o SSHOptions) (Dialer, error) {
	if !loc.Remote() {
		return nil, fmt.Errorf("ssh: %q is not a remote location", loc.String())
	}
	hc, err := loadHostConfig(o.ConfigFile, loc.Host)
	if err != nil {
		return nil, err
	}
	if hc.proxy != "" {
		return nil, fmt.Errorf("ssh %s: ssh_config sets %q, which the built-in client does not support; use -e ssh", loc.Host, hc.proxy)
	}
	d := &sshDialer{
		hostname:  cmpOr(hc.hostName, loc.Host),
		port:      cmpOr(loc.Port, hc.port, 22),
		command:   remoteCommand(o.RemotePath),
		timeout:   o.Timeout,
		keepalive: o.Keepalive,
		mux:       o.Mux,
	}
	if d.timeout <= 0 {
		d.timeout = DefaultConnectTimeout
	}
	if d.keepalive == 0 {
		d.keepalive = cmpOr(hc.aliveInterval, defaultKeepalive) // negative: off
	}
	d.keepaliveMax = cmpOr(hc.aliveCountMax, keepaliveMaxMissed)
	user := cmpOr(loc.User, hc.user, localUser())
	d.addr = net.JoinHostPort(d.hostname, strconv.Itoa(d.port))
	d.display = user + "@" + d.addr
	d.hostKeyAddr = d.addr
	if hc.hostKeyAlias != "" {
		d.hostKeyAddr = hostKeyAliasAddr(hc.hostKeyAlias)
	}

	if err := d.loadKnownHosts(o.KnownHosts, hc, user); err != nil {
		return nil, err
	}
	if err := d.loadKeys(o.Identities, hc, user); err != nil {
		return nil, err
	}
	if !hc.identitiesOnly && !strings.EqualFold(hc.identityAgent, "none") {
		d.agentSock = os.Getenv("SSH_AUTH_SOCK")
		if hc.identityAgent != "" && hc.identityAgent != "SSH_AUTH_SOCK" {
			d.agentSock = expandSSHPath(hc.identityAgent, d.hostname, user, d.port)
		}
	}

	d.config = ssh.ClientConfig{
		Config:            ssh.Config{Ciphers: sshCiphers},
		User:              user,
		HostKeyCallback:   d.checkHostKey,
		HostKeyAlgorithms: knownHostAlgorithms(d.known, d.hostKeyAddr),
		ClientVersion:     clientVersion,
	}
	return d, nil
}

// cmpOr returns the first of vals that is not the zero value.
func cmpOr[T comparable](vals ...T) T {
	var zero T
	for _, v := range vals {
		if v != zero {
			return v
		}
	}
	return zero
}

// checkHostKey is the ssh.HostKeyCallback: the key must be on file for
// d.hostKeyAddr. It never accepts an unknown key.
func (d *sshDialer) checkHostKey(_ string, remote net.Addr, key ssh.PublicKey) error {
	err := d.known(d.hostKeyAddr, remote, key)
	if err == nil {
		return nil
	}
	hk := &HostKeyError{
		Host:        knownhosts.Normalize(d.hostKeyAddr),
		Hostname:    d.hostname,
		Port:        d.port,
		KeyType:     key.Type(),
		Fingerprint: ssh.FingerprintSHA256(key),
		Files:       d.knownFiles,
	}
	entry := func(k knownhosts.KnownKey) KnownHostEntry {
		return KnownHostEntry{File: k.Filename, Line: k.Line, KeyType: k.Key.Type(), Fingerprint: ssh.FingerprintSHA256(k.Key)}
	}
	var ke *knownhosts.KeyError
	var re *knownhosts.RevokedError
	switch {
	case errors.As(err, &re):
		hk.Revoked = true
		hk.Known = []KnownHostEntry{entry(re.Revoked)}
	case errors.As(err, &ke):
		for _, k := range ke.Want {
			hk.Known = append(hk.Known, entry(k))
		}
	default:
		return fmt.Errorf("%w: %s: %w", ErrHostKey, hk.Host, err)
	}
	return hk
}

// Dial opens a new TCP connection and SSH session running the remote agent.
// ctx and o.Timeout bound the dial, handshake, authentication and command
// start; once Dial returns, the stream lives until Close, whatever ctx does
// (as with net.Dialer). Errors wrap ErrConnect (ErrHostKey for host keys);
// when a deadline (o.Timeout's or ctx's) passes first, the error wraps
// ErrConnect and says which step did not finish (the TCP connection, the
// SSH handshake, the start of the remote command); ctx cancelled first
// gives ctx's error. Safe for concurrent use.
func (d *sshDialer) Dial(ctx context.Context) (Stream, error) {
	if d.mux != nil {
		return d.mux.dial(ctx, d)
	}
	return d.dialNew(ctx)
}

// dialNew is Dial on a new connection of the stream's own.
func (d *sshDialer) dialNew(ctx context.Context) (*sshStream, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("ssh %s: %w", d.display, err)
	}
	start := time.Now()
	deadline, ours := start.Add(d.timeout), true
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline, ours = dl, false
	}
	st := &dialStep{step: stepTCP}
	// failed reports err, or, when a deadline passed (the connection's or
	// ctx's, whichever fired first), which step it cut short.
	failed := func(err error) error {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("ssh %s: %w", d.display, ctx.Err())
		}
		if ctx.Err() != nil || !time.Now().Before(deadline) || errors.Is(err, os.ErrDeadlineExceeded) {
			return &setupTimeoutError{display: d.display, what: st.describe(d.addr), limit: deadline.Sub(start).Round(time.Second / 10), contimeout: ours}
		}
		return err
	}
	dialCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var nd net.Dialer
	conn, err := nd.DialContext(dialCtx, "tcp", d.addr)
	if err != nil {
		return nil, failed(fmt.Errorf("%w: %s: %w", ErrConnect, d.display, err))
	}
	// ssh.NewClientConn takes no context: the deadline bounds it, and
	// cancelling ctx closes the connection under it.
	if err := conn.SetDeadline(deadline); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrConnect, d.display, err)
	}
	st.conn = &firstByteConn{Conn: conn}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	s, err := d.setup(st, deadline)
	if !stop() {
		if s != nil {
			s.Close()
		}
		return nil, failed(ctx.Err())
	}
	if err != nil {
		conn.Close()
		return nil, failed(err)
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		s.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrConnect, d.display, err)
	}
	if d.mux == nil {
		d.keepaliveStart(s)
	}
	return s, nil
}

// keepaliveStart starts s's keepalives, when they are on (a shared
// connection has its own, not its streams').
func (d *sshDialer) keepaliveStart(s *sshStream) {
	if d.keepalive > 0 {
		go s.keepaliveLoop(d.keepalive, d.keepaliveMax)
	}
}

// Connection setup steps, for the error of a setup that timed out.
const (
	stepTCP     = iota // TCP connect
	stepSSH            // SSH handshake: banner, key exchange, authentication
	stepCommand        // session open and command start
)

// dialStep is how far one Dial got; it is used by Dial's goroutine only,
// but conn's first-byte mark is atomic (the SSH library reads in its own
// goroutine after the handshake).
type dialStep struct {
	step int
	conn *firstByteConn
}

// describe says what did not answer at the current step.
func (st *dialStep) describe(addr string) string {
	switch {
	case st.step == stepTCP:
		return "the TCP connection to " + addr + " was not established"
	case st.step == stepSSH && !st.conn.got.Load():
		return "the SSH server at " + addr + " did not complete the SSH handshake (no banner received)"
	case st.step == stepSSH:
		return "the SSH server at " + addr + " did not complete the SSH handshake (banner received; key exchange or authentication did not finish)"
	default:
		return "the SSH server at " + addr + " did not start the remote command"
	}
}

// firstByteConn notes whether anything was read from the connection.
type firstByteConn struct {
	net.Conn
	got atomic.Bool
}

// Read reads from the connection and marks the first byte.
func (c *firstByteConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.got.Load() {
		c.got.Store(true)
	}
	return n, err
}

// setupTimeoutError is a connection setup that did not finish in time: it
// says what did not answer. It wraps ErrConnect (exit 255, as ssh's
// ConnectTimeout), not context.DeadlineExceeded.
type setupTimeoutError struct {
	display    string        // user@host:port
	what       string        // what did not answer: "the SSH server at ... did not ..."
	limit      time.Duration // the time allowed
	contimeout bool          // limit is SSHOptions.Timeout (--contimeout), not the caller's deadline
}

// Error says what did not answer; when the limit was --contimeout, in the
// words Open uses for a setup that timed out, so that every path (agent or
// agent-less) says it alike.
func (e *setupTimeoutError) Error() string {
	if e.contimeout {
		return fmt.Sprintf("%v: connection setup timed out after %v (--contimeout %v): %s", ErrConnect, e.limit, e.limit, e.what)
	}
	return fmt.Sprintf("%v: %s: %s within %v", ErrConnect, e.display, e.what, e.limit)
}

// Unwrap returns ErrConnect.
func (e *setupTimeoutError) Unwrap() error { return ErrConnect }

// setup runs the SSH handshake on st.conn and starts the remote command,
// advancing st.step as it goes.
func (d *sshDialer) setup(st *dialStep, deadline time.Time) (*sshStream, error) {
	conn := st.conn
	st.step = stepSSH
	var agentSigners []ssh.Signer
	if d.agentSock != "" {
		ac, err := net.DialTimeout("unix", d.agentSock, time.Until(deadline))
		if err != nil {
			slog.Debug("ssh: agent not reachable", "socket", d.agentSock, "err", err)
		} else {
			// Signing happens during the handshake; the agent is not
			// needed afterwards, and a hung agent must not hang Dial.
			defer ac.Close()
			ac.SetDeadline(deadline)
			agentSigners, err = agent.NewClient(ac).Signers()
			if err != nil {
				slog.Debug("ssh: agent keys", "socket", d.agentSock, "err", err)
			}
		}
	}
	cfg := d.config
	cfg.Auth = []ssh.AuthMethod{ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
		return dedupSigners(d.signers, agentSigners, d.fallback), nil
	})}
	c, chans, reqs, err := ssh.NewClientConn(conn, d.hostKeyAddr, &cfg)
	if err != nil {
		return nil, d.handshakeError(err, len(agentSigners))
	}
	st.step = stepCommand
	return d.start(ssh.NewClient(c, chans, reqs), true)
}

// start opens a session on client and starts the remote command in it.
// own says that the stream owns client: a failure closes it (a shared
// client, SSHMux's, stays open for its other sessions).
func (d *sshDialer) start(client *ssh.Client, own bool) (*sshStream, error) {
	s := &sshStream{
		display: d.display,
		command: d.command,
		client:  client,
		done:    make(chan struct{}),
		stderr:  new(TailBuffer),
	}
	fail := func(what string, err error) (*sshStream, error) {
		if own {
			client.Close()
		} else if s.session != nil {
			s.session.Close()
		}
		return nil, fmt.Errorf("%w: %s: %s: %w", ErrConnect, d.display, what, err)
	}
	var err error
	if s.session, err = client.NewSession(); err != nil {
		return fail("open session", err)
	}
	if s.stdin, err = s.session.StdinPipe(); err != nil {
		return fail("stdin", err)
	}
	if s.stdout, err = s.session.StdoutPipe(); err != nil {
		return fail("stdout", err)
	}
	s.session.Stderr = s.stderr
	if d.subsystem != "" {
		if err := s.session.RequestSubsystem(d.subsystem); err != nil {
			return nil, d.subsystemRefused(client, err)
		}
		return s, nil
	}
	if err := s.session.Start(d.command); err != nil {
		return fail(fmt.Sprintf("start %q", d.command), commandRefused(err))
	}
	return s, nil
}

// handshakeError wraps a failed handshake with ErrConnect or ErrHostKey and
// a hint about which keys were tried.
func (d *sshDialer) handshakeError(err error, agentKeys int) error {
	if isBusyDisconnect(err) {
		return Mark(fmt.Errorf("%w: %s: %w", ErrConnect, d.display, err), ErrBusy)
	}
	var hk *HostKeyError
	if errors.As(err, &hk) {
		return fmt.Errorf("%s: %w", d.display, hk)
	}
	if errors.Is(err, ErrHostKey) {
		return fmt.Errorf("%s: %w", d.display, err)
	}
	var ne *ssh.AlgorithmNegotiationError
	if errors.As(err, &ne) && ne.What == "host key" && !slices.Equal(d.config.HostKeyAlgorithms, defaultHostKeyAlgorithms) {
		return fmt.Errorf("%w: %s: the server offers none of the host key types known_hosts holds for %s (%s): %w",
			ErrHostKey, d.display, knownhosts.Normalize(d.hostKeyAddr), strings.Join(d.config.HostKeyAlgorithms, ", "), err)
	}
	if strings.Contains(err.Error(), "unable to authenticate") {
		tried := append([]string(nil), d.keyFiles...)
		if agentKeys > 0 {
			tried = append(tried, fmt.Sprintf("%d ssh-agent keys", agentKeys))
		}
		hint := "no usable keys"
		if len(tried) > 0 {
			hint = "tried " + strings.Join(tried, ", ")
		}
		if len(d.skipped) > 0 {
			hint += "; skipped " + strings.Join(d.skipped, "; ")
		}
		return Mark(fmt.Errorf("%w: %s: %w (%s; is the public key in the server's authorized_keys?)", ErrConnect, d.display, err, hint), ErrAuth)
	}
	return fmt.Errorf("%w: %s: %w", ErrConnect, d.display, err)
}

// dedupSigners concatenates signer lists, dropping repeated public keys so
// a key in both a file and the agent costs one server auth attempt.
func dedupSigners(lists ...[]ssh.Signer) []ssh.Signer {
	seen := map[string]bool{}
	var out []ssh.Signer
	for _, l := range lists {
		for _, s := range l {
			k := string(s.PublicKey().Marshal())
			if !seen[k] {
				seen[k] = true
				out = append(out, s)
			}
		}
	}
	return out
}

// remoteCommand is the command line run on the remote host.
func remoteCommand(remotePath string) string {
	if remotePath == "" {
		remotePath = "restoresync"
	}
	return ShellQuote(remotePath) + " serve --stdio"
}

// WithCommand implements CommandDialer.
func (d *sshDialer) WithCommand(command string) Dialer {
	c := *d
	c.command = command
	return &c
}

// hostKeyAliasAddr returns the address the known_hosts check is given for
// an ssh_config HostKeyAlias. OpenSSH looks the alias up as it is written,
// without the connection's port: "name", or "[name]:port" for an entry
// recorded with a port. knownhosts writes a host:port address with a port
// other than 22 as "[host]:port", so "[name]:port" is passed as name:port
// and any other alias with port 22.
func hostKeyAliasAddr(alias string) string {
	if strings.HasPrefix(alias, "[") {
		if h, p, err := net.SplitHostPort(alias); err == nil {
			return net.JoinHostPort(h, p)
		}
	}
	return net.JoinHostPort(alias, "22")
}
