package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// A restore that serve --listen refuses because it is at its
// --max-sessions bound says so: exit 255, as ssh against an sshd past its
// MaxStartups, the server's message in the error and the advice to rerun
// later in the hint.
func TestE2EListenMaxSessionsBusy(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := smallTree(t)
	keys := newListenKeys(t)
	l := startListen(t, filepath.Dir(src), keys, "--max-sessions", "1")
	hold := holdListenSession(t, l)
	defer hold.Close()

	r := runBin(t, append(append([]string{"restore", "--json", "-j", "1"}, l.args()...), l.url(filepath.Base(src)), filepath.Join(t.TempDir(), "dst"))...)
	if r.code != 255 {
		t.Fatalf("exit %d, want 255:\n%s", r.code, r)
	}
	rep := parseReport(t, r)
	const hint = "the server was at its bound of clients (serve --listen --max-sessions or --max-startups): rerun the same command to complete the restore later"
	if !strings.Contains(rep.Error, "the server is busy") || !strings.Contains(rep.Error, "--max-sessions 1") || rep.Hint != hint {
		t.Errorf("--json: error %q, hint %q; want the server's busy message and the hint %q", rep.Error, rep.Hint, hint)
	}
	if !strings.Contains(r.stderr, "\n("+hint+")") {
		t.Errorf("stderr lacks the hint:\n%s", r)
	}
	if !strings.Contains(l.log(), "refused: 1 sessions are being served (--max-sessions 1)") {
		t.Errorf("the server's log does not say it refused the session:\n%s", l.log())
	}
	// Once the held session ends, the same restore runs.
	hold.Close()
	mustRun(t, append(append([]string{"restore", "-j", "1"}, l.args()...), l.url(filepath.Base(src)), filepath.Join(t.TempDir(), "dst"))...)
}

// holdListenSession opens a "serve --stdio" session on l that sends
// nothing, so that it holds one of l's session slots until closed (the
// server takes the slot as it accepts the exec request, before the next
// client's SSH handshake is through).
func holdListenSession(t *testing.T, l *listenServer) *ssh.Client {
	t.Helper()
	key, err := os.ReadFile(l.keys.identityFile)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	hostKeys, err := knownhosts.New(l.knownHosts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ssh.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", l.port), &ssh.ClientConfig{
		User: "hold", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: hostKeys,
	})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := sess.Start("restoresync serve --stdio"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
