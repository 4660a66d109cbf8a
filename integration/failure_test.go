package integration

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testsshd"
)

// Exit codes and messages of failed restores (see main.go).
func TestE2EExitCodes(t *testing.T) {
	e2e(t)
	t.Parallel()
	dir := t.TempDir()

	t.Run("wrong argument count", func(t *testing.T) {
		t.Parallel()
		r := runBin(t, "restore", dir)
		wantExit(t, r, exitUsage, "takes at least 2 arguments")
	})

	t.Run("unknown flag", func(t *testing.T) {
		t.Parallel()
		r := runBin(t, "restore", "--no-such-flag", dir, filepath.Join(dir, "dst"))
		wantExit(t, r, exitUsage, "--no-such-flag")
	})

	t.Run("unknown codec", func(t *testing.T) {
		t.Parallel()
		r := runBin(t, "restore", "--compress", "bogus", dir, filepath.Join(dir, "dst"))
		wantExit(t, r, exitUsage, "bogus")
		for _, codec := range []string{"none", "lz4", "zstd", "gzip"} {
			if !strings.Contains(r.stderr, codec) {
				t.Errorf("the message does not list codec %s:\n%s", codec, r)
			}
		}
	})

	srv := testsshd.Start(t)
	src := account.get(t)

	t.Run("unknown host key", func(t *testing.T) {
		t.Parallel()
		empty := filepath.Join(t.TempDir(), "known_hosts")
		if err := os.WriteFile(empty, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(t.TempDir(), "alice")
		r := runBin(t, "restore", "-F", "none", "-i", srv.IdentityFile, "--known-hosts", empty, "--remote-path", binPath, sshdURL(srv, src), dst)
		wantExit(t, r, exitSSH, "host key")
		if names, _ := os.ReadDir(dst); len(names) > 0 {
			t.Errorf("%d entries restored from a host whose key is unknown", len(names))
		}
	})

	t.Run("missing remote source", func(t *testing.T) {
		t.Parallel()
		missing := filepath.Join(t.TempDir(), "no-such-account")
		r := runBin(t, append(append([]string{"restore"}, sshdArgs(srv)...), sshdURL(srv, missing), filepath.Join(t.TempDir(), "dst"))...)
		wantExit(t, r, exitFileIO, missing) // names it
		// Said once, though the agent's stderr repeats the error it sent.
		if n := strings.Count(r.stderr, "open source"); n != 1 {
			t.Errorf("the error is said %d times, want once:\n%s", n, r)
		}
		// --json says how the run ended, on stdout, for scripts. The agent
		// runs behind a shell startup that writes to stderr, as a noisy
		// .bashrc does: the agent's own error is the whole message.
		noisy := filepath.Join(t.TempDir(), "noisy-agent")
		script := "#!/bin/sh\necho 'pyenv: cannot rehash: /root/.pyenv/shims is not writable' >&2\nexec " + binPath + " \"$@\"\n"
		if err := os.WriteFile(noisy, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		r = runBin(t, append(append([]string{"restore", "--json"}, sshdArgs(srv)...), "--remote-path", noisy, sshdURL(srv, missing), filepath.Join(t.TempDir(), "dst"))...)
		wantExit(t, r, exitFileIO, missing)
		rep := parseReport(t, r)
		if rep.ExitCode != exitFileIO || !strings.Contains(rep.Error, missing) {
			t.Errorf("--json report of a failed run: exit_code %d, error %q; want %d and the missing path", rep.ExitCode, rep.Error, exitFileIO)
		}
		// The path once, then the cause, as the agent found it.
		if want := "open source " + missing + ": no such file or directory"; !strings.HasSuffix(rep.Error, want) || strings.Count(rep.Error, missing) != 1 {
			t.Errorf("--json error %q, want it to end with %q and name the path once", rep.Error, want)
		}
		if !strings.Contains(rep.MethodReason, "agent answered") {
			t.Errorf("method_reason %q; the agent answered (with its error)", rep.MethodReason)
		}
	})

	// An agent that is not there (raw, so auto does not fall back to the
	// remote's tar): exit 12 with the shell's words and the install hint,
	// said once.
	t.Run("missing remote agent", func(t *testing.T) {
		t.Parallel()
		args := append(sshdArgs(srv), "--method", "raw", "--remote-path", "/nonexistent/restoresync", sshdURL(srv, src), filepath.Join(t.TempDir(), "dst"))
		r := runBin(t, append([]string{"restore"}, args...)...)
		wantExit(t, r, exitProtocol, "/nonexistent/restoresync: No such file or directory")
		if n := strings.Count(r.stderr, "is restoresync installed on the remote host?"); n != 1 {
			t.Errorf("the install hint is given %d times, want once:\n%s", n, r)
		}
	})

	// A real per-file failure as root: the destination holds an immutable
	// file (chattr +i) where the source has another version, so renaming
	// the new one into place fails with EPERM. Everything else is restored.
	t.Run("per-file error", func(t *testing.T) {
		t.Parallel()
		dst := filepath.Join(t.TempDir(), "alice")
		p := plantImmutable(t, dst, stuck)

		args := append([]string{"restore", "--json"}, sshdArgs(srv)...)
		r := runBin(t, append(args, sshdURL(srv, src), dst)...)
		wantExit(t, r, exitPartial, "could not be restored")
		rep := parseReport(t, r)
		if len(rep.Errors) != 1 || rep.Errors[0].Path != stuck {
			t.Errorf("report errors: %+v; want one, for %s", rep.Errors, stuck)
		}
		if rep.ExitCode != exitPartial || !strings.Contains(rep.Error, "could not be restored") {
			t.Errorf("report: exit_code %d, error %q; want %d, \"could not be restored\"", rep.ExitCode, rep.Error, exitPartial)
		}
		if got, _ := os.ReadFile(p); string(got) != "planted, immutable\n" {
			t.Errorf("the immutable file changed: %q", got)
		}
		rsyncItemize(t, []string{"-aHni", "--checksum", "--delete", "--exclude", "/" + stuck}, src, dst)
		assertNoTempFiles(t, dst)

		// The summary form lists the failed path on stderr.
		r = runBin(t, append(append([]string{"restore"}, sshdArgs(srv)...), sshdURL(srv, src), dst)...)
		wantExit(t, r, exitPartial, stuck)
	})

	// The same failure on the far side of a push: the remote writer's
	// per-file error comes back as the client's.
	t.Run("per-file error push", func(t *testing.T) {
		t.Parallel()
		dst := filepath.Join(t.TempDir(), "alice")
		p := plantImmutable(t, dst, stuck)

		args := append([]string{"restore", "--json", "-j", "2"}, sshdArgs(srv)...)
		r := runBin(t, append(args, src, sshdURL(srv, dst))...)
		wantExit(t, r, exitPartial, "could not be restored")
		rep := parseReport(t, r)
		if len(rep.Errors) != 1 || rep.Errors[0].Path != stuck {
			t.Errorf("report errors: %+v; want one, for %s", rep.Errors, stuck)
		}
		if got, _ := os.ReadFile(p); string(got) != "planted, immutable\n" {
			t.Errorf("the immutable file changed: %q", got)
		}
		rsyncItemize(t, []string{"-aHni", "--checksum", "--delete", "--exclude", "/" + stuck}, src, dst)
		assertNoTempFiles(t, dst)
	})
}

// stuck is the file the per-file error tests make immutable: a plain file
// of the account, not hardlinked.
const stuck = "public_html/robots.txt"

// plantImmutable puts an immutable file (chattr +i) with other contents at
// dst/rel, or skips t where the file system or the container does not
// allow it. The flag is cleared when t ends, before TempDir's removal.
func plantImmutable(t *testing.T, dst, rel string) string {
	t.Helper()
	p := filepath.Join(dst, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("planted, immutable\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chattr", "+i", p).CombinedOutput(); err != nil {
		t.Skipf("chattr +i is not available here, no per-file failure to make as root: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", p).Run() })
	return p
}

// wantExit fails t unless r exited with code and mentions msg on stderr.
func wantExit(t *testing.T, r result, code int, msg string) {
	t.Helper()
	if r.code != code {
		t.Errorf("want exit %d:\n%s", code, r)
	} else if !strings.Contains(r.stderr, msg) {
		t.Errorf("want %q on stderr:\n%s", msg, r)
	}
	if strings.Contains(r.stderr, "panic:") {
		t.Errorf("panic:\n%s", r)
	}
}

// A restore whose server dies mid-transfer fails cleanly and leaves no
// file under its final name that differs from the source; a rerun against
// a restarted server completes it and sweeps the temporary files.
func TestE2EInterruptedThenRerun(t *testing.T) {
	e2e(t)
	t.Parallel()
	root := t.TempDir()
	src := filepath.Join(root, "acct")
	// ~57 MB, slowed to a few seconds by one stream and gzip -9. Its two
	// files above 4 MiB (an SQL dump, a log) travel split: the dump is the
	// first file in place, at about a fifth of the way.
	mustRun(t, "bench", "gen", "--profile", "hosting", "--scale", "0.1", "--seed", "11", src)
	srcStats := statTree(t, src)
	keys := newListenKeys(t)
	srv := startListen(t, root, keys)
	dst := filepath.Join(t.TempDir(), "acct")

	args := append([]string{"restore", "--jobs", "1", "--compress", "gzip:9", "--block-size", "4MiB"}, srv.args()...)
	args = append(args, srv.url("acct"), dst)
	cmd, cancel := command(t, args...)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// Kill the server as soon as a first file is in place.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for placed := 0; placed == 0; {
		select {
		case err := <-done:
			r := finished(t, cmd, err, start, &stdout, &stderr, args)
			t.Fatalf("the restore ended before it could be interrupted (make the tree bigger):\n%s", r)
		case <-tick.C:
			placed = len(placedFiles(dst))
		}
	}
	srv.kill()
	r := finished(t, cmd, <-done, start, &stdout, &stderr, args)
	assertCleanFailure(t, r)

	// Whatever is under its final name is complete and final.
	placed := placedFiles(dst)
	t.Logf("interrupted after %v with %d files in place, %d temporary: %s", time.Since(start).Round(time.Millisecond),
		len(placed), countTempFiles(dst), strings.TrimSpace(r.stderr))
	inodes := map[uint64]bool{}
	for _, rel := range placed {
		assertSameFile(t, filepath.Join(src, rel), filepath.Join(dst, rel))
		fi, err := os.Lstat(filepath.Join(dst, rel))
		if err == nil {
			inodes[fi.Sys().(*syscall.Stat_t).Ino] = true
		}
	}
	if len(placed) >= srcStats.files+srcStats.hardlinks {
		t.Fatalf("all %d files were in place: the restore was not interrupted", len(placed))
	}

	// A new server on a new port (new known_hosts line); the rerun sends
	// only what is missing.
	srv2 := startListen(t, root, keys)
	if srv2.port == srv.port {
		t.Logf("the new server got the old port %d again", srv.port)
	}
	r = mustRun(t, append(append([]string{"restore", "--json", "--block-size", "4MiB"}, srv2.args()...), srv2.url("acct"), dst)...)
	rep := parseReport(t, r)
	if rep.Skipped != len(inodes) || rep.Files+rep.Skipped != srcStats.files {
		t.Errorf("rerun: %d files sent, %d skipped; want %d skipped (in place after the interruption) of %d",
			rep.Files, rep.Skipped, len(inodes), srcStats.files)
	}
	assertSameTree(t, src, dst)
	assertNoTempFiles(t, dst)
}

// placedFiles lists the regular files under root that are under their final
// names (not temporary files), relative to root. It tolerates a tree that
// is changing.
func placedFiles(root string) []string {
	var files []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !isTempFile(d.Name()) {
			rel, _ := filepath.Rel(root, p)
			files = append(files, rel)
		}
		return nil
	})
	return files
}

func countTempFiles(root string) int {
	n := 0
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && isTempFile(d.Name()) {
			n++
		}
		return nil
	})
	return n
}

// assertSameFile fails t unless dst has src's contents, mode and mtime.
func assertSameFile(t *testing.T, src, dst string) {
	t.Helper()
	sfi, err := os.Lstat(src)
	if err != nil {
		t.Errorf("%s is not in the source: %v", dst, err)
		return
	}
	dfi, err := os.Lstat(dst)
	if err != nil {
		t.Error(err)
		return
	}
	if sfi.Mode() != dfi.Mode() || !sfi.ModTime().Equal(dfi.ModTime()) || sfi.Size() != dfi.Size() {
		t.Errorf("%s: %v %d bytes %v; the source has %v %d bytes %v", dst, dfi.Mode(), dfi.Size(), dfi.ModTime(), sfi.Mode(), sfi.Size(), sfi.ModTime())
		return
	}
	a, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("%s: contents differ from the source's", dst)
	}
}
