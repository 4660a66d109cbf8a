package integration

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/internal/testreport"
	"github.com/restoresync/restoresync/internal/testsshd"
)

// checkTarReport checks the report of a tar restore into an empty
// destination: the method, the counts of what src holds, and a network.
func checkTarReport(t *testing.T, rep testreport.Report, src treeStats, jobs int, compression string) {
	t.Helper()
	if rep.Method != "tar" || !strings.HasPrefix(rep.Compression, compression) || rep.Jobs != jobs {
		t.Errorf("report: method %q, compression %q, jobs %d; want tar, %q, %d", rep.Method, rep.Compression, rep.Jobs, compression, jobs)
	}
	if rep.Files != src.files || rep.Dirs != src.dirs || rep.Symlinks != src.symlinks || rep.Hardlinks != src.hardlinks || rep.Bytes != src.bytes {
		t.Errorf("report: %d files, %d dirs, %d symlinks, %d hardlinks, %d bytes; the source has %d, %d, %d, %d, %d",
			rep.Files, rep.Dirs, rep.Symlinks, rep.Hardlinks, rep.Bytes, src.files, src.dirs, src.symlinks, src.hardlinks, src.bytes)
	}
	if rep.WireBytes <= 0 || len(rep.Errors) != 0 {
		t.Errorf("report: wire_bytes %d, errors %+v", rep.WireBytes, rep.Errors)
	}
}

// --method tar over a real sshd with the agent on the far side: four
// shards, each its own SSH connection.
func TestE2ETarPullSSHD(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := account.get(t)
	srv := testsshd.Start(t)
	for _, codec := range []string{"zstd", "none"} {
		t.Run(codec, func(t *testing.T) {
			t.Parallel()
			dst := filepath.Join(t.TempDir(), "restored", "alice")
			args := append([]string{"restore", "--json", "--method", "tar", "-j", "4", "--compress", codec}, sshdArgs(srv)...)
			r := mustRun(t, append(args, sshdURL(srv, src), dst)...)
			checkTarReport(t, parseReport(t, r), statTree(t, src), 4, codec)
			assertSameTree(t, src, dst)
			assertNoTempFiles(t, dst)
		})
	}
}

// Agent-less tar: with --remote-path none the remote's own GNU tar runs,
// compressed by the remote's zstd, gzip or lz4; with an agent that is not
// there the client falls back to it and says so.
func TestE2ETarAgentless(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := account.get(t)
	srv := testsshd.Start(t)
	base := []string{"-F", "none", "-i", srv.IdentityFile, "--known-hosts", srv.KnownHostsFile}
	for _, tc := range []struct {
		name, remotePath, codec string
	}{
		{"none/zstd", "none", "zstd"},
		{"none/lz4", "none", "lz4"},
		{"none/uncompressed", "none", "none"},
		{"missing-agent/gzip", "/nonexistent/restoresync", "gzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dst := filepath.Join(t.TempDir(), "alice")
			args := append([]string{"restore", "--json", "--method", "tar", "--compress", tc.codec, "--remote-path", tc.remotePath}, base...)
			r := mustRun(t, append(args, sshdURL(srv, src), dst)...)
			checkTarReport(t, parseReport(t, r), statTree(t, src), 1, tc.codec)
			assertSameTree(t, src, dst)
			assertNoTempFiles(t, dst)
			if tc.remotePath != "none" && !strings.Contains(r.stderr, "no restoresync agent") {
				t.Errorf("the fallback to the remote's tar was not announced:\n%s", r)
			}
		})
	}
	t.Run("missing path", func(t *testing.T) {
		t.Parallel()
		dst := filepath.Join(t.TempDir(), "alice")
		args := append([]string{"restore", "--method", "tar", "--remote-path", "none"}, base...)
		r := runBin(t, append(args, sshdURL(srv, "/nonexistent/tree"), dst)...)
		assertCleanFailure(t, r)
		if !strings.Contains(r.stderr, "/nonexistent/tree") {
			t.Errorf("the message does not name the missing path:\n%s", r)
		}
		// --json's error says what failed, without the shell script that
		// ran on the remote.
		r = runBin(t, append(append(args[:1:1], append([]string{"--json"}, args[1:]...)...), sshdURL(srv, "/nonexistent/tree"), dst)...)
		rep := parseReport(t, r)
		if !strings.Contains(rep.Error, "/nonexistent/tree") || strings.Contains(rep.Error, "command -v") {
			t.Errorf("--json error %q: want the missing path, not the remote script", rep.Error)
		}
	})
}
