package integration

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testsshd"
)

// --timeout with --method rsync through the agent,
// over the real sshd, the agent that runs the remote rsync stopped
// (SIGSTOP) 0.5 s after it started rsync, while Go's src (about 11,000
// files) is being restored: the run fails with exit 30 and the transfer's
// idle timeout message within a bounded time, every file placed has the
// source's content, and no temporary file of ours is left (gokrazy's
// receiver removes its own when the stream fails; one it leaves is logged,
// as the README says it can be). Keepalives do not hold the timeout off:
// sshd answers them while the agent is stopped. The remote rsync's output goes straight to sshd, not
// through the agent, so the stop has to come while the agent still
// forwards gokrazy's requests to it, as it does for most of a tree of many
// files; the agent that lists the tree is left alone.
func TestE2ERsyncAgentStoppedTimeout(t *testing.T) {
	e2e(t)
	t.Parallel()
	srv := testsshd.Start(t)
	src := gorootSrc(t)
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	stall := filepath.Join(dir, "stall-rsync-agent.sh")
	// As stallWrappers' "stall", but the stop waits for a child of the
	// agent (its threads' children: Go forks from any thread), the rsync.
	script := fmt.Sprintf("#!/bin/sh\nexec 3<&0\n%s \"$@\" <&3 3<&- &\npid=$!\necho $pid >> %s\n"+
		"(while [ -z \"$(cat /proc/$pid/task/*/children 2>/dev/null)\" ]; do kill -0 $pid 2>/dev/null || exit 0; sleep 0.05; done; sleep 0.5; kill -STOP $pid) &\nwait $pid\n",
		binPath, pids)
	if err := os.WriteFile(stall, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killPIDs(pids) })
	dst := filepath.Join(t.TempDir(), "src")
	args := append(sshdArgs(srv), "--remote-path", stall, "--method", "rsync", "--progress", "none", "--timeout", "2", sshdURL(srv, src), dst)
	start := time.Now()
	r := runBin(t, append([]string{"restore"}, args...)...)
	took := time.Since(start)
	wantExit(t, r, exitTimeout, "timeout in data send/receive")
	if !strings.Contains(r.stderr, "while waiting for the remote side (--timeout 2s)") || strings.Contains(r.stderr, "file list") {
		t.Errorf("not the transfer's idle timeout:\n%s", r)
	}
	if took > 30*time.Second {
		t.Errorf("exit after %v; the agent stops 0.5 s into rsync, --timeout 2", took)
	}
	placed, stale := checkRsyncInterrupted(t, src, dst)
	t.Logf("exit %d after %v, %d files placed, %d gokrazy temporary files: %s", r.code, took.Round(time.Millisecond), placed, stale, strings.TrimSpace(r.stderr))
}

// checkRsyncInterrupted checks what an interrupted rsync restore left in
// dst: every regular file under a name the source has holds the source's
// content, no temporary file of ours is left; it returns how many files
// were placed and how many other dot files (gokrazy's temporary files,
// not swept) are there.
func checkRsyncInterrupted(t *testing.T, src, dst string) (placed, stale int) {
	t.Helper()
	filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(dst, p)
		want, err := os.ReadFile(filepath.Join(src, rel))
		switch {
		case strings.HasPrefix(d.Name(), ".restoresync-"):
			t.Errorf("temporary file left behind: %s", p)
		case err != nil && strings.HasPrefix(d.Name(), "."):
			stale++
		case err != nil:
			t.Errorf("%s: placed, but not in the source: %v", rel, err)
		default:
			if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: placed with other content (%v)", rel, err)
			}
			placed++
		}
		return nil
	})
	return placed, stale
}

// killPIDs sends SIGKILL to the processes listed in the file pids, one
// decimal PID a line: the stopped processes a test's wrapper started.
func killPIDs(pids string) {
	b, _ := os.ReadFile(pids)
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// gorootSrc is $(go env GOROOT)/src: a real tree no one here wrote.
func gorootSrc(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "src")
}

// --timeout 2 with --method rsync does not fire on a healthy restore of a
// real tree, Go's src/crypto (about 1,200 files, 16 MB; the whole of src
// takes too long for make test here, and passes too), over the real sshd:
// through the agent onto an empty DST, then a rerun agent-less
// (--remote-path none: the remote's rsync and find), in which gokrazy's
// generator goes through files already up to date and sends nothing while
// the sender waits on it.
func TestE2ERsyncTimeoutGorootSrc(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := filepath.Join(gorootSrc(t), "crypto")
	srv := testsshd.Start(t)
	dst := filepath.Join(t.TempDir(), "crypto")
	for _, remote := range []string{binPath, "none"} {
		args := append(sshdArgs(srv), "--remote-path", remote, "--method", "rsync", "--progress", "none", "--timeout", "2", "--no-xattrs", "--no-acls", sshdURL(srv, src), dst)
		start := time.Now()
		mustRun(t, append([]string{"restore"}, args...)...)
		t.Logf("--remote-path %s: %v", remote, time.Since(start).Round(time.Millisecond))
	}
	assertSameTree(t, src, dst)
}

// --timeout with agent-less --method rsync (--remote-path none) through
// -e ssh: the ssh that carries the remote "rsync --server --sender" is
// stopped (SIGSTOP) 0.7 s after it started, while Go's src is being
// restored, so nothing moves, as with a hung remote: exit 30 within a
// bounded time, placed files complete, no temporary file of ours left.
func TestE2ERsyncAgentlessStoppedTimeout(t *testing.T) {
	e2e(t)
	t.Parallel()
	srv := testsshd.Start(t)
	src := gorootSrc(t)
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	wrapper := filepath.Join(dir, "ssh-stop-rsync.sh")
	// The ssh that runs the remote rsync is stopped; the one that runs find
	// is left alone. Its stdin goes through fd 3 (see stallWrappers).
	script := fmt.Sprintf("#!/bin/sh\ncase \"$*\" in\n*'rsync --server'*)\n\texec 3<&0\n\tssh \"$@\" <&3 3<&- &\n\tpid=$!\n\techo $pid >> %s\n\t(sleep 0.7; kill -STOP $pid) &\n\twait $pid;;\n*) exec ssh \"$@\";;\nesac\n", pids)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killPIDs(pids) })
	rsh := fmt.Sprintf("%s -F /dev/null -i %s -o UserKnownHostsFile=%s -o BatchMode=yes -p %d", wrapper, srv.IdentityFile, srv.KnownHostsFile, srv.Port)
	dst := filepath.Join(t.TempDir(), "src")
	start := time.Now()
	r := runBin(t, "restore", "-e", rsh, "--remote-path", "none", "--method", "rsync", "--no-xattrs", "--no-acls", "--progress", "none", "--timeout", "2",
		fmt.Sprintf("%s@%s:%s", srv.User, srv.Host, src), dst)
	took := time.Since(start)
	wantExit(t, r, exitTimeout, "while waiting for the remote side (--timeout 2s)")
	if took > 30*time.Second {
		t.Errorf("exit after %v; ssh stops at 0.7 s, --timeout 2", took)
	}
	placed, stale := checkRsyncInterrupted(t, src, dst)
	t.Logf("exit %d after %v, %d files placed, %d gokrazy temporary files: %s", r.code, took.Round(time.Millisecond), placed, stale, strings.TrimSpace(r.stderr))
}
