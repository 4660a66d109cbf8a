package transport

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/restoresync/restoresync/internal/testsshd"
)

// echoAgent writes a stand-in for "restoresync serve --stdio" that echoes
// stdin, in a directory whose name needs shell quoting.
func echoAgent(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "remote dir's bin")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "agent")
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexec cat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkEcho writes size random bytes, closes the write side and expects
// the same bytes back followed by a clean io.EOF.
func checkEcho(t *testing.T, s Stream, size int) {
	t.Helper()
	data := make([]byte, size)
	rand.Read(data)
	werr := make(chan error, 1)
	go func() {
		_, err := s.Write(data)
		if err == nil {
			err = s.CloseWrite()
		}
		werr <- err
	}()
	got, err := io.ReadAll(s)
	if err != nil {
		t.Fatalf("read: %v (stderr %q)", err, s.Stderr())
	}
	if err := <-werr; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("echo: got %d bytes, want %d (equal prefix %v)", len(got), len(data), bytes.HasPrefix(data, got))
	}
}

func dialT(t *testing.T, d Dialer) Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := d.Dial(ctx)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSSHDialerEchoViaConfig(t *testing.T) {
	t.Parallel()
	srv := testsshd.Start(t)
	d, err := NewSSHDialer(Location{Host: "testhost"}, SSHOptions{
		ConfigFile: srv.Config(t),
		RemotePath: echoAgent(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	echoStreams(t, d, 4, 64<<10)
}

// echoStreams dials n streams with d at once and checks that each echoes
// what it is sent: 8 MiB on the first, small bytes on the others, so that
// a big stream runs alongside small ones (each is its own connection).
func echoStreams(t *testing.T, d Dialer, n, small int) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		size := small
		if i == 0 {
			size = 8 << 20
		}
		s := dialT(t, d)
		wg.Go(func() { checkEcho(t, s, size) })
	}
	wg.Wait()
}

func TestSSHDialerExplicitOptions(t *testing.T) {
	t.Parallel()
	srv := testsshd.Start(t)
	d, err := NewSSHDialer(Location{User: srv.User, Host: srv.Host, Port: srv.Port}, SSHOptions{
		ConfigFile: "none",
		Identities: []string{srv.IdentityFile},
		KnownHosts: []string{srv.KnownHostsFile},
		RemotePath: echoAgent(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	checkEcho(t, dialT(t, d), 1<<20)

	// A --known-hosts file that does not exist is a mistake to report, not
	// a file to skip (the host would then look unknown).
	missing := filepath.Join(t.TempDir(), "missing")
	_, err = NewSSHDialer(Location{User: srv.User, Host: srv.Host, Port: srv.Port}, SSHOptions{
		ConfigFile: "none", KnownHosts: []string{missing, srv.KnownHostsFile},
	})
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing --known-hosts file: err %v; want one naming %s", err, missing)
	}
}

func TestSSHDialerUnknownHostKey(t *testing.T) {
	t.Parallel()
	srv := testsshd.Start(t)
	empty := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := NewSSHDialer(Location{User: srv.User, Host: srv.Host, Port: srv.Port}, SSHOptions{
		ConfigFile: "none",
		Identities: []string{srv.IdentityFile},
		KnownHosts: []string{empty},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Dial(t.Context())
	if !errors.Is(err, ErrHostKey) || !errors.Is(err, ErrConnect) {
		t.Fatalf("Dial with empty known_hosts: %v; want ErrHostKey and ErrConnect", err)
	}
	var hk *HostKeyError
	if !errors.As(err, &hk) || len(hk.Known) != 0 {
		t.Fatalf("want *HostKeyError for an unknown host, got %#v", err)
	}
	msg := err.Error()
	for _, want := range []string{"[127.0.0.1]:", "ssh-keyscan -p", "-t ed25519", "not in known_hosts"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	// The server has ed25519 and ECDSA keys; ed25519 is preferred.
	if hk.KeyType != srv.HostKey.Type() || hk.Fingerprint != ssh.FingerprintSHA256(srv.HostKey) {
		t.Errorf("fingerprint %s, want %s", hk.Fingerprint, ssh.FingerprintSHA256(srv.HostKey))
	}
}

// knownHostsWith writes a known_hosts file holding key for srv.
func knownHostsWith(t *testing.T, srv *testsshd.Server, key ssh.PublicKey) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(srv.Addr())}, key)
	if err := os.WriteFile(path, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSSHDialerChangedHostKey(t *testing.T) {
	t.Parallel()
	srv := testsshd.Start(t)
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	otherEd, _ := ssh.NewPublicKey(edPub)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	otherEC, _ := ssh.NewPublicKey(&ecKey.PublicKey)

	for _, tt := range []struct {
		name string
		key  ssh.PublicKey
		want string
	}{
		// Same type as the server's key: a plain mismatch.
		{"same type", otherEd, "REMOTE HOST IDENTIFICATION HAS CHANGED"},
		// A type the server does not have: it cannot offer a known type.
		{"other type", otherEC, "none of the host key types"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, err := NewSSHDialer(Location{User: srv.User, Host: srv.Host, Port: srv.Port}, SSHOptions{
				ConfigFile: "none",
				Identities: []string{srv.IdentityFile},
				KnownHosts: []string{knownHostsWith(t, srv, tt.key)},
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = d.Dial(t.Context())
			if !errors.Is(err, ErrHostKey) || !errors.Is(err, ErrConnect) {
				t.Fatalf("Dial: %v; want ErrHostKey", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

func TestSSHDialerAuthFailure(t *testing.T) {
	t.Parallel()
	srv := testsshd.Start(t)
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	stranger := filepath.Join(t.TempDir(), "id_stranger")
	if err := os.WriteFile(stranger, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := NewSSHDialer(Location{User: srv.User, Host: srv.Host, Port: srv.Port}, SSHOptions{
		ConfigFile: "none",
		Identities: []string{stranger},
		KnownHosts: []string{srv.KnownHostsFile},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Dial(t.Context())
	if !errors.Is(err, ErrConnect) || errors.Is(err, ErrHostKey) {
		t.Fatalf("Dial with an unauthorized key: %v; want ErrConnect only", err)
	}
	if !strings.Contains(err.Error(), stranger) {
		t.Errorf("error %q does not name the key tried", err)
	}
}

func TestSSHDialerRemoteCommandMissing(t *testing.T) {
	t.Parallel()
	srv := testsshd.Start(t)
	d, err := NewSSHDialer(Location{Host: "testhost"}, SSHOptions{
		ConfigFile: srv.Config(t),
		RemotePath: "/nonexistent/restoresync",
	})
	if err != nil {
		t.Fatal(err)
	}
	s := dialT(t, d)
	_, err = io.ReadAll(s)
	if err == nil || errors.Is(err, ErrConnect) || !strings.Contains(err.Error(), "status 127") ||
		!strings.Contains(err.Error(), "/nonexistent/restoresync") {
		t.Fatalf("read from a missing remote command: %v; want exit status 127 and the stderr", err)
	}
}

func TestSSHDialerKeepaliveIdle(t *testing.T) {
	t.Parallel()
	srv := testsshd.Start(t)
	d, err := NewSSHDialer(Location{Host: "testhost"}, SSHOptions{
		ConfigFile: srv.Config(t),
		RemotePath: echoAgent(t),
		Keepalive:  100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := dialT(t, d)
	buf := make([]byte, 5)
	if _, err := s.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read %q, %v", buf, err)
	}
	time.Sleep(500 * time.Millisecond) // five keepalive rounds
	if _, err := s.Write([]byte("world")); err != nil {
		t.Fatalf("write after idle: %v", err)
	}
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(s)
	if err != nil || string(rest) != "world" {
		t.Fatalf("read after idle: %q, %v", rest, err)
	}
}

// blackhole accepts TCP connections and never answers.
func blackhole(t *testing.T) string { return testsshd.Silent(t, "") }

func TestSSHDialerHandshakeTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	addr := blackhole(t)
	host, port, _ := net.SplitHostPort(addr)
	loc, err := ParseLocation("ssh://u@" + host + ":" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	opts := SSHOptions{ConfigFile: "none", KnownHosts: []string{"none"}, Timeout: 200 * time.Millisecond}
	d, err := NewSSHDialer(loc, opts)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = d.Dial(t.Context())
	if !errors.Is(err, ErrConnect) || time.Since(start) > 5*time.Second {
		t.Fatalf("Dial to a silent server: %v after %v; want ErrConnect after ~200ms", err, time.Since(start))
	}
	if !strings.Contains(err.Error(), "no banner received") || !strings.Contains(err.Error(), "connection setup timed out after 200ms (--contimeout 200ms)") {
		t.Errorf("Dial to a silent server: %v; want what did not answer and the option", err)
	}

	opts.Timeout = time.Minute
	d, err = NewSSHDialer(loc, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	_, err = d.Dial(ctx)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrConnect) || time.Since(start) > 5*time.Second {
		t.Fatalf("Dial cancelled during the handshake: %v after %v; want context.Canceled", err, time.Since(start))
	}
}

func TestSSHDialerConnectRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	ln.Close()
	d, err := NewSSHDialer(Location{Host: "127.0.0.1", Port: addr.Port}, SSHOptions{ConfigFile: "none"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Dial(t.Context()); !errors.Is(err, ErrConnect) || !strings.Contains(err.Error(), addr.String()) {
		t.Fatalf("Dial to a closed port: %v; want ErrConnect naming %s", err, addr)
	}
}

func TestNewSSHDialerErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	proxyCfg := filepath.Join(dir, "config")
	os.WriteFile(proxyCfg, []byte("Host jump\n\tProxyJump bastion\n"), 0o600)
	for _, tt := range []struct {
		name string
		loc  Location
		o    SSHOptions
		want string
	}{
		{"local", Location{Path: "x"}, SSHOptions{}, "not a remote"},
		{"missing -i", Location{Host: "h"}, SSHOptions{ConfigFile: "none", Identities: []string{filepath.Join(dir, "nope")}}, "nope"},
		{"missing -F", Location{Host: "h"}, SSHOptions{ConfigFile: filepath.Join(dir, "nocfg")}, "nocfg"},
		{"proxy", Location{Host: "jump"}, SSHOptions{ConfigFile: proxyCfg}, "ProxyJump"},
	} {
		if _, err := NewSSHDialer(tt.loc, tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: NewSSHDialer: %v; want an error mentioning %q", tt.name, err, tt.want)
		}
	}
}

func TestSSHConfigResolution(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	os.WriteFile(cfg, []byte(`Host web
	HostName %h.example.net
	Port 2200
	User deploy
	IdentityFile ~/.ssh/web_key
	IdentityFile "/keys/%r@%h"
	UserKnownHostsFile /kh/one /kh/two

Host *
	User fallback
	Port 2300
`), 0o600)
	hc, err := loadHostConfig(cfg, "web")
	if err != nil {
		t.Fatal(err)
	}
	if hc.hostName != "web.example.net" || hc.port != 2200 || hc.user != "deploy" {
		t.Errorf("web: %+v", hc)
	}
	if fmt.Sprint(hc.identityFiles) != "[~/.ssh/web_key /keys/%r@%h]" || fmt.Sprint(hc.userKnownHosts) != "[/kh/one /kh/two]" {
		t.Errorf("web files: %q %q", hc.identityFiles, hc.userKnownHosts)
	}
	if got := expandSSHPath(hc.identityFiles[1], "web.example.net", "deploy", 2200); got != "/keys/deploy@web.example.net" {
		t.Errorf("expand: %q", got)
	}
	other, err := loadHostConfig(cfg, "db")
	if err != nil {
		t.Fatal(err)
	}
	if other.hostName != "" || other.port != 2300 || other.user != "fallback" {
		t.Errorf("db: %+v", other)
	}
}

func TestKnownHostAlgorithms(t *testing.T) {
	t.Parallel()
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	ed, _ := ssh.NewPublicKey(edPub)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ec, _ := ssh.NewPublicKey(&ecKey.PublicKey)
	path := filepath.Join(t.TempDir(), "known_hosts")
	content := knownhosts.Line([]string{"[a.example]:2222"}, ec) + "\n" +
		knownhosts.Line([]string{knownhosts.HashHostname("[a.example]:2222")}, ed) + "\n" +
		knownhosts.Line([]string{"b.example"}, ec) + "\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	cb, err := knownhosts.New(path)
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]string{
		"a.example:2222": "[ssh-ed25519 ecdsa-sha2-nistp256]",
		"b.example:22":   "[ecdsa-sha2-nistp256]",
	} {
		if got := fmt.Sprint(knownHostAlgorithms(cb, addr)); got != want {
			t.Errorf("knownHostAlgorithms(%s) = %s, want %s", addr, got, want)
		}
	}
	if got := knownHostAlgorithms(cb, "c.example:22"); !slices.Equal(got, defaultHostKeyAlgorithms) {
		t.Errorf("knownHostAlgorithms(unknown host) = %v, want the defaults", got)
	}
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"restoresync":           "restoresync",
		"/usr/local/bin/rs-1.2": "/usr/local/bin/rs-1.2",
		"/opt/my tools/rs":      "'/opt/my tools/rs'",
		"it's":                  `'it'\''s'`,
		"~/bin/restoresync":     "~/bin/restoresync",
		"~/my bin/rs":           "~/'my bin/rs'",
		"$(reboot)":             "'$(reboot)'",
		"":                      "''",
	} {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTailBuffer(t *testing.T) {
	t.Parallel()
	var tb TailBuffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				tb.Write(bytes.Repeat([]byte{byte('a' + i)}, 100))
			}
		})
	}
	wg.Wait()
	if n := len(tb.String()); n != stderrTailBytes {
		t.Fatalf("kept %d bytes, want %d", n, stderrTailBytes)
	}
	tb.Write([]byte("END"))
	if s := tb.String(); !strings.HasSuffix(s, "END") || len(s) != stderrTailBytes {
		t.Fatalf("tail %q... (%d bytes)", s[len(s)-10:], len(s))
	}
	big := bytes.Repeat([]byte("x"), 3*stderrTailBytes)
	tb.Write(append(big, "é!"...))
	if s := tb.String(); !strings.HasSuffix(s, "xé!") || len(s) > stderrTailBytes {
		t.Fatalf("after a big write: %d bytes", len(s))
	}
}

// TestSSHDialerAgentAndEncryptedKey: an encrypted -i key is skipped, not
// fatal, and the same key served by ssh-agent logs in.
func TestSSHDialerAgentAndEncryptedKey(t *testing.T) {
	srv := testsshd.Start(t)
	data, err := os.ReadFile(srv.IdentityFile)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := ssh.ParseRawPrivateKey(data)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	encrypted := filepath.Join(t.TempDir(), "id_encrypted")
	if err := os.WriteFile(encrypted, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}

	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: priv}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				agent.ServeAgent(keyring, c)
			}()
		}
	}()
	t.Setenv("SSH_AUTH_SOCK", sock)

	opts := SSHOptions{
		ConfigFile: "none",
		Identities: []string{encrypted},
		KnownHosts: []string{srv.KnownHostsFile},
		RemotePath: echoAgent(t),
	}
	loc := Location{User: srv.User, Host: srv.Host, Port: srv.Port}
	d, err := NewSSHDialer(loc, opts)
	if err != nil {
		t.Fatalf("NewSSHDialer with an encrypted key: %v", err)
	}
	checkEcho(t, dialT(t, d), 64<<10)

	// Without the agent the login fails, and the error says why.
	t.Setenv("SSH_AUTH_SOCK", "")
	d, err = NewSSHDialer(loc, opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Dial(t.Context())
	if !errors.Is(err, ErrConnect) || !strings.Contains(err.Error(), "encrypted key skipped") {
		t.Fatalf("Dial without agent: %v; want ErrConnect mentioning the skipped key", err)
	}
}

// The built-in client's write to a remote command that was killed says
// how it ended (ErrRemoteExited, signal KILL), as a read does, rather than
// "write: EOF": a killed push receiver is reported as killed.
func TestSSHDialerWriteAfterRemoteKilled(t *testing.T) {
	t.Parallel()
	srv := testsshd.Start(t)
	agent := filepath.Join(t.TempDir(), "dies")
	if err := os.WriteFile(agent, []byte("#!/bin/sh\necho hello\nkill -KILL $$\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := NewSSHDialer(Location{Host: "testhost"}, SSHOptions{ConfigFile: srv.Config(t), RemotePath: agent})
	if err != nil {
		t.Fatal(err)
	}
	s := dialT(t, d)
	buf := make([]byte, 6)
	if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "hello\n" {
		t.Fatalf("read %q, %v", buf, err)
	}
	var werr error
	deadline := time.Now().Add(10 * time.Second)
	for werr == nil && time.Now().Before(deadline) {
		_, werr = s.Write(make([]byte, 64<<10))
	}
	if !errors.Is(werr, ErrRemoteExited) || !strings.Contains(werr.Error(), "signal KILL") {
		t.Fatalf("write after the remote command was killed: %v; want ErrRemoteExited with signal KILL", werr)
	}
}
