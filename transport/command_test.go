package transport

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/internal/testsshd"
)

// WithCommand runs another remote command than the agent, through the
// built-in client and through -e ssh, against a real sshd.
func TestWithCommandRunsRemoteCommand(t *testing.T) {
	t.Parallel()
	srv := testsshd.Start(t)
	cfg := srv.Config(t)
	builtin, err := NewSSHDialer(Location{Host: "testhost"}, SSHOptions{ConfigFile: cfg})
	if err != nil {
		t.Fatal(err)
	}
	rsh, err := NewRshDialer(Location{Host: "testhost"}, SSHOptions{Rsh: "ssh -F " + cfg})
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]Dialer{"builtin": builtin, "rsh": rsh} {
		t.Run(name, func(t *testing.T) {
			cd, ok := d.(CommandDialer)
			if !ok {
				t.Fatalf("%T does not implement CommandDialer", d)
			}
			s, err := cd.WithCommand("printf '%s|' " + ShellQuote("it's a test") + " 'two words'").Dial(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			out, err := io.ReadAll(s)
			if err != nil {
				t.Fatalf("read: %v (stderr %q)", err, s.Stderr())
			}
			if string(out) != "it's a test|two words|" {
				t.Fatalf("remote printed %q", out)
			}
		})
	}
}

// A remote shell script that fails is named, not quoted whole, in the
// error that says how it exited: the error keeps its status and stderr.
func TestFailedScriptErrorOmitsScript(t *testing.T) {
	t.Parallel()
	srv := testsshd.Start(t)
	d, err := NewSSHDialer(Location{Host: "testhost"}, SSHOptions{ConfigFile: srv.Config(t)})
	if err != nil {
		t.Fatal(err)
	}
	script := "set -u\nif ! command -v nosuchtool >/dev/null; then\n  echo 'no nosuchtool on the remote' >&2\n  exit 2\nfi\n"
	s, err := d.(CommandDialer).WithCommand(script).Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = io.ReadAll(s)
	if err == nil {
		t.Fatal("a script that exits 2 read without error")
	}
	msg := err.Error()
	if strings.Contains(msg, "command -v") || !strings.Contains(msg, "exited with status 2") || !strings.Contains(msg, "no nosuchtool on the remote") {
		t.Errorf("error %q: want the status and stderr, not the script", msg)
	}
}
