package restore

import (
	"bytes"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	grsync "github.com/gokrazy/rsync"
	"github.com/gokrazy/rsync/rsyncclient"

	"github.com/restoresync/restoresync/internal/testenv"
)

// The rsync method refuses to push because gokrazy/rsync's sender sends a
// new file's data in literal tokens that this machine's rsync receiver
// rejects: a 1 MB file pushed to the real "rsync --server" fails with
// "invalid uncompressed token length 262144" and nothing arrives. When a
// gokrazy/rsync release passes this, push can be enabled and runRsync's
// refusal must change.
func TestRsyncPushRefusalHolds(t *testing.T) {
	bin := testenv.RequireTool(t, "rsync")
	src, dst := t.TempDir(), t.TempDir()
	data := make([]byte, 1<<20)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(src, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := rsyncclient.New([]string{"-rtp"}, rsyncclient.WithSender(), rsyncclient.DontRestrict(),
		rsyncclient.WithStderr(nopLog{}))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, c.ServerCommandOptions(dst+"/")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_, runErr := c.Run(t.Context(), &grsync.BothCloser{ReadCloser: out, WriteCloser: in}, []string{src + "/"})
	waitErr := cmd.Wait()
	got, _ := os.ReadFile(filepath.Join(dst, "f"))
	if runErr == nil || !strings.Contains(runErr.Error(), "invalid uncompressed token length 262144") || waitErr == nil || bytes.Equal(got, data) {
		t.Fatalf("push of 1 MB with gokrazy's sender to %s: run error %v, rsync exit %v (stderr %q), %d bytes arrived; "+
			"want the token length error and nothing restored: if the push works now, runRsync's refusal is no longer true",
			bin, runErr, waitErr, stderr.String(), len(got))
	}
}

// nopLog is a log that drops what gokrazy writes to it.
type nopLog struct{}

func (nopLog) Write(p []byte) (int, error) { return len(p), nil }
func (nopLog) Close() error                { return nil }
