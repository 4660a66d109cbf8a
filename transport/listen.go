package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// serverHandshakeTimeout bounds an accepted connection's handshake and
// authentication, so idle or slow clients cannot pile up.
const serverHandshakeTimeout = 30 * time.Second

// serverVersion identifies the built-in endpoint to clients.
const serverVersion = "SSH-2.0-restoresync"

// ServerSession is one "serve --stdio" session accepted by ListenAndServe.
// Its fields are used by the Handler's goroutine(s); Stdin and Stdout may
// be used concurrently with each other.
type ServerSession struct {
	// Stdin is the client's data (the channel's stdin); io.EOF when the
	// client sends EOF.
	Stdin io.Reader
	// Stdout goes to the client (the channel's stdout).
	Stdout io.Writer
	// Stderr goes to the client's stderr, for diagnostics.
	Stderr io.Writer
	// User is the name the client authenticated as; any name is accepted
	// for a key in the authorized_keys file.
	User string
	// Subsystem is the subsystem the client asked for ("sftp"), or "" for
	// an exec of "serve --stdio" (the only sessions Handler is given).
	Subsystem string
}

// ListenConfig configures ListenAndServe, the built-in read-only SSH
// endpoint. Zero fields are documented per field.
type ListenConfig struct {
	// Addr is the TCP address to listen on, e.g. "127.0.0.1:2222" or ":0".
	Addr string
	// HostKeyFile is an OpenSSH private key (unencrypted). "" generates an
	// ephemeral ed25519 key whose fingerprint is logged: clients must add
	// it to known_hosts for every run.
	HostKeyFile string
	// AuthorizedKeysFile lists the public keys allowed in, in OpenSSH
	// authorized_keys format. Required; read once at start. Options that
	// would restrict a key (command=, from=, expiry-time=, principals=,
	// cert-authority) are refused rather than ignored.
	AuthorizedKeysFile string
	// Handler serves one session. Its ctx ends when the client closes the
	// channel, the connection drops or ListenAndServe's ctx ends. A nil
	// return sends exit status 0; an error is written to the client's
	// stderr and sends exit status 1. Called concurrently for concurrent
	// sessions. Required.
	Handler func(ctx context.Context, s ServerSession) error
	// SFTPRoot, when not "", is served read-only as the "sftp" subsystem
	// (listen_sftp.go): "/" is this directory, and no path or symlink
	// leads out of it. "" refuses the subsystem.
	SFTPRoot string
	// Ready, if set, is called with the bound address once the listener
	// is up (useful with port 0).
	Ready func(addr net.Addr)
	// Logf, if set, receives one line per notable event (listening, key
	// fingerprints, rejected clients, handler errors). It is called from
	// many goroutines.
	Logf func(format string, args ...any)
	// MaxStartups bounds the connections in their SSH handshake and
	// authentication at once (OpenSSH's MaxStartups, without its random
	// early drop): one more waits for a slot, at most AdmissionWait, then
	// is disconnected with SSH_DISCONNECT_TOO_MANY_CONNECTIONS and a
	// message that names the bound. 0: no bound.
	MaxStartups int
	// MaxSessions bounds the "serve --stdio" sessions served at once, over
	// all connections (OpenSSH's MaxSessions bounds them per connection;
	// a restore opens one connection per stream): one more waits for a
	// slot, at most AdmissionWait, then is refused: its stderr says the
	// server is busy and it exits with status ExitBusy. 0: no bound.
	MaxSessions int
	// AdmissionWait is how long a connection or session beyond a bound
	// waits for a slot. 0: 20 s, under a client's default connection setup
	// timeout (30 s), so that the client hears why it was refused.
	AdmissionWait time.Duration
}

// admission holds a server's bounds (admission.go).
type admission struct {
	startups, sessions       slots
	maxStartups, maxSessions int
	wait                     time.Duration
	idle                     *idleFreer
}

// ListenAndServe listens on cfg.Addr and serves SSH connections, within
// cfg's admission bounds (MaxStartups, MaxSessions), until ctx ends, then closes the listener and all connections, waits for handlers
// to return, and returns nil. Only public-key authentication against
// cfg.AuthorizedKeysFile is accepted, and only "session" channels whose
// exec command ends in "serve --stdio" or, with cfg.SFTPRoot, that ask for
// the "sftp" subsystem; shells, other subsystems and commands get a
// message on stderr and exit status 1, and pty requests are refused.
// Errors: bad config, unreadable keys, a listen failure, or a fatal accept
// error.
func ListenAndServe(ctx context.Context, cfg ListenConfig) error {
	if cfg.Handler == nil {
		return errors.New("listen: no Handler")
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if cfg.AuthorizedKeysFile == "" {
		return errors.New("listen: an authorized_keys file is required")
	}
	keys, err := loadAuthorizedKeys(cfg.AuthorizedKeysFile)
	if err != nil {
		return err
	}
	signer, err := loadHostKey(cfg.HostKeyFile, logf)
	if err != nil {
		return err
	}
	sftpRoot, err := openSFTPRoot(cfg.SFTPRoot)
	if err != nil {
		return err
	}
	if sftpRoot != nil {
		defer sftpRoot.Close()
	}
	handler := sessionHandler(cfg, sftpRoot)
	sc := &ssh.ServerConfig{
		Config:        ssh.Config{Ciphers: sshCiphers},
		ServerVersion: serverVersion,
		PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if keys[string(key.Marshal())] {
				return &ssh.Permissions{Extensions: map[string]string{"fp": ssh.FingerprintSHA256(key)}}, nil
			}
			return nil, fmt.Errorf("key %s %s for user %q is not in %s",
				key.Type(), ssh.FingerprintSHA256(key), meta.User(), cfg.AuthorizedKeysFile)
		},
		AuthLogCallback: func(meta ssh.ConnMetadata, method string, err error) {
			if err != nil && method == "publickey" {
				logf("%s: rejected: %v", meta.RemoteAddr(), err)
			}
		},
	}
	sc.AddHostKey(signer)

	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Addr, err)
	}
	logf("listening on %s (host key %s %s)", ln.Addr(), signer.PublicKey().Type(), ssh.FingerprintSHA256(signer.PublicKey()))
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr())
	}

	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	context.AfterFunc(ctx, func() { ln.Close() })

	adm := &admission{
		startups: newSlots(cfg.MaxStartups), sessions: newSlots(cfg.MaxSessions),
		maxStartups: cfg.MaxStartups, maxSessions: cfg.MaxSessions,
		wait: cfg.AdmissionWait, idle: &idleFreer{},
	}
	if adm.wait <= 0 {
		adm.wait = defaultAdmissionWait
	}
	backoff := 5 * time.Millisecond
	for {
		conn, err := ln.Accept()
		if err != nil {
			if parent.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("listen %s: %w", ln.Addr(), err)
			}
			// Out of file descriptors and the like: wait and retry, as
			// net/http does.
			logf("accept on %s: %v; retrying in %v", ln.Addr(), err, backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return nil
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		wg.Go(func() { serveConn(ctx, conn, sc, adm, handler, logf) })
	}
}

// loadAuthorizedKeys reads an authorized_keys file into a set of marshalled
// public keys.
func loadAuthorizedKeys(path string) (map[string]bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("listen: authorized keys: %w", err)
	}
	keys := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		key, _, options, _, err := ssh.ParseAuthorizedKey(line)
		if err != nil {
			return nil, fmt.Errorf("listen: authorized keys %s:%d: %w", path, n, err)
		}
		for _, opt := range options {
			name, _, _ := strings.Cut(opt, "=")
			switch strings.ToLower(name) {
			case "command", "from", "expiry-time", "principals", "cert-authority":
				return nil, fmt.Errorf("listen: authorized keys %s:%d: option %q is not supported", path, n, name)
			}
		}
		keys[string(key.Marshal())] = true
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("listen: authorized keys %s: %w", path, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("listen: authorized keys %s: no keys", path)
	}
	return keys, nil
}

// loadHostKey loads the host key file, or makes an ephemeral ed25519 key
// when path is "".
func loadHostKey(path string, logf func(string, ...any)) (ssh.Signer, error) {
	if path == "" {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("listen: generate host key: %w", err)
		}
		signer, err := ssh.NewSignerFromKey(priv)
		if err != nil {
			return nil, fmt.Errorf("listen: generate host key: %w", err)
		}
		pub := signer.PublicKey()
		logf("ephemeral host key %s %s (known_hosts key: %s)", pub.Type(), ssh.FingerprintSHA256(pub),
			strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))))
		return signer, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("listen: host key: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("listen: host key %s: %w", path, err)
	}
	return signer, nil
}

// serveConn runs one client connection: a startup slot (adm), the
// handshake under a deadline, then one goroutine per session channel. It
// returns when the connection ends and all its sessions have.
func serveConn(ctx context.Context, conn net.Conn, sc *ssh.ServerConfig, adm *admission, h func(context.Context, ServerSession) error, logf func(string, ...any)) {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	remote := conn.RemoteAddr()
	if !adm.startups.acquire(ctx, adm.wait) {
		logf("%s: refused: %d connections are starting up (--max-startups %d)", remote, adm.maxStartups, adm.maxStartups)
		refuseStartup(conn, fmt.Sprintf("restoresync serve: too many connections starting up (--max-startups %d); try again later", adm.maxStartups))
		return
	}
	if err := conn.SetDeadline(time.Now().Add(serverHandshakeTimeout)); err != nil {
		adm.startups.release()
		return
	}
	sconn, chans, reqs, err := ssh.NewServerConn(conn, sc)
	adm.startups.release()
	if err != nil {
		logf("%s: handshake: %v", remote, err)
		return
	}
	defer sconn.Close()
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return
	}
	user := sconn.User()
	logf("%s: %s logged in with key %s", remote, user, sconn.Permissions.Extensions["fp"])
	go ssh.DiscardRequests(reqs) // replies "failure" to keepalives

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "only session channels are supported")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			logf("%s: accept channel: %v", remote, err)
			continue
		}
		wg.Go(func() { serveSession(ctx, ch, chReqs, user, adm, h, logf, remote) })
	}
	cancel()
	wg.Wait()
}

// serveSession waits for the session's exec request and runs the Handler
// for "serve --stdio"; everything else is refused.
func serveSession(ctx context.Context, ch ssh.Channel, reqs <-chan *ssh.Request, user string, adm *admission,
	h func(context.Context, ServerSession) error, logf func(string, ...any), remote net.Addr) {
	defer ch.Close()
	for req := range reqs {
		switch req.Type {
		case "exec":
			var p struct{ Command string }
			if err := ssh.Unmarshal(req.Payload, &p); err != nil {
				req.Reply(false, nil)
				continue
			}
			req.Reply(true, nil)
			if !isServeCommand(p.Command) {
				logf("%s: %s: refused command %q", remote, user, p.Command)
				refuseSession(ch, fmt.Sprintf("this endpoint only runs \"restoresync serve --stdio\", not %q", p.Command))
				return
			}
			if !admitSession(ctx, ch, adm, user, logf, remote) {
				return
			}
			runHandler(ctx, ch, reqs, user, h, logf, remote)
			adm.leave()
			return
		case "subsystem":
			var p struct{ Name string }
			if err := ssh.Unmarshal(req.Payload, &p); err != nil {
				req.Reply(false, nil)
				continue
			}
			req.Reply(true, nil)
			logf("%s: %s: subsystem %q", remote, user, p.Name)
			sub := func(ctx context.Context, s ServerSession) error {
				s.Subsystem = p.Name
				return h(ctx, s)
			}
			if !admitSession(ctx, ch, adm, user, logf, remote) {
				return
			}
			runHandler(ctx, ch, reqs, user, sub, logf, remote)
			adm.leave()
			return
		case "shell":
			req.Reply(true, nil)
			logf("%s: %s: refused %s request", remote, user, req.Type)
			refuseSession(ch, req.Type+" requests are not supported; this endpoint only runs \"restoresync serve --stdio\"")
			return
		case "pty-req":
			// Refused, but the session may go on to a valid exec.
			fmt.Fprintln(ch.Stderr(), "restoresync: no pty: this endpoint only runs \"restoresync serve --stdio\"")
			req.Reply(false, nil)
		default: // env, x11-req, signal, ...
			if req.WantReply {
				req.Reply(false, nil)
			}
		}
	}
}

// admitSession takes one of adm's session slots for a session (an exec
// or a subsystem: both count against --max-sessions), waiting up to
// adm.wait; when none frees up, it tells the client the server is busy,
// ends the session with ExitBusy and returns false. A true return is
// paired with adm.leave once the session ends.
func admitSession(ctx context.Context, ch ssh.Channel, adm *admission, user string, logf func(string, ...any), remote net.Addr) bool {
	if !adm.sessions.acquire(ctx, adm.wait) {
		logf("%s: %s: refused: %d sessions are being served (--max-sessions %d)", remote, user, adm.maxSessions, adm.maxSessions)
		fmt.Fprintf(ch.Stderr(), "restoresync: the server is busy: %d sessions are being served (serve --listen --max-sessions %d); try again later\n", adm.maxSessions, adm.maxSessions)
		ch.CloseWrite()
		sendExitStatus(ch, ExitBusy)
		return false
	}
	adm.idle.begin()
	return true
}

// leave gives back the session slot admitSession took.
func (adm *admission) leave() {
	adm.idle.end()
	adm.sessions.release()
}

// runHandler runs h for one session and reports its result as the exit
// status. Requests after exec are refused, and the handler's ctx ends
// when the client closes the channel.
func runHandler(ctx context.Context, ch ssh.Channel, reqs <-chan *ssh.Request, user string,
	h func(context.Context, ServerSession) error, logf func(string, ...any), remote net.Addr) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for req := range reqs {
			if req.WantReply {
				req.Reply(false, nil)
			}
		}
		cancel()
	}()
	err := h(ctx, ServerSession{Stdin: ch, Stdout: ch, Stderr: ch.Stderr(), User: user})
	status := uint32(0)
	if err != nil {
		status = 1
		logf("%s: %s: serve: %v", remote, user, err)
		fmt.Fprintf(ch.Stderr(), "restoresync: %v\n", err)
	}
	ch.CloseWrite()
	sendExitStatus(ch, status)
}

// refuseSession writes msg to the client's stderr and ends with status 1.
func refuseSession(ch ssh.Channel, msg string) {
	fmt.Fprintf(ch.Stderr(), "restoresync: %s\n", msg)
	ch.CloseWrite()
	sendExitStatus(ch, 1)
}

// sendExitStatus sends RFC 4254's exit-status request.
func sendExitStatus(ch ssh.Channel, status uint32) {
	ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
}

// isServeCommand reports whether an exec command is "BINARY... serve
// --stdio", with BINARY any path (quoted or not).
func isServeCommand(cmd string) bool {
	words, err := SplitCommandLine(cmd)
	n := len(words)
	return err == nil && n >= 3 && words[n-2] == "serve" && words[n-1] == "--stdio"
}
