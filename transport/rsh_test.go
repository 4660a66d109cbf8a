package transport

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/internal/testsshd"
)

func TestRshDialerEchoViaSSH(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "ssh")
	srv := testsshd.Start(t)
	d, err := NewRshDialer(Location{Host: "testhost"}, SSHOptions{
		Rsh:        "ssh -F '" + srv.Config(t) + "'",
		RemotePath: echoAgent(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	checkEcho(t, dialT(t, d), 8<<20)
}

func TestRshDialerArgv(t *testing.T) {
	t.Parallel()
	// The "remote shell" prints its arguments, one per line.
	d, err := NewRshDialer(Location{User: "alice", Host: "example.org", Port: 2222}, SSHOptions{
		Rsh:        `sh -c 'printf "%s\n" "$0" "$@"'`,
		RemotePath: "/opt/my tools/restoresync",
	})
	if err != nil {
		t.Fatal(err)
	}
	s := dialT(t, d)
	out, err := io.ReadAll(s)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	want := []string{"-l", "alice", "-p", "2222", "example.org", "'/opt/my tools/restoresync'", "serve", "--stdio"}
	if !slices.Equal(got, want) {
		t.Fatalf("argv %q, want %q", got, want)
	}

	d, err = NewRshDialer(Location{Host: "h"}, SSHOptions{Rsh: `sh -c 'printf "%s\n" "$0" "$@"'`})
	if err != nil {
		t.Fatal(err)
	}
	out, err = io.ReadAll(dialT(t, d))
	if err != nil || string(out) != "h\nrestoresync\nserve\n--stdio\n" {
		t.Fatalf("argv without user and port: %q, %v", out, err)
	}
}

func TestRshDialerExit255(t *testing.T) {
	t.Parallel()
	d, err := NewRshDialer(Location{Host: "h"}, SSHOptions{Rsh: `sh -c 'echo "ssh: connect to host h port 22: Connection refused" >&2; exit 255'`})
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(dialT(t, d))
	if !errors.Is(err, ErrConnect) || !strings.Contains(err.Error(), "Connection refused") {
		t.Fatalf("read: %v; want ErrConnect with the stderr", err)
	}
}

// dialDyingAgent dials, through the real ssh and a test sshd, a remote
// command that prints "hello\n" and then kills itself.
func dialDyingAgent(t *testing.T) Stream {
	t.Helper()
	srv := testsshd.Start(t)
	agent := filepath.Join(t.TempDir(), "dies")
	if err := os.WriteFile(agent, []byte("#!/bin/sh\necho hello\nkill -KILL $$\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := NewRshDialer(Location{Host: "testhost"}, SSHOptions{Rsh: "ssh -F '" + srv.Config(t) + "'", RemotePath: agent})
	if err != nil {
		t.Fatal(err)
	}
	return dialT(t, d)
}

// ssh's status 255 after the remote command answered is the remote side
// ending mid-transfer (OpenSSH exits 255 when the remote command is
// killed by a signal), not a connection failure;
// through the real ssh and sshd, for reads and writes.
func TestRshDialerExit255AfterOutput(t *testing.T) {
	t.Parallel()
	s := dialDyingAgent(t)
	out, err := io.ReadAll(s)
	if string(out) != "hello\n" || !errors.Is(err, ErrRemoteExited) || errors.Is(err, ErrConnect) || !strings.Contains(err.Error(), "status 255 after some output") {
		t.Fatalf("read: %q, %v; want the output, then ErrRemoteExited", out, err)
	}
	var werr error
	for i := 0; i < 100 && werr == nil; i++ {
		_, werr = s.Write(make([]byte, 64<<10))
	}
	if !errors.Is(werr, ErrRemoteExited) {
		t.Fatalf("write after the remote command died: %v; want ErrRemoteExited", werr)
	}
}

// A read that comes after a failed write has reaped the program (which
// closes its stdout) says how the program ended, as a read that met its
// end does, not "file already closed": a stream whose sender and
// receiver run in two goroutines reports the remote side's end whichever
// of them fails first.
func TestRshDialerReadAfterWriteReaped(t *testing.T) {
	t.Parallel()
	s := dialDyingAgent(t)
	out := make([]byte, len("hello\n"))
	if _, err := io.ReadFull(s, out); err != nil || string(out) != "hello\n" {
		t.Fatalf("read: %q, %v", out, err)
	}
	var werr error
	for i := 0; i < 100 && werr == nil; i++ {
		_, werr = s.Write(make([]byte, 64<<10))
	}
	if !errors.Is(werr, ErrRemoteExited) {
		t.Fatalf("write after the remote command died: %v; want ErrRemoteExited", werr)
	}
	_, err := s.Read(make([]byte, 1))
	if !errors.Is(err, ErrRemoteExited) || !strings.Contains(err.Error(), "status 255 after some output") {
		t.Fatalf("read after the write reaped ssh: %v; want ErrRemoteExited, status 255 after some output", err)
	}
}

// readAfterReapingWrite dials the -e program rsh, waits until it has
// exited unreaped, checks that a Write then fails with ErrRemoteExited
// (the Write reaps it) and returns what reading the stream to its end
// gives.
func readAfterReapingWrite(t *testing.T, rsh string) ([]byte, error) {
	t.Helper()
	d, err := NewRshDialer(Location{Host: "h"}, SSHOptions{Rsh: rsh})
	if err != nil {
		t.Fatal(err)
	}
	s := dialT(t, d)
	awaitZombie(t, s)
	if _, err := s.Write([]byte("hello")); !errors.Is(err, ErrRemoteExited) {
		t.Fatalf("write to a program that exited: %v; want ErrRemoteExited", err)
	}
	return io.ReadAll(s)
}

// awaitZombie waits until the -e program of s has exited but is not yet
// reaped, so that what it printed sits unread in its stdout pipe.
func awaitZombie(t *testing.T, s Stream) {
	t.Helper()
	stat := filepath.Join("/proc", strconv.Itoa(s.(*rshStream).cmd.Process.Pid), "stat")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile(stat)
		if err != nil {
			t.Fatal(err)
		}
		// pid (comm) STATE ...
		if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return
		}
	}
	t.Fatal("the program did not exit")
}

// A program that answers and exits before it reads (an SFTP-only server,
// a forced command's refusal) makes the first Write fail; that Write
// reaps it, and what it printed is still read after, so the refusal is
// judged by its answer.
func TestRshDialerOutputReadAfterWriteReaped(t *testing.T) {
	t.Parallel()
	out, err := readAfterReapingWrite(t, `sh -c 'echo "This service allows sftp connections only."; exit 1'`)
	if string(out) != "This service allows sftp connections only.\n" || !errors.Is(err, ErrSFTPOnly) {
		t.Fatalf("read after the write reaped the program: %q, %v; want its answer, then ErrSFTPOnly", out, err)
	}
}

// A read after the program was reaped ends even when a child it left
// behind holds its stdout open: rshWaitDelay later, with how the program
// ended. The program gives up its stdin before it starts the child, so
// that no process still reads the pipe once it has exited: a child that
// redirected its own stdin could still hold the pipe when the write came,
// if the scheduler ran the exiting parent first.
func TestRshDialerReadEndsWhenChildHoldsStdout(t *testing.T) {
	t.Parallel()
	out, err := readAfterReapingWrite(t, `sh -c 'echo partial; exec </dev/null; sleep 5 2>/dev/null & exit 3'`)
	if string(out) != "partial\n" || !errors.Is(err, ErrRemoteExited) || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("read: %q, %v; want the output, then exit status 3", out, err)
	}
}

func TestRshDialerExitStatus(t *testing.T) {
	t.Parallel()
	d, err := NewRshDialer(Location{Host: "h"}, SSHOptions{Rsh: `sh -c 'echo partial; echo "sh: restoresync: not found" >&2; exit 127'`})
	if err != nil {
		t.Fatal(err)
	}
	s := dialT(t, d)
	out, err := io.ReadAll(s)
	if string(out) != "partial\n" || err == nil || errors.Is(err, ErrConnect) ||
		!strings.Contains(err.Error(), "exit status 127") || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("read: %q, %v; want the output, then exit status 127 with stderr", out, err)
	}
	if !strings.Contains(s.Stderr(), "not found") {
		t.Errorf("Stderr() = %q", s.Stderr())
	}
}

func TestRshDialerCloseKills(t *testing.T) {
	t.Parallel()
	d, err := NewRshDialer(Location{Host: "h"}, SSHOptions{Rsh: `sh -c 'exec sleep 30'`})
	if err != nil {
		t.Fatal(err)
	}
	s := dialT(t, d)
	done := make(chan error, 1)
	go func() {
		_, err := s.Read(make([]byte, 1))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("blocked Read after Close: %v; want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock Read")
	}
	if time.Since(start) > 3*time.Second {
		t.Errorf("Close took %v", time.Since(start))
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestRshDialerMissingProgram(t *testing.T) {
	t.Parallel()
	d, err := NewRshDialer(Location{Host: "h"}, SSHOptions{Rsh: "/nonexistent/ssh -x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Dial(t.Context()); !errors.Is(err, ErrConnect) {
		t.Fatalf("Dial: %v; want ErrConnect", err)
	}
}

func TestNewRshDialerErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		loc Location
		rsh string
	}{
		{Location{Host: "h"}, ""},
		{Location{Host: "h"}, "   "},
		{Location{Host: "h"}, "ssh 'unterminated"},
		{Location{Path: "local"}, "ssh"},
		{Location{Host: "-oProxyCommand=x"}, "ssh"},
	} {
		if _, err := NewRshDialer(tt.loc, SSHOptions{Rsh: tt.rsh}); err == nil {
			t.Errorf("NewRshDialer(%#v, %q): no error", tt.loc, tt.rsh)
		}
	}
}

func TestSplitCommandLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"ssh", []string{"ssh"}},
		{"  ssh   -p  2222 ", []string{"ssh", "-p", "2222"}},
		{`ssh -o "ProxyCommand ssh -W %h:%p jump"`, []string{"ssh", "-o", "ProxyCommand ssh -W %h:%p jump"}},
		{`ssh -i '/keys/my key'`, []string{"ssh", "-i", "/keys/my key"}},
		{`a\ b c\\d`, []string{"a b", `c\d`}},
		{`"a\"b\\c\d$"`, []string{`a"b\c\d$`}},
		{`'it'\''s'`, []string{"it's"}},
		{`x""y ''`, []string{"xy", ""}},
		{"a\\\nb\tc\nd", []string{"ab", "c", "d"}},
		{"", nil},
	}
	for _, tt := range tests {
		got, err := SplitCommandLine(tt.in)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("SplitCommandLine(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{`'open`, `"open`, `"esc\"`, `trailing\`} {
		if got, err := SplitCommandLine(bad); err == nil {
			t.Errorf("SplitCommandLine(%q) = %q, want an error", bad, got)
		}
	}
}
