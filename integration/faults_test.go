package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/internal/testsshd"
)

// faultsTree is the tree the signal and timeout tests restore: ~34 MB,
// slow enough with one stream and gzip -9 to be caught mid-transfer.
var faultsTree = &sharedTree{name: "faults", args: []string{"--profile", "hosting", "--scale", "0.06", "--seed", "13"}}

// running is a restore started in the background.
type running struct {
	t              *testing.T
	cmd            *exec.Cmd
	args           []string
	done           chan error
	start          time.Time
	stdout, stderr bytes.Buffer
}

func startRestore(t *testing.T, args ...string) *running {
	t.Helper()
	cmd, cancel := command(t, args...)
	t.Cleanup(cancel)
	r := &running{t: t, cmd: cmd, args: args, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = &r.stdout, &r.stderr
	r.start = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- cmd.Wait() }()
	return r
}

// waitPlaced waits until a first file is under its final name in dst; it
// fails t if the restore ends before.
func (r *running) waitPlaced(dst string) {
	r.t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for len(placedFiles(dst)) == 0 {
		select {
		case err := <-r.done:
			res := finished(r.t, r.cmd, err, r.start, &r.stdout, &r.stderr, r.args)
			r.t.Fatalf("the restore ended before it could be interrupted (make the tree bigger):\n%s", res)
		case <-tick.C:
		}
	}
}

// wait returns the result and how long after since the process ended.
func (r *running) wait(since time.Time) (result, time.Duration) {
	r.t.Helper()
	err := <-r.done
	took := time.Since(since)
	return finished(r.t, r.cmd, err, r.start, &r.stdout, &r.stderr, r.args), took
}

// assertPlacedSame fails t unless every file under its final name in dst
// is the source's, complete and final.
func assertPlacedSame(t *testing.T, src, dst string) {
	t.Helper()
	for _, rel := range placedFiles(dst) {
		assertSameFile(t, filepath.Join(src, rel), filepath.Join(dst, rel))
	}
}

// Ctrl-C mid-transfer: the restore stops promptly with exit 20 and says
// how to complete it, removes its temporary files, and the rerun
// completes the tree.
func TestE2ESignalThenRerun(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := faultsTree.get(t)
	srv := startListen(t, filepath.Dir(src), newListenKeys(t))
	dst := filepath.Join(t.TempDir(), "acct")
	args := append([]string{"restore", "--jobs", "1", "--compress", "gzip:9", "--block-size", "4MiB"}, srv.args()...)
	r := startRestore(t, append(args, "--json", srv.url(filepath.Base(src)), dst)...)
	r.waitPlaced(dst)
	sent := time.Now()
	if err := r.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	res, took := r.wait(sent)
	wantExit(t, res, exitSignal, "interrupted by signal; rerun the same command")
	// --json (and a post-hook's report) says so too, not "context canceled".
	if rep := parseReport(t, res); rep.ExitCode != exitSignal || !strings.HasPrefix(rep.Error, "interrupted by signal") {
		t.Errorf("--json: exit_code %d, error %q; want %d, interrupted by signal", rep.ExitCode, rep.Error, exitSignal)
	}
	if took > 10*time.Second {
		t.Errorf("the restore took %v to stop after SIGINT", took)
	}
	t.Logf("stopped %v after SIGINT, %d files in place", took.Round(time.Millisecond), len(placedFiles(dst)))
	assertPlacedSame(t, src, dst)
	assertNoTempFiles(t, dst)

	mustRun(t, append(append([]string{"restore"}, srv.args()...), srv.url(filepath.Base(src)), dst)...)
	assertSameTree(t, src, dst)
	assertNoTempFiles(t, dst)
}

// A remote side that stops answering (its process stopped with SIGSTOP,
// so the TCP connection stays up): --timeout fails the restore with exit
// 30 and rsync's wording; without --timeout the built-in client's
// keepalives (ServerAliveInterval from -F) find the connection dead, exit
// 255.
func TestE2EStalledServer(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := faultsTree.get(t)
	for _, tc := range []struct {
		name     string
		flags    []string
		config   string
		code     int
		msg      string
		deadline time.Duration // from SIGSTOP to the exit, at most
	}{
		{"timeout", []string{"--timeout", "2"}, "", exitTimeout, "timeout in data send/receive", 15 * time.Second},
		{"keepalive", nil, "Host *\n  ServerAliveInterval 1\n  ServerAliveCountMax 2\n", exitSSH, "no reply to 2 keepalives", 15 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := startListen(t, filepath.Dir(src), newListenKeys(t))
			dst := filepath.Join(t.TempDir(), "acct")
			args := append([]string{"restore", "--jobs", "1", "--compress", "gzip:9"}, tc.flags...)
			conn := srv.args()
			if tc.config != "" {
				cfg := filepath.Join(t.TempDir(), "ssh_config")
				if err := os.WriteFile(cfg, []byte(tc.config), 0o600); err != nil {
					t.Fatal(err)
				}
				conn[1] = cfg // -F FILE
			}
			r := startRestore(t, append(append(args, conn...), srv.url(filepath.Base(src)), dst)...)
			r.waitPlaced(dst)
			stopped := time.Now()
			if err := srv.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			defer srv.cmd.Process.Signal(syscall.SIGCONT)
			res, took := r.wait(stopped)
			wantExit(t, res, tc.code, tc.msg)
			if took > tc.deadline {
				t.Errorf("exit %v after the server stopped", took)
			}
			t.Logf("exit %d %v after SIGSTOP", res.code, took.Round(time.Millisecond))
			assertPlacedSame(t, src, dst)
			assertNoTempFiles(t, dst)
		})
	}
}

// An unreadable file and directory on the sending side: the agent runs
// without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (setpriv, through an -e
// wrapper), as a non-root sender would. Those entries are reported, the
// rest is restored, exit 23.
func TestE2ESourcePermissionDenied(t *testing.T) {
	e2e(t)
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it drops root's capabilities")
	}
	testenv.RequireTool(t, "setpriv") // util-linux
	dir := t.TempDir()
	src := filepath.Join(dir, "acct")
	files := map[string]string{
		"public_html/index.php":    "<?php echo 1;\n",
		"public_html/secret.php":   "<?php $password = 'x';\n",
		"mail/cur/1700000000.M1":   "From: a@b\n\nhi\n",
		"private/inside/notes.txt": "cannot be listed\n",
		"logs/access.log":          strings.Repeat("GET / 200\n", 1000),
	}
	for rel, content := range files {
		p := filepath.Join(src, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(src, "public_html/secret.php"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(src, "private"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(src, "private"), 0o755) })
	wrap := filepath.Join(dir, "no-dac-rsh")
	script := "#!/bin/sh\n# -e program: drop the host, run the agent without DAC override\nshift\n" +
		"exec setpriv --bounding-set=-dac_override,-dac_read_search --inh-caps=-dac_override,-dac_read_search \"$@\"\n"
	if err := os.WriteFile(wrap, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "acct")
	r := runBin(t, "restore", "--json", "-e", wrap, "--remote-path", binPath, "backup:"+src, dst)
	wantExit(t, r, exitPartial, "could not be restored")
	rep := parseReport(t, r)
	got := map[string]string{}
	for _, fe := range rep.Errors {
		got[fe.Path] = fe.Error
	}
	for _, rel := range []string{"public_html/secret.php", "private"} {
		if !strings.Contains(got[rel], "permission denied") {
			t.Errorf("%s: error %q; want permission denied (errors: %+v)", rel, got[rel], rep.Errors)
		}
	}
	if len(got) != 2 {
		t.Errorf("errors %+v; want secret.php and private only", rep.Errors)
	}
	for rel, content := range files {
		b, err := os.ReadFile(filepath.Join(dst, rel))
		switch {
		case strings.HasPrefix(rel, "private/") || rel == "public_html/secret.php":
			if err == nil {
				t.Errorf("%s was restored from an unreadable source", rel)
			}
		case err != nil || string(b) != content:
			t.Errorf("%s: %q, %v; want the source's content", rel, b, err)
		}
	}
	assertNoTempFiles(t, dst)
}

// A changed host key is fatal through -e ssh too: OpenSSH refuses, the
// restore exits 255 with ssh's warning, and nothing is written.
func TestE2ERshHostKeyMismatch(t *testing.T) {
	e2e(t)
	t.Parallel()
	srv := testsshd.Start(t)
	src := account.get(t)
	other := writeEd25519(t, filepath.Join(t.TempDir(), "other_host_key"))
	kh := filepath.Join(t.TempDir(), "known_hosts")
	line := fmt.Sprintf("[%s]:%d %s", srv.Host, srv.Port, ssh.MarshalAuthorizedKey(other))
	if err := os.WriteFile(kh, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	rsh := fmt.Sprintf("ssh -F /dev/null -i %s -o UserKnownHostsFile=%s -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes -o BatchMode=yes",
		srv.IdentityFile, kh)
	dst := filepath.Join(t.TempDir(), "alice")
	r := runBin(t, "restore", "-e", rsh, "--remote-path", binPath, sshdURL(srv, src), dst)
	wantExit(t, r, exitSSH, "REMOTE HOST IDENTIFICATION HAS CHANGED")
	if names, _ := os.ReadDir(dst); len(names) > 0 {
		t.Errorf("%d entries restored from a host whose key changed", len(names))
	}
}
