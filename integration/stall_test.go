package integration

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testsshd"
)

// stallWrappers writes --remote-path wrappers that make the far side
// misbehave, and kills what they started when t ends: "stall" runs the
// agent and stops it (SIGSTOP) after delay, so its SSH connection stays
// up and answers keepalives; "hang" starts and never answers, like an
// agent stuck before its handshake; "kill" runs the agent and kills it
// (SIGKILL) after delay, like an agent that dies mid-transfer. The
// wrappers exec the agent, so the signal hits the remote command itself:
// sshd reports a death by signal, and OpenSSH's ssh then exits 255, as
// when someone kills 'restoresync serve --stdio' on the far side.
func stallWrappers(t *testing.T, delay string) (stall, hang, kill string) {
	t.Helper()
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	stall = filepath.Join(dir, "stall.sh")
	hang = filepath.Join(dir, "hang.sh")
	kill = filepath.Join(dir, "kill.sh")
	// The signaller holds none of the session's descriptors, so that
	// sshd does not wait for it to close the channel.
	signalAfter := func(sig string) string {
		return fmt.Sprintf("#!/bin/sh\necho $$ >> %s\n(sleep %s; kill -%s $$) </dev/null >/dev/null 2>&1 &\nexec %s \"$@\"\n", pids, delay, sig, binPath)
	}
	scripts := map[string]string{
		stall: signalAfter("STOP"),
		hang:  fmt.Sprintf("#!/bin/sh\necho $$ >> %s\nexec sleep 300\n", pids),
		kill:  signalAfter("KILL"),
	}
	for p, s := range scripts {
		if err := os.WriteFile(p, []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		b, _ := os.ReadFile(pids)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return stall, hang, kill
}

// blackholePort accepts TCP connections and never writes a byte: a port
// behind which nothing answers (for -e ssh, which then waits forever).
func blackholePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// -j 4 over the real sshd with each agent stopped (SIGSTOP) 0.7 s after it
// started, while data flows (--bwlimit keeps the restore going): --timeout
// fails the run with exit 30 within a few seconds every time (three runs,
// since closing the streams that have no work left races with the stop),
// only complete files are in place and no temporary file is left.
func TestE2EStallJobs4Timeout(t *testing.T) {
	e2e(t)
	t.Parallel()
	srv := testsshd.Start(t)
	src := faultsTree.get(t)
	stall, _, _ := stallWrappers(t, "0.7")
	for i := range 3 {
		dst := filepath.Join(t.TempDir(), "acct")
		args := append(sshdArgs(srv), "--remote-path", stall, "--progress", "none", "-j", "4", "--timeout", "2", "--bwlimit", "8M", sshdURL(srv, src), dst)
		start := time.Now()
		r := runBin(t, append([]string{"restore"}, args...)...)
		took := time.Since(start)
		wantExit(t, r, exitTimeout, "timeout in data send/receive")
		if took > 15*time.Second {
			t.Errorf("run %d: exit after %v; agents stop at 0.7 s, --timeout 2", i, took)
		}
		t.Logf("run %d: exit %d after %v: %s", i, r.code, took.Round(time.Millisecond), strings.TrimSpace(r.stderr))
		assertPlacedSame(t, src, dst)
		assertNoTempFiles(t, dst)
	}
}

// Ctrl-C ends the run promptly (exit 20) whatever it waits on: agents
// stopped mid-transfer (no --timeout), an agent that never answers the
// handshake, and -e ssh to a port where nothing answers; one SIGINT is
// enough for each.
func TestE2EStallSIGINT(t *testing.T) {
	e2e(t)
	t.Parallel()
	srv := testsshd.Start(t)
	src := faultsTree.get(t)
	stall, hang, _ := stallWrappers(t, "0.7")
	port := blackholePort(t)
	rsh := fmt.Sprintf("ssh -F /dev/null -p %d -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes", port)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"stalled-agents", append(sshdArgs(srv), "--remote-path", stall, "-j", "4", "--bwlimit", "8M", sshdURL(srv, src))},
		{"hung-agent", append(sshdArgs(srv), "--remote-path", hang, sshdURL(srv, src))},
		{"rsh-blackhole", []string{"-e", rsh, "--remote-path", binPath, "127.0.0.1:" + src}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dst := filepath.Join(t.TempDir(), "acct")
			r := startRestore(t, append(append([]string{"restore", "--progress", "none"}, tc.args...), dst)...)
			time.Sleep(2 * time.Second)
			sent := time.Now()
			if err := r.cmd.Process.Signal(os.Interrupt); err != nil {
				res, _ := r.wait(sent)
				t.Fatalf("the restore ended before SIGINT:\n%s", res)
			}
			res, took := r.wait(sent)
			wantExit(t, res, exitSignal, "interrupted by signal")
			if took > 5*time.Second {
				t.Errorf("exit %v after SIGINT", took)
			}
			t.Logf("exit %d %v after SIGINT", res.code, took.Round(time.Millisecond))
			assertPlacedSame(t, src, dst)
			assertNoTempFiles(t, dst)
		})
	}
}

// Connection setup is bounded. An agent that starts and never answers our
// handshake, a port that accepts TCP and never answers, reached with the
// built-in client and with -e ssh: --contimeout fails the run with exit
// 255 naming it, --timeout (shorter) with exit 30. The message says what
// did not answer (the SSH server's handshake, the agent, or, through -e,
// no answer through the command, with its stderr), the same every run,
// and --json's method_reason does not claim an agent that never answered.
func TestE2ESetupTimeouts(t *testing.T) {
	e2e(t)
	t.Parallel()
	srv := testsshd.Start(t)
	src := account.get(t)
	_, hang, _ := stallWrappers(t, "0")
	port := blackholePort(t)
	rsh := fmt.Sprintf("ssh -F /dev/null -p %d -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes", port)
	builtin := []string{"-F", "none", "-i", srv.IdentityFile, "--known-hosts", srv.KnownHostsFile, fmt.Sprintf("ssh://%s@127.0.0.1:%d%s", srv.User, port, src)}
	noBanner := fmt.Sprintf("the SSH server at 127.0.0.1:%d did not complete the SSH handshake (no banner received)", port)
	agent := "did not answer our protocol handshake"
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
		what string // what did not answer
	}{
		{"hung-agent-contimeout", append(sshdArgs(srv), "--remote-path", hang, "--contimeout", "2", sshdURL(srv, src)), exitSSH, "connection setup timed out after 2s (--contimeout 2s)", agent},
		{"hung-agent-timeout", append(sshdArgs(srv), "--remote-path", hang, "--timeout", "2", sshdURL(srv, src)), exitTimeout, "timeout in data send/receive", agent},
		{"blackhole-contimeout", append([]string{"--contimeout", "2"}, builtin...), exitSSH, "(--contimeout 2s)", noBanner},
		{"blackhole-timeout", append([]string{"--timeout", "2"}, builtin...), exitTimeout, "(--timeout 2s)", noBanner},
		// Agent-less, the built-in client says it in the same words.
		{"blackhole-agentless-contimeout", append([]string{"--remote-path", "none", "--method", "tar", "--contimeout", "2"}, builtin...), exitSSH, "connection setup timed out after 2s (--contimeout 2s)", noBanner},
		// -v: what ssh printed until it was stopped is in the message.
		{"rsh-blackhole-contimeout", []string{"-e", rsh + " -v", "--contimeout", "2", "127.0.0.1:" + src}, exitSSH, "(--contimeout 2s)", "no answer came through ssh 127.0.0.1"},
		{"rsh-blackhole-timeout", []string{"-e", rsh, "--timeout", "2", "127.0.0.1:" + src}, exitTimeout, "(--timeout 2s)", "no answer came through ssh 127.0.0.1"},
		// Agent-less, the remote command's first byte is the end of the
		// setup, so --contimeout bounds a command that never answers.
		{"rsh-agentless-tar-contimeout", []string{"-e", rsh + " -v", "--remote-path", "none", "--method", "tar", "--contimeout", "2", "127.0.0.1:" + src}, exitSSH, "(--contimeout 2s)", "no answer came through ssh 127.0.0.1"},
		{"rsh-agentless-rsync-contimeout", []string{"-e", rsh + " -v", "--remote-path", "none", "--method", "rsync", "--contimeout", "2", "127.0.0.1:" + src}, exitSSH, "(--contimeout 2s)", "no answer came through ssh 127.0.0.1"},
		{"rsh-agentless-auto-contimeout", []string{"-e", rsh + " -v", "--remote-path", "none", "--contimeout", "2", "127.0.0.1:" + src}, exitSSH, "(--contimeout 2s)", "no answer came through ssh 127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dst := filepath.Join(t.TempDir(), "acct")
			start := time.Now()
			r := runBin(t, append(append([]string{"restore", "--progress", "none", "--json"}, tc.args...), dst)...)
			took := time.Since(start)
			wantExit(t, r, tc.code, tc.msg)
			if !strings.Contains(r.stderr, tc.what) {
				t.Errorf("want %q on stderr:\n%s", tc.what, r)
			}
			if strings.Contains(r.stderr, "protocol error") || strings.Contains(r.stderr, "i/o timeout") {
				t.Errorf("called a protocol error, or the SSH library's timeout:\n%s", r)
			}
			if strings.HasPrefix(tc.name, "rsh-") && (strings.Contains(r.stderr, agent) || tc.code == exitSSH && !strings.Contains(r.stderr, "debug1: Connection established")) {
				t.Errorf("through -e, blames the agent or lacks ssh's stderr:\n%s", r)
			}
			agentless := slices.Contains(tc.args, "none")
			if rep := parseReport(t, r); rep.ExitCode != tc.code || !agentless && !strings.Contains(rep.MethodReason, "failed before the restoresync agent answered") {
				t.Errorf("--json: exit_code %d, method_reason %q; want %d and that the run failed before the agent answered", rep.ExitCode, rep.MethodReason, tc.code)
			}
			if took > 10*time.Second {
				t.Errorf("exit after %v; the timeout is 2 s", took)
			}
			if _, err := os.Stat(dst); err == nil {
				t.Errorf("DST was created by a restore that never connected")
			}
			t.Logf("exit %d after %v: %s", r.code, took.Round(time.Millisecond), strings.TrimSpace(r.stderr))
		})
	}
}

// An unknown host key through -e ssh is a connection
// failure (exit 255) with OpenSSH's words, not a "protocol error".
func TestE2ERshUnknownHostKey(t *testing.T) {
	e2e(t)
	t.Parallel()
	srv := testsshd.Start(t)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rsh := fmt.Sprintf("ssh -F /dev/null -i %s -o UserKnownHostsFile=%s -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes -o BatchMode=yes",
		srv.IdentityFile, kh)
	dst := filepath.Join(t.TempDir(), "acct")
	r := runBin(t, "restore", "-e", rsh, "--remote-path", binPath, sshdURL(srv, "/nonexistent"), dst)
	wantExit(t, r, exitSSH, "Host key verification failed")
	if strings.Contains(r.stderr, "protocol error") {
		t.Errorf("called a protocol error:\n%s", r)
	}
	t.Log(strings.TrimSpace(r.stderr))
}

// An agent that dies mid-transfer (SIGKILL 0.7 s after it started, the SSH
// connection still up), pulling and pushing, with the built-in client and
// with -e ssh: exit 12 as rsync's "connection unexpectedly closed", saying
// the remote side ended early and how, with the rerun hint; the --json
// object says so too; only complete files are in place, and a rerun
// completes the tree. It is not exit 11 ("file I/O error"), and through
// -e ssh (which exits 255 when the remote command is killed by a signal)
// not exit 255 "ssh connection failed"; a push says how the remote side
// ended, not only "write: EOF".
func TestE2EAgentKilled(t *testing.T) {
	e2e(t)
	t.Parallel()
	srv := testsshd.Start(t)
	src := faultsTree.get(t)
	_, _, kill := stallWrappers(t, "0.7")
	rsh := "ssh -F '" + srv.Config(t) + "'"
	for _, tc := range []struct {
		name      string
		push, rsh bool
		how       string // how the remote side ended, on stderr
	}{
		{"pull", false, false, "exited with signal KILL"},
		{"pull-rsh", false, true, "exited with status 255 after some output"},
		{"push", true, false, "exited with signal KILL"},
		{"push-rsh", true, true, "exited with status 255 after some output"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dst := filepath.Join(t.TempDir(), "acct")
			conn, remote := sshdArgs(srv), func(p string) string { return sshdURL(srv, p) }
			if tc.rsh {
				conn, remote = []string{"-e", rsh}, func(p string) string { return "testhost:" + p }
			}
			from, to := remote(src), dst
			if tc.push {
				from, to = src, remote(dst)
			}
			restore := func(remotePath string, more ...string) result {
				args := append(append([]string{"restore"}, conn...), "--remote-path", remotePath, "--progress", "none")
				return runBin(t, append(append(args, more...), from, to)...)
			}
			r := restore(kill, "-j", "2", "--bwlimit", "8M", "--json")
			wantExit(t, r, exitProtocol, "the remote side ended early")
			if !strings.Contains(r.stderr, tc.how) {
				t.Errorf("want %q on stderr:\n%s", tc.how, r)
			}
			rep := parseReport(t, r)
			if rep.ExitCode != exitProtocol || !strings.Contains(rep.Error, tc.how) {
				t.Errorf("--json: exit_code %d, error %q; want %d and %q", rep.ExitCode, rep.Error, exitProtocol, tc.how)
			}
			if rep.Bytes > 0 && !strings.Contains(r.stderr, "rerun the same command") {
				t.Errorf("files were restored before the agent died, but no rerun hint:\n%s", r)
			}
			// --json keeps the advice apart from what failed.
			if !strings.Contains(rep.Hint, "rerun the same command") || strings.Contains(rep.Error, "rerun") {
				t.Errorf("--json: error %q, hint %q; want the rerun advice in hint only", rep.Error, rep.Hint)
			}
			t.Logf("exit %d: %s", r.code, strings.TrimSpace(r.stderr))
			assertPlacedSame(t, src, dst)
			if !tc.push { // a killed receiver cannot remove its temporary files: the rerun does
				assertNoTempFiles(t, dst)
			}
			if r := restore(binPath); r.code != 0 {
				t.Fatalf("rerun: want exit 0:\n%s", r)
			}
			assertSameTree(t, src, dst)
			assertNoTempFiles(t, dst)
		})
	}
}
