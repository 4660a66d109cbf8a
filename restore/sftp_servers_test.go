package restore_test

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
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/transport"
)

// refusingServer is an SSH server that refuses every exec request (its
// reply is a failure, as some SFTP-only appliances answer) and serves the
// "sftp" subsystem read-only (pkg/sftp's server over this host's file
// system).
type refusingServer struct {
	port       int
	identity   string // the client's private key file
	knownHosts string
}

func startRefusingServer(t *testing.T) *refusingServer { return startServer(t, serverOpts{}) }

// serverOpts vary the in-process server of startServer.
type serverOpts struct {
	// stall stops the SFTP sessions' output once they have sent that many
	// bytes (0: never); with drop, the connection is closed then (a
	// server that dies), else it stays up (a stalled server).
	stall int64
	drop  bool
	// internalSFTP accepts exec requests as internal-sftp does, answering
	// "This service allows sftp connections only." and exit status 1,
	// except that the agent's command exits at once without a word (the
	// exit beating the message, as it may on a loaded host).
	internalSFTP bool
}

// startStallingServer is startServer with stall and drop.
func startStallingServer(t *testing.T, stall int64, drop bool) *refusingServer {
	return startServer(t, serverOpts{stall: stall, drop: drop})
}

// startServer starts the in-process SSH server (see refusingServer) with o.
func startServer(t *testing.T, o serverOpts) *refusingServer {
	t.Helper()
	dir := t.TempDir()
	_, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	must(t, err)
	clientPub, clientPriv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(clientPriv, "")
	must(t, err)
	s := &refusingServer{identity: filepath.Join(dir, "id"), knownHosts: filepath.Join(dir, "known_hosts")}
	must(t, os.WriteFile(s.identity, pem.EncodeToMemory(block), 0o600))
	authorized, err := ssh.NewPublicKey(clientPub)
	must(t, err)
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if string(k.Marshal()) == string(authorized.Marshal()) {
			return nil, nil
		}
		return nil, fmt.Errorf("unknown key")
	}}
	cfg.AddHostKey(hostSigner)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	s.port = ln.Addr().(*net.TCPAddr).Port
	must(t, os.WriteFile(s.knownHosts, []byte(knownhosts.Line([]string{ln.Addr().String()}, hostSigner.PublicKey())+"\n"), 0o600))
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { serveRefusing(conn, cfg, o) })
		}
	})
	return s
}

func serveRefusing(conn net.Conn, cfg *ssh.ServerConfig, o serverOpts) {
	defer conn.Close()
	sc, chans, reqs, err := ssh.NewServerConn(conn, cfg)
	if err != nil {
		return
	}
	gone := make(chan struct{})
	go func() { sc.Wait(); close(gone) }()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		ch, chReqs, err := nc.Accept()
		if err != nil {
			continue
		}
		go func() {
			defer ch.Close()
			for req := range chReqs {
				var p struct{ Name string }
				if req.Type == "subsystem" && ssh.Unmarshal(req.Payload, &p) == nil && p.Name == "sftp" {
					req.Reply(true, nil)
					go ssh.DiscardRequests(chReqs)
					var rwc io.ReadWriteCloser = ch
					if o.stall > 0 {
						rwc = &stallingChannel{Channel: ch, left: o.stall, gone: gone, drop: func() {
							if o.drop {
								conn.Close()
							}
						}}
					}
					srv, err := sftp.NewServer(rwc, sftp.ReadOnly())
					if err == nil {
						srv.Serve()
					}
					return
				}
				var cmd struct{ Command string }
				if req.Type == "exec" && o.internalSFTP && ssh.Unmarshal(req.Payload, &cmd) == nil {
					req.Reply(true, nil)
					if !strings.Contains(cmd.Command, "serve --stdio") {
						io.WriteString(ch, "This service allows sftp connections only.\n")
					}
					ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{1}))
					return
				}
				if req.WantReply {
					req.Reply(false, nil) // exec, shell, pty-req, env...
				}
			}
		}()
	}
}

// --method auto on a server that refuses to run any command (its reply
// to the exec request is a failure) but whose sftp subsystem answers:
// sftp, through the built-in client and -e ssh, with the agent looked for
// first or agent-less.
func TestSFTPAutoOnRefusedExec(t *testing.T) {
	src := sftpAccount(t, t.TempDir(), "alice")
	srv := startRefusingServer(t)
	for _, tc := range []struct {
		name       string
		remotePath string
		rsh        bool
	}{
		{"agent", "", false},
		{"no-agent", restore.NoAgent, false},
		{"agent/-e", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "alice")
			o := restore.Options{
				Src: "ssh://bob@" + net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.port)) + src,
				Dst: dst,
				SSH: transport.SSHOptions{ConfigFile: "none", Identities: []string{srv.identity}, KnownHosts: []string{srv.knownHosts}, RemotePath: tc.remotePath},
			}
			if tc.rsh {
				testenv.RequireTool(t, "ssh")
				o.Src = "bob@127.0.0.1:" + src
				o.SSH = transport.SSHOptions{RemotePath: tc.remotePath, Rsh: fmt.Sprintf(
					"ssh -F /dev/null -p %d -i %s -o IdentitiesOnly=yes -o UserKnownHostsFile=%s -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes -o BatchMode=yes",
					srv.port, srv.identity, srv.knownHosts)}
			}
			rep := run(t, o)
			if rep.Method != "sftp" || !strings.Contains(rep.MethodReason, "refuses to run commands") {
				t.Errorf("auto chose %q (%q); want sftp, because the remote refuses commands", rep.Method, rep.MethodReason)
			}
			assertSFTPTree(t, src, dst)
		})
	}
}

// stallingChannel stops writing, without closing, once left bytes are
// written, until the connection is gone.
type stallingChannel struct {
	ssh.Channel
	mu   sync.Mutex
	left int64
	gone <-chan struct{}
	drop func() // called once the bytes are written
}

func (c *stallingChannel) Write(p []byte) (int, error) {
	c.mu.Lock()
	stalled := c.left <= 0
	c.left -= int64(len(p))
	c.mu.Unlock()
	if stalled {
		c.drop()
		<-c.gone
		return 0, io.ErrClosedPipe
	}
	return c.Channel.Write(p)
}

// --timeout with --method sftp: a server that stops answering in the
// middle of the files (its connection up) ends the run with the timeout
// error (exit 30), not a hang, and leaves no temporary file.
func TestSFTPIdleTimeout(t *testing.T) {
	src := sftpAccount(t, t.TempDir(), "alice")
	srv := startStallingServer(t, 400<<10, false)
	dst := filepath.Join(t.TempDir(), "alice")
	o := restore.Options{
		Src:         "ssh://bob@" + net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.port)) + src,
		Dst:         dst,
		Method:      restore.MethodSFTP,
		Jobs:        1,
		IdleTimeout: time.Second,
		SSH:         transport.SSHOptions{ConfigFile: "none", Identities: []string{srv.identity}, KnownHosts: []string{srv.knownHosts}},
	}
	_, err := restore.Run(context.Background(), o)
	if !errors.Is(err, transport.ErrTimeout) {
		t.Fatalf("restore from a stalled SFTP server: %v; want the --timeout error", err)
	}
	assertNoTempFiles(t, dst)
}

// A server that dies in the middle of the files ends the run with an
// error that says the remote side ended early (exit 12), the files done
// in place and no temporary file; a rerun completes the restore.
func TestSFTPConnectionDropThenRerun(t *testing.T) {
	src := sftpAccount(t, t.TempDir(), "alice")
	dying := startStallingServer(t, 2<<20, true)
	dst := filepath.Join(t.TempDir(), "alice")
	o := restore.Options{
		Src:    "ssh://bob@" + net.JoinHostPort("127.0.0.1", strconv.Itoa(dying.port)) + src,
		Dst:    dst,
		Method: restore.MethodSFTP,
		Jobs:   1,
		SSH:    transport.SSHOptions{ConfigFile: "none", Identities: []string{dying.identity}, KnownHosts: []string{dying.knownHosts}},
	}
	_, err := restore.Run(context.Background(), o)
	if !errors.Is(err, transport.ErrRemoteExited) {
		t.Fatalf("restore from a server that died: %v; want an error wrapping ErrRemoteExited", err)
	}
	assertNoTempFiles(t, dst)
	good := startRefusingServer(t)
	o.Src = "ssh://bob@" + net.JoinHostPort("127.0.0.1", strconv.Itoa(good.port)) + src
	o.SSH = transport.SSHOptions{ConfigFile: "none", Identities: []string{good.identity}, KnownHosts: []string{good.knownHosts}}
	run(t, o)
	assertSFTPTree(t, src, dst)
}

// listenSFTP runs serve --listen's endpoint (transport.ListenAndServe)
// in-process over root, with its sftp subsystem, and returns the SRC
// prefix and SSH options that reach it.
func listenSFTP(t *testing.T, root string) (string, transport.SSHOptions) {
	t.Helper()
	dir := t.TempDir()
	writeKey := func(name string) ssh.PublicKey {
		_, priv, _ := ed25519.GenerateKey(rand.Reader)
		block, err := ssh.MarshalPrivateKey(priv, "")
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600))
		signer, err := ssh.NewSignerFromKey(priv)
		must(t, err)
		return signer.PublicKey()
	}
	hostPub, clientPub := writeKey("host"), writeKey("id")
	must(t, os.WriteFile(filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(clientPub), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	ready, stopped := make(chan net.Addr, 1), make(chan error, 1)
	go func() {
		stopped <- transport.ListenAndServe(ctx, transport.ListenConfig{
			Addr: "127.0.0.1:0", HostKeyFile: filepath.Join(dir, "host"), AuthorizedKeysFile: filepath.Join(dir, "authorized_keys"),
			Handler:  func(context.Context, transport.ServerSession) error { return errors.New("no agent in this test") },
			SFTPRoot: root,
			Ready:    func(a net.Addr) { ready <- a },
		})
	}()
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-stopped:
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-stopped })
	must(t, os.WriteFile(filepath.Join(dir, "known_hosts"), []byte(knownhosts.Line([]string{addr.String()}, hostPub)+"\n"), 0o600))
	return "ssh://restore@" + addr.String(), transport.SSHOptions{ConfigFile: "none", Identities: []string{filepath.Join(dir, "id")}, KnownHosts: []string{filepath.Join(dir, "known_hosts")}}
}

// The same against serve --listen's SFTP subsystem: a hostile tree
// (symlinks out of the root, odd names) restored as it is, nothing from
// outside the root; Go's src/net interrupted then rerun to completion.
func TestSFTPFromListenEndpoint(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	must(t, os.WriteFile(filepath.Join(base, "secret"), []byte("outside the root"), 0o600))
	evil := filepath.Join(root, "evil")
	TestDir{
		"secret":      TestSymlink{Target: "../../secret"},
		"etc":         TestSymlink{Target: "/etc"},
		"new\nline":   TestFile{Content: "newline"},
		"bad\xffutf8": TestFile{Content: "utf-8"},
		"-rf":         TestFile{Content: "dash"},
		"dir":         TestDir{"up": TestSymlink{Target: "../../.."}},
	}.build(t, evil)
	truncateTimes(t, evil)
	netDir := filepath.Join(root, "net")
	if out, err := exec.Command("cp", "-a", filepath.Join(runtimeGOROOT(t), "src", "net"), netDir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	truncateTimes(t, netDir)
	prefix, sshOpts := listenSFTP(t, root)

	dst := filepath.Join(t.TempDir(), "evil")
	rep := run(t, restore.Options{Src: prefix + "/evil", Dst: dst, Method: restore.MethodSFTP, SSH: sshOpts})
	assertSFTPTree(t, evil, dst)
	if rep.Symlinks != 3 || rep.Files != 3 {
		t.Errorf("restored %d files, %d symlinks; want 3, 3", rep.Files, rep.Symlinks)
	}
	if _, err := restore.Run(context.Background(), restore.Options{Src: prefix + "/evil/secret", Dst: filepath.Join(t.TempDir(), "x"), Method: restore.MethodSFTP, SSH: sshOpts}); err == nil {
		t.Errorf("SRC /evil/secret (a symlink out of the root) restored")
	}

	dst = filepath.Join(t.TempDir(), "net")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := restore.Options{Src: prefix + "/net", Dst: dst, Method: restore.MethodSFTP, SSH: sshOpts, Progress: &cancelAfter{n: 40, cancel: cancel}}
	if _, err := restore.Run(ctx, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v; want context.Canceled", err)
	}
	assertNoTempFiles(t, dst)
	o.Progress = nil
	again := run(t, o)
	assertSFTPTree(t, netDir, dst)
	if again.Skipped < 40 {
		t.Errorf("rerun found %d files up to date; the interrupted run had placed at least 40", again.Skipped)
	}
}

// --method auto when the agent's command exits before a word reaches the
// handshake (internal-sftp's message lost in the race with its exit):
// a probe command sees the message, and the sftp subsystem answers, so
// auto still uses sftp.
func TestSFTPAutoWhenTheMessageIsLost(t *testing.T) {
	src := sftpAccount(t, t.TempDir(), "alice")
	srv := startServer(t, serverOpts{internalSFTP: true})
	dst := filepath.Join(t.TempDir(), "alice")
	rep := run(t, restore.Options{
		Src: "ssh://bob@" + net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.port)) + src,
		Dst: dst,
		SSH: transport.SSHOptions{ConfigFile: "none", Identities: []string{srv.identity}, KnownHosts: []string{srv.knownHosts}},
	})
	if rep.Method != "sftp" || !strings.Contains(rep.MethodReason, "sftp connections only") {
		t.Errorf("auto chose %q (%q); want sftp", rep.Method, rep.MethodReason)
	}
	assertSFTPTree(t, src, dst)
}
