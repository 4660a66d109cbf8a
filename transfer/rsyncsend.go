package transfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/gokrazy/rsync/rsyncd"

	"github.com/restoresync/restoresync/transport"
)

// RoleRsyncSender is the role of the agent in a "--method rsync" pull: after
// the handshake the stream carries the rsync protocol itself (raw bytes, no
// frames), with the agent as the rsync sender of Hello.Path. The agent runs
// the system's "rsync --server --sender" when one is installed (stock rsync's
// sender is the fast one), and else gokrazy/rsync's in-process sender
// (protocol 27). Hello.RsyncArgs carries the client's option words, checked
// against rsyncArgLetters; the agent adds --server, --sender and the path.
const RoleRsyncSender = "rsync-sender"

// rsyncArgLetters are the single-letter rsync options a client may ask the
// agent's rsync sender for: those of -a without -H, plus -v, -n, -c, -x.
// None of them takes an argument, writes on the agent's side or names a file,
// so a client of a read-only endpoint cannot turn the sender into anything
// else (-e, -f, -T, -B, -M and all long options are refused).
const rsyncArgLetters = "rltpogDvncx"

// rsyncBinary is the rsync program the agent runs; "" (tests) forces the
// in-process gokrazy sender.
var rsyncBinary = "rsync"

// rsyncWaitDelay bounds how long the agent waits for the rsync subprocess's
// pipes after it exits.
const rsyncWaitDelay = time.Second

func init() { extraRoles[RoleRsyncSender] = serveRsyncSender }

// CheckRsyncArgs returns an error wrapping ErrProtocol unless every word of
// args is a cluster of the options in rsyncArgLetters ("-tpr"). It is what
// the agent enforces on Hello.RsyncArgs; clients call it to fail early.
func CheckRsyncArgs(args []string) error {
	for _, a := range args {
		ok := len(a) > 1 && a[0] == '-' && a[1] != '-'
		for i := 1; ok && i < len(a); i++ {
			ok = strings.IndexByte(rsyncArgLetters, a[i]) >= 0
		}
		if !ok {
			return fmt.Errorf("%w: rsync option %q is not allowed (allowed: -%s)", ErrProtocol, a, rsyncArgLetters)
		}
	}
	return nil
}

// serveRsyncSender is the roleFunc of RoleRsyncSender. s.src is the source
// tree already opened (and confined beneath ServerConfig.Root); comp is
// unused, rsync's own protocol being uncompressed here.
func serveRsyncSender(ctx context.Context, s *server, in *bufio.Reader, out io.Writer, _ Compression) error {
	if err := CheckRsyncArgs(s.hello.RsyncArgs); err != nil {
		return err
	}
	if rsyncBinary != "" {
		if bin, err := exec.LookPath(rsyncBinary); err == nil {
			return runSystemRsyncSender(ctx, bin, s, in, out)
		}
	}
	return runGokrazyRsyncSender(ctx, s, in, out)
}

// runSystemRsyncSender runs "rsync --server --sender ARGS . /proc/self/fd/3/"
// with the source's opened directory as the child's fd 3, so that the
// child reads exactly the tree the handshake checked, whatever a symlink in
// the path does meanwhile.
func runSystemRsyncSender(ctx context.Context, bin string, s *server, in io.Reader, out io.Writer) error {
	args := append([]string{"--server", "--sender"}, s.hello.RsyncArgs...)
	args = append(args, ".", "/proc/self/fd/3/")
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.ExtraFiles = []*os.File{s.src.dir}
	cmd.Stdout = out
	stderr := new(transport.TailBuffer)
	cmd.Stderr = stderr
	cmd.WaitDelay = rsyncWaitDelay
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("rsync sender: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("rsync sender: start %s: %w", bin, err)
	}
	// Not waited for: the client's side ends when the client closes the
	// stream, which may be after rsync exits.
	go func() {
		io.Copy(stdin, in)
		stdin.Close()
	}()
	err = cmd.Wait()
	if err != nil && !errors.Is(err, exec.ErrWaitDelay) {
		return fmt.Errorf("rsync sender %s: %w%s", bin, err, transport.StderrSuffix(stderr.String()))
	}
	return nil
}

// runGokrazyRsyncSender serves the rsync protocol in-process with
// gokrazy/rsync's sender, rooted at the source directory. Its log goes
// nowhere: its errors reach the client in the protocol and are returned.
// gokrazy closes its connection when a run fails; that closes nothing
// here: in and out belong to Serve's caller, which does not close them.
//
// A filter rule with a wildcard, which gokrazy's sender does not implement
// and panics on, fails this session with an error instead of ending the
// agent: gokrazy reads the rules and builds its file list in this
// goroutine.
func runGokrazyRsyncSender(ctx context.Context, s *server, in io.Reader, out io.Writer) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("rsync sender (gokrazy/rsync): %v", r)
		}
	}()
	mod := rsyncd.Module{Name: "src", Path: s.src.root.Name()}
	srv, err := rsyncd.NewServer([]rsyncd.Module{mod}, rsyncd.DontRestrict(), rsyncd.WithStderr(nopWriteCloser{io.Discard}))
	if err != nil {
		return fmt.Errorf("rsync sender: %w", err)
	}
	args := append([]string{"--server", "--sender"}, s.hello.RsyncArgs...)
	args = append(args, ".", "/")
	conn := rsyncd.NewConnection(io.NopCloser(in), nopWriteCloser{out}, "stdio")
	if err := srv.HandleConnArgs(ctx, conn, &mod, args); err != nil {
		return fmt.Errorf("rsync sender (gokrazy/rsync): %w", err)
	}
	return nil
}

// nopWriteCloser is a Writer whose Close does nothing, for gokrazy/rsync's
// APIs, which close what they write to when a run ends.
type nopWriteCloser struct{ io.Writer }

// Close does nothing and returns nil.
func (nopWriteCloser) Close() error { return nil }
