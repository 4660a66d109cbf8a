package transfer

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testsshd"
	"github.com/restoresync/restoresync/transport"
)

// hangAgent writes a stand-in for the agent that starts and never reads
// nor writes: a stopped or hung `restoresync serve --stdio`.
func hangAgent(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hang-agent")
	if err := os.WriteFile(path, []byte("#!/bin/sh\necho hanging >&2\nexec sleep 1000\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// Over a real sshd, with an agent that never reads: a Write that waits for
// SSH window space ends when the stream is closed (x/crypto/ssh releases
// it only when the connection goes), and the connection setup with our
// handshake is bounded by the connect timeout, which kills the session.
func TestSSHStalledAgent(t *testing.T) {
	t.Parallel()
	srv := testsshd.Start(t)
	d, err := transport.NewSSHDialer(transport.Location{Host: "testhost"}, transport.SSHOptions{ConfigFile: srv.Config(t), RemotePath: hangAgent(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("write", func(t *testing.T) {
		t.Parallel()
		s := dialT(t, d)
		wrote := make(chan error, 1)
		go func() {
			_, err := s.Write(make([]byte, 32<<20)) // far more than the window
			wrote <- err
		}()
		select {
		case err := <-wrote:
			t.Fatalf("a 32 MiB write to an agent that never reads returned %v", err)
		case <-time.After(500 * time.Millisecond): // blocked on the window
		}
		closed := time.Now()
		s.Close()
		select {
		case err := <-wrote:
			if err == nil {
				t.Fatal("the blocked write succeeded after Close")
			}
			t.Logf("write ended %v after Close: %v", time.Since(closed).Round(time.Millisecond), err)
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not end a write blocked on the SSH window")
		}
	})
	for _, tc := range []struct {
		name string
		to   Timeouts
		want error
		msg  string
	}{
		// 5 s, not less: the agent's stderr line must have crossed the
		// SSH connection by then on a loaded machine.
		{"contimeout", Timeouts{Connect: 5 * time.Second}, transport.ErrConnect, "--contimeout 5s"},
		{"timeout", Timeouts{Connect: time.Minute, Idle: 5 * time.Second}, transport.ErrTimeout, "--timeout 5s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			_, _, err := Open(t.Context(), d, Hello{Role: RoleSender, Path: "/", Compression: "none"}, tc.to)
			took := time.Since(start)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) || errors.Is(err, ErrProtocol) {
				t.Fatalf("after %v: %v; want %v naming %s", took, err, tc.want, tc.msg)
			}
			if took > 15*time.Second {
				t.Errorf("setup bounded by 5 s took %v", took)
			}
			if !strings.Contains(err.Error(), "hanging") {
				t.Errorf("error %q lacks the agent's stderr", err)
			}
			t.Logf("after %v: %v", took.Round(time.Millisecond), err)
		})
	}
}

// With -e, the connect timeout bounds the program's life until our
// handshake completes: a program that never gets through (ssh to a port
// that accepts and never answers) is killed, and the error is a
// connection failure naming --contimeout.
func TestRshSetupTimeout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prog := filepath.Join(dir, "stuck-ssh")
	// Like ssh -v, it says where it is, and it has a last word on SIGTERM.
	script := "#!/bin/sh\necho connecting >&2\ntrap 'kill $!; echo stuck-ssh: terminated during banner exchange >&2; exit 255' TERM\nsleep 1000 &\nwait\n"
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := transport.NewRshDialer(transport.Location{Host: "backup", Path: "/"}, transport.SSHOptions{Rsh: prog})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, err = Open(t.Context(), d, Hello{Role: RoleSender, Path: "/", Compression: "none"}, Timeouts{Connect: time.Second})
	took := time.Since(start)
	if !errors.Is(err, transport.ErrConnect) || !strings.Contains(err.Error(), "--contimeout 1s") || !strings.Contains(err.Error(), "connecting") {
		t.Fatalf("after %v: %v; want ErrConnect naming --contimeout and the stderr", took, err)
	}
	// It cannot know whether the connection or the agent is silent, and
	// what the program said when told to stop is kept (SIGTERM first).
	if !strings.Contains(err.Error(), "no answer came through "+prog+" backup") || strings.Contains(err.Error(), "agent did not answer") ||
		!strings.Contains(err.Error(), "terminated during banner exchange") {
		t.Errorf("error %q: want 'no answer came through' the program, not the agent blamed, and its last words", err)
	}
	if took > 10*time.Second {
		t.Errorf("a 1 s connect timeout took %v", took)
	}
}

// The built-in client to a port that accepts TCP and never answers, with
// the SSH dialer's own timeout equal to the connect timeout (as restore
// sets them: both are --contimeout): every run says --contimeout and that
// the SSH server sent no banner, never a bare "i/o timeout" nor blame on
// the agent, however the SSH library's deadline and the setup context
// race. A server that sends its banner and then nothing is told apart.
func TestOpenSetupTimeoutSaysWhat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		banner string
		want   string
	}{
		{"silent", "", "did not complete the SSH handshake (no banner received)"},
		{"banner-only", "SSH-2.0-OpenSSH_9.2\r\n", "did not complete the SSH handshake (banner received; key exchange or authentication did not finish)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr, err := net.ResolveTCPAddr("tcp", testsshd.Silent(t, tc.banner))
			if err != nil {
				t.Fatal(err)
			}
			const limit = 500 * time.Millisecond
			d, err := transport.NewSSHDialer(transport.Location{User: "u", Host: "127.0.0.1", Port: addr.Port, Path: "/"},
				transport.SSHOptions{ConfigFile: "none", KnownHosts: []string{"none"}, Timeout: limit})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 6 {
				_, _, err := Open(t.Context(), d, Hello{Role: RoleSender, Path: "/", Compression: "none"}, Timeouts{Connect: limit})
				if !errors.Is(err, transport.ErrConnect) || !strings.Contains(err.Error(), "(--contimeout 500ms)") || !strings.Contains(err.Error(), tc.want) ||
					strings.Contains(err.Error(), "i/o timeout") || strings.Contains(err.Error(), "agent") {
					t.Fatalf("run %d: %v; want ErrConnect naming --contimeout and %q", i, err, tc.want)
				}
			}
		})
	}
}

// dialT dials one stream with d within 10 s, closed when the test ends.
func dialT(t *testing.T, d transport.Dialer) transport.Stream {
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
