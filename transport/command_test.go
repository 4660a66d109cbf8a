package transport

import (
	"context"
	"io"
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
