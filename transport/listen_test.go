package transport

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// testServer is an in-process ListenAndServe with fresh keys.
type testServer struct {
	addr       *net.TCPAddr
	knownHosts string // known_hosts with the server's key
	identity   string // client key in authorized_keys
	logs       *lockedLines
	stopped    chan error // ListenAndServe's result
	cancel     context.CancelFunc
}

type lockedLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *lockedLines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *lockedLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// writeTestKey writes a new unencrypted ed25519 key to dir/name and returns
// its path and public key.
func writeTestKey(t *testing.T, dir, name string) (string, ssh.PublicKey) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, name)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return path, pub
}

func startListen(t *testing.T, handler func(context.Context, ServerSession) error) *testServer {
	t.Helper()
	return startListenWith(t, handler, nil)
}

// startListenWith is startListen with cfg's other fields (admission
// bounds) set by set, if not nil.
func startListenWith(t *testing.T, handler func(context.Context, ServerSession) error, set func(*ListenConfig)) *testServer {
	t.Helper()
	dir := t.TempDir()
	hostKeyFile, hostPub := writeTestKey(t, dir, "host_key")
	identity, clientPub := writeTestKey(t, dir, "id_client")
	authorized := filepath.Join(dir, "authorized_keys")
	content := "# comment\n\nno-pty,no-port-forwarding " + string(ssh.MarshalAuthorizedKey(clientPub))
	if err := os.WriteFile(authorized, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ts := &testServer{
		identity: identity,
		logs:     new(lockedLines),
		stopped:  make(chan error, 1),
		cancel:   cancel,
	}
	ready := make(chan net.Addr, 1)
	cfg := ListenConfig{
		Addr:               "127.0.0.1:0",
		HostKeyFile:        hostKeyFile,
		AuthorizedKeysFile: authorized,
		Handler:            handler,
		Ready:              func(a net.Addr) { ready <- a },
		Logf:               ts.logs.logf,
	}
	if set != nil {
		set(&cfg)
	}
	go func() { ts.stopped <- ListenAndServe(ctx, cfg) }()
	select {
	case a := <-ready:
		ts.addr = a.(*net.TCPAddr)
	case err := <-ts.stopped:
		t.Fatalf("ListenAndServe: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-ts.stopped; err != nil {
			t.Errorf("ListenAndServe after cancel: %v", err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", ts.logs)
		}
	})
	ts.knownHosts = filepath.Join(dir, "known_hosts")
	line := knownhosts.Line([]string{ts.addr.String()}, hostPub)
	if err := os.WriteFile(ts.knownHosts, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return ts
}

func (ts *testServer) dialer(t *testing.T, user, identity string, o SSHOptions) Dialer {
	t.Helper()
	o.ConfigFile = "none"
	o.Identities = []string{identity}
	o.KnownHosts = []string{ts.knownHosts}
	d, err := NewSSHDialer(Location{User: user, Host: "127.0.0.1", Port: ts.addr.Port}, o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func echoHandler(_ context.Context, s ServerSession) error {
	_, err := io.Copy(s.Stdout, s.Stdin)
	return err
}

func TestListenEcho(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	users := map[string]int{}
	ts := startListen(t, func(ctx context.Context, s ServerSession) error {
		mu.Lock()
		users[s.User]++
		mu.Unlock()
		return echoHandler(ctx, s)
	})
	d := ts.dialer(t, "alice", ts.identity, SSHOptions{RemotePath: "/opt/my tools/restoresync"})
	echoStreams(t, d, 6, 256<<10)
	mu.Lock()
	defer mu.Unlock()
	if users["alice"] != 6 {
		t.Errorf("handler saw users %v, want alice 6 times", users)
	}
}

func TestListenRejectsUnknownKey(t *testing.T) {
	t.Parallel()
	ts := startListen(t, echoHandler)
	stranger, _ := writeTestKey(t, t.TempDir(), "id_stranger")
	_, err := ts.dialer(t, "alice", stranger, SSHOptions{}).Dial(t.Context())
	if !errors.Is(err, ErrConnect) || errors.Is(err, ErrHostKey) {
		t.Fatalf("Dial with a key not in authorized_keys: %v; want ErrConnect", err)
	}
}

// rawSession opens an x/crypto session to ts, for requests Stream never
// makes.
func rawSession(t *testing.T, ts *testServer) *ssh.Session {
	t.Helper()
	data, err := os.ReadFile(ts.identity)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(data)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := knownhosts.New(ts.knownHosts)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ssh.Dial("tcp", ts.addr.String(), &ssh.ClientConfig{
		User:            "bob",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: cb,
		Timeout:         5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	sess, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

func TestListenRefusesOtherRequests(t *testing.T) {
	t.Parallel()
	ts := startListen(t, echoHandler)
	for _, tt := range []struct {
		name string
		run  func(*ssh.Session) error
	}{
		{"exec", func(s *ssh.Session) error { return s.Run("cat /etc/passwd") }},
		{"exec serve without --stdio", func(s *ssh.Session) error { return s.Run("restoresync serve") }},
		{"shell", func(s *ssh.Session) error {
			if err := s.Shell(); err != nil {
				return err
			}
			return s.Wait()
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sess := rawSession(t, ts)
			var stderr strings.Builder
			sess.Stderr = &stderr
			err := tt.run(sess)
			var ee *ssh.ExitError
			if !errors.As(err, &ee) || ee.ExitStatus() != 1 {
				t.Fatalf("got %v, want exit status 1", err)
			}
			if !strings.Contains(stderr.String(), "serve --stdio") {
				t.Errorf("stderr %q does not explain what is allowed", stderr.String())
			}
		})
	}

	t.Run("subsystem", func(t *testing.T) {
		// x/crypto cannot Wait for a subsystem; check the message and that
		// the server ends the session.
		sess := rawSession(t, ts)
		stderr, err := sess.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := sess.RequestSubsystem("sftp"); err != nil {
			t.Fatal(err)
		}
		msg, err := io.ReadAll(stderr)
		if err != nil || !strings.Contains(string(msg), "serve --stdio") {
			t.Fatalf("stderr %q, %v", msg, err)
		}
	})

	t.Run("pty", func(t *testing.T) {
		sess := rawSession(t, ts)
		if err := sess.RequestPty("xterm", 24, 80, nil); err == nil {
			t.Fatal("pty request accepted")
		}
	})
}

func TestListenHandlerError(t *testing.T) {
	t.Parallel()
	ts := startListen(t, func(_ context.Context, s ServerSession) error {
		io.Copy(io.Discard, s.Stdin)
		return errors.New("nothing to restore here")
	})
	s := dialT(t, ts.dialer(t, "carol", ts.identity, SSHOptions{}))
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_, err := io.ReadAll(s)
	if err == nil || !strings.Contains(err.Error(), "status 1") || !strings.Contains(err.Error(), "nothing to restore here") {
		t.Fatalf("read: %v; want exit status 1 with the handler's error", err)
	}
}

func TestListenCancelStopsSessions(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	handlerDone := make(chan error, 1)
	ts := startListen(t, func(ctx context.Context, s ServerSession) error {
		close(started)
		<-ctx.Done()
		handlerDone <- ctx.Err()
		return ctx.Err()
	})
	s := dialT(t, ts.dialer(t, "dave", ts.identity, SSHOptions{}))
	<-started
	ts.cancel()
	select {
	case err := <-ts.stopped:
		ts.stopped <- err // for the cleanup
		if err != nil {
			t.Fatalf("ListenAndServe: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ListenAndServe did not return after cancel")
	}
	if err := <-handlerDone; !errors.Is(err, context.Canceled) {
		t.Errorf("handler ctx: %v", err)
	}
	if _, err := io.ReadAll(s); err == nil {
		t.Error("stream still clean after the server stopped")
	}
}

func TestListenConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("# nobody\n"), 0o600)
	_, pub := writeTestKey(t, dir, "k")
	restricted := filepath.Join(dir, "restricted")
	os.WriteFile(restricted, []byte(`from="10.0.0.1" `+string(ssh.MarshalAuthorizedKey(pub))), 0o600)
	good := filepath.Join(dir, "good")
	os.WriteFile(good, ssh.MarshalAuthorizedKey(pub), 0o600)
	for _, tt := range []struct {
		name string
		cfg  ListenConfig
		want string
	}{
		{"no handler", ListenConfig{AuthorizedKeysFile: good}, "Handler"},
		{"no authorized keys", ListenConfig{Handler: echoHandler}, "authorized_keys"},
		{"missing authorized keys", ListenConfig{Handler: echoHandler, AuthorizedKeysFile: filepath.Join(dir, "nope")}, "nope"},
		{"empty authorized keys", ListenConfig{Handler: echoHandler, AuthorizedKeysFile: empty}, "no keys"},
		{"from= option", ListenConfig{Handler: echoHandler, AuthorizedKeysFile: restricted}, `"from"`},
		{"missing host key", ListenConfig{Handler: echoHandler, AuthorizedKeysFile: good, HostKeyFile: filepath.Join(dir, "nokey")}, "nokey"},
		{"bad address", ListenConfig{Handler: echoHandler, AuthorizedKeysFile: good, Addr: "127.0.0.1:99999"}, "99999"},
	} {
		err := ListenAndServe(t.Context(), tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v; want an error mentioning %s", tt.name, err, tt.want)
		}
	}
}

func TestListenEphemeralHostKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	identity, pub := writeTestKey(t, dir, "id")
	authorized := filepath.Join(dir, "authorized_keys")
	os.WriteFile(authorized, ssh.MarshalAuthorizedKey(pub), 0o600)
	logs := new(lockedLines)
	ready := make(chan net.Addr, 1)
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error, 1)
	go func() {
		stopped <- ListenAndServe(ctx, ListenConfig{
			Addr: "127.0.0.1:0", AuthorizedKeysFile: authorized, Handler: echoHandler,
			Ready: func(a net.Addr) { ready <- a }, Logf: logs.logf,
		})
	}()
	defer func() {
		cancel()
		<-stopped
	}()
	addr := (<-ready).(*net.TCPAddr)
	if !strings.Contains(logs.String(), "ephemeral host key ssh-ed25519 SHA256:") {
		t.Fatalf("log does not show the ephemeral key: %q", logs)
	}
	// A client that does not know the key is refused, and the error shows
	// the logged fingerprint.
	d, err := NewSSHDialer(Location{User: "u", Host: "127.0.0.1", Port: addr.Port}, SSHOptions{
		ConfigFile: "none", Identities: []string{identity}, KnownHosts: []string{"none"},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Dial(t.Context())
	var hk *HostKeyError
	if !errors.As(err, &hk) || !strings.Contains(logs.String(), hk.Fingerprint) {
		t.Fatalf("Dial: %v; want a HostKeyError naming the logged key (%s)", err, logs)
	}
}

// freezeProxy forwards TCP to target until freeze is closed, then stops
// moving bytes without closing anything: a dead link.
func freezeProxy(t *testing.T, target string, freeze <-chan struct{}) *net.TCPAddr {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			select {
			case <-freeze:
				return // drop it; the peers' conns stay open until cleanup
			default:
			}
			if n > 0 {
				if _, err := dst.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			t.Cleanup(func() { c.Close(); up.Close() })
			go pipe(up, c)
			go pipe(c, up)
		}
	}()
	return ln.Addr().(*net.TCPAddr)
}

func TestSSHKeepaliveDetectsDeadLink(t *testing.T) {
	t.Parallel()
	ts := startListen(t, echoHandler)
	freeze := make(chan struct{})
	proxy := freezeProxy(t, ts.addr.String(), freeze)
	// The proxy's address must be in known_hosts under its own port.
	kh, err := os.ReadFile(ts.knownHosts)
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.SplitN(string(kh), " ", 2)
	proxyKH := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(proxyKH, []byte(knownhosts.Normalize(proxy.String())+" "+fields[1]), 0o600)

	d, err := NewSSHDialer(Location{User: "erin", Host: "127.0.0.1", Port: proxy.Port}, SSHOptions{
		ConfigFile: "none", Identities: []string{ts.identity}, KnownHosts: []string{proxyKH},
		Keepalive: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := dialT(t, d)
	buf := make([]byte, 2)
	if _, err := s.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(s, buf); err != nil {
		t.Fatal(err)
	}
	close(freeze)
	start := time.Now()
	_, err = s.Read(buf)
	if !errors.Is(err, ErrConnect) || !strings.Contains(err.Error(), "keepalive") {
		t.Fatalf("Read over a dead link: %v; want ErrConnect about keepalives", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("dead link noticed after %v, want ~200ms", el)
	}
}
