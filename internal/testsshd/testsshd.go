package testsshd

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// SSHDPath is the sshd binary Start runs.
const SSHDPath = "/usr/sbin/sshd"

const (
	startAttempts = 5                // new ports tried when bind fails
	readyTimeout  = 10 * time.Second // bound on waiting for the port
)

// Server is a running sshd. Its fields are read-only; it is safe to use
// from several goroutines.
type Server struct {
	// Host is the address sshd listens on, "127.0.0.1".
	Host string
	// Port is the TCP port sshd listens on.
	Port int
	// User is the login name that IdentityFile is authorized for: the
	// current user (root when tests run as root).
	User string
	// KnownHostsFile holds sshd's host key as "[127.0.0.1]:PORT type key".
	KnownHostsFile string
	// IdentityFile is an unencrypted ed25519 client private key in OpenSSH
	// format, authorized for User.
	IdentityFile string
	// HostKey is sshd's ed25519 host key, the one in KnownHostsFile. sshd
	// also has an ECDSA host key that is in no known_hosts file.
	HostKey ssh.PublicKey
	// PID is the listening sshd's process ID (each connection is served
	// by a child of it).
	PID int

	dir     string
	logFile string // sshd's stderr
	extra   string // StartConfig's lines, at the end of sshd_config
}

// Start starts sshd and stops it when t ends. It skips t (or fails it in
// CI) when sshd is not installed, and fails t when sshd cannot start.
func Start(t testing.TB) *Server { return StartConfig(t, "") }

// SFTPSubsystem is the sshd_config line that serves the "sftp" subsystem
// in sshd's own process (no sftp-server binary needed), for StartConfig.
const SFTPSubsystem = "Subsystem sftp internal-sftp"

// StartConfig is Start with extra lines at the end of sshd_config, after
// the settings Start writes: a Subsystem line (SFTPSubsystem), lines for
// every connection ("ForceCommand internal-sftp", "SetEnv PATH=/nowhere"),
// or a Match block (Match User, ForceCommand internal-sftp,
// ChrootDirectory: see ChrootDir), which must come last.
func StartConfig(t testing.TB, extra string) *Server {
	t.Helper()
	if _, err := os.Stat(SSHDPath); err != nil {
		if os.Getenv("CI") != "" || os.Getenv("RESTORESYNC_REQUIRE_SSHD") == "1" {
			t.Fatalf("testsshd: %s is required (CI or RESTORESYNC_REQUIRE_SSHD=1): %v", SSHDPath, err)
		}
		t.Skipf("testsshd: %s not installed (apt-get install openssh-server, or make test installs it): %v", SSHDPath, err)
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatalf("testsshd: privilege separation directory: %v", err)
	}
	dir := t.TempDir()
	s := &Server{
		Host:           "127.0.0.1",
		User:           currentUser(t),
		KnownHostsFile: filepath.Join(dir, "known_hosts"),
		IdentityFile:   filepath.Join(dir, "id_ed25519"),
		dir:            dir,
		extra:          extra,
	}
	hostKeyFile := filepath.Join(dir, "ssh_host_ed25519_key")
	hostKey := writeKey(t, hostKeyFile, newEd25519(t))
	s.HostKey = hostKey
	// Like most real servers, sshd also has an ECDSA key that known_hosts
	// does not list; x/crypto prefers ECDSA unless told otherwise, so
	// clients must pick host key algorithms from known_hosts.
	ecdsaKeyFile := filepath.Join(dir, "ssh_host_ecdsa_key")
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testsshd: generate key: %v", err)
	}
	writeKey(t, ecdsaKeyFile, ecKey)
	clientKey := writeKey(t, s.IdentityFile, newEd25519(t))
	authorizedKeys := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authorizedKeys, ssh.MarshalAuthorizedKey(clientKey), 0o600); err != nil {
		t.Fatalf("testsshd: %v", err)
	}

	var lastErr error
	for range startAttempts {
		port, err := freePort()
		if err != nil {
			t.Fatalf("testsshd: pick a port: %v", err)
		}
		s.Port = port
		if lastErr = s.run(t, []string{hostKeyFile, ecdsaKeyFile}, authorizedKeys); lastErr == nil {
			line := fmt.Sprintf("[%s]:%d %s", s.Host, s.Port, ssh.MarshalAuthorizedKey(hostKey))
			if err := os.WriteFile(s.KnownHostsFile, []byte(line), 0o600); err != nil {
				t.Fatalf("testsshd: %v", err)
			}
			return s
		}
	}
	t.Fatalf("testsshd: sshd did not start after %d attempts: %v", startAttempts, lastErr)
	return nil
}

// run writes the config for s.Port, starts sshd and waits for its port.
// An error means this port did not work (sshd exited, or never listened).
func (s *Server) run(t testing.TB, hostKeyFiles []string, authorizedKeys string) error {
	t.Helper()
	cfgFile := filepath.Join(s.dir, "sshd_config")
	cfg := fmt.Sprintf(`ListenAddress %s:%d
HostKey %s
AuthorizedKeysFile %s
PidFile %s
UsePAM no
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin yes
MaxSessions 100
MaxStartups 100
LogLevel ERROR
`, s.Host, s.Port, strings.Join(hostKeyFiles, "\nHostKey "), authorizedKeys, filepath.Join(s.dir, "sshd.pid"))
	if penaltiesSupported() {
		// Failed logins in tests must not lock out the next connections.
		cfg += "PerSourcePenalties no\n"
	}
	if s.extra != "" {
		cfg += strings.TrimSpace(s.extra) + "\n"
	}
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatalf("testsshd: %v", err)
	}
	// A file rather than a pipe: per-connection sshd children inherit
	// stderr, and Wait must not wait for them.
	s.logFile = filepath.Join(s.dir, "sshd.log")
	logf, err := os.Create(s.logFile)
	if err != nil {
		t.Fatalf("testsshd: %v", err)
	}
	defer logf.Close()
	cmd := exec.Command(SSHDPath, "-D", "-e", "-f", cfgFile)
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("testsshd: start %s: %v", SSHDPath, err)
	}
	s.PID = cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	deadline := time.Now().Add(readyTimeout)
	addr := net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("sshd exited (%v): %s", err, s.log())
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("sshd not listening on %s after %v: %s", addr, readyTimeout, s.log())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Cleanup(func() {
		// Only this sshd, by its PID; its session processes end with
		// their connections.
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			if out := s.log(); out != "" {
				t.Logf("testsshd: sshd stderr:\n%s", out)
			}
		}
	})
	return nil
}

// Addr returns "127.0.0.1:PORT".
func (s *Server) Addr() string {
	return net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
}

// Config writes an ssh_config file for "Host testhost" pointing at s, for
// use with -F (the built-in client and the ssh program alike), and returns
// its path. Host key checking is strict and BatchMode is on, so nothing
// ever prompts.
func (s *Server) Config(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ssh_config")
	cfg := fmt.Sprintf(`Host testhost
	HostName %s
	Port %d
	User %s
	IdentityFile %s
	IdentitiesOnly yes
	UserKnownHostsFile %s
	GlobalKnownHostsFile /dev/null
	StrictHostKeyChecking yes
	BatchMode yes
	LogLevel ERROR
`, s.Host, s.Port, s.User, s.IdentityFile, s.KnownHostsFile)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatalf("testsshd: %v", err)
	}
	return path
}

func newEd25519(t testing.TB) ed25519.PrivateKey {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("testsshd: generate key: %v", err)
	}
	return priv
}

// writeKey writes priv unencrypted in OpenSSH format to path and its public
// half to path.pub, and returns the public key.
func writeKey(t testing.TB, path string, priv crypto.Signer) ssh.PublicKey {
	t.Helper()
	block, err := ssh.MarshalPrivateKey(priv, "testsshd")
	if err != nil {
		t.Fatalf("testsshd: marshal key: %v", err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatalf("testsshd: %v", err)
	}
	sshPub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		t.Fatalf("testsshd: %v", err)
	}
	if err := os.WriteFile(path+".pub", ssh.MarshalAuthorizedKey(sshPub), 0o644); err != nil {
		t.Fatalf("testsshd: %v", err)
	}
	return sshPub
}

// freePort asks the kernel for a free port. Another process may take it
// before sshd binds it; Start then retries with a new one.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func currentUser(t testing.TB) string {
	u, err := user.Current()
	if err != nil {
		t.Fatalf("testsshd: current user: %v", err)
	}
	return u.Username
}

var penalties = sync.OnceValue(func() bool {
	// "sshd -V" prints e.g. "OpenSSH_9.2p1 Debian-2, OpenSSL ..." to
	// stderr; PerSourcePenalties exists from 9.8 on.
	out, _ := exec.Command(SSHDPath, "-V").CombinedOutput()
	m := regexp.MustCompile(`OpenSSH_(\d+)\.(\d+)`).FindSubmatch(out)
	if m == nil {
		return false
	}
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	return major > 9 || major == 9 && minor >= 8
})

// penaltiesSupported reports whether sshd knows PerSourcePenalties.
func penaltiesSupported() bool { return penalties() }

// log returns what sshd wrote to stderr so far.
func (s *Server) log() string {
	b, _ := os.ReadFile(s.logFile)
	return strings.TrimSpace(string(b))
}

// ChrootDir makes an empty directory that sshd accepts as a
// ChrootDirectory (owned by root, and so is every directory on its path,
// none writable by group or others: not under /tmp), and removes it with
// its contents when t ends. It is under /run.
func ChrootDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/run", "testsshd-chroot-")
	if err != nil {
		t.Fatalf("testsshd: chroot directory: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("testsshd: %v", err)
	}
	return dir
}
