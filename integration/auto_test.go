package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/internal/testsshd"
)

// --method auto (the default) over a real sshd: raw when the agent answers;
// without an agent, the remote's tar into an empty DST and the remote's
// rsync into a DST that already holds files; the choice and its reason are
// in the JSON report, and every result equals the source.
func TestE2EAutoMethod(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := account.get(t)
	srv := testsshd.Start(t)
	base := []string{"-F", "none", "-i", srv.IdentityFile, "--known-hosts", srv.KnownHostsFile}
	for _, tc := range []struct {
		name, remotePath string
		prefill          bool   // DST already holds an older copy
		want             string // the method auto must choose
		reason           string // part of its reason
	}{
		{"agent", binPath, false, "raw", "agent answered"},
		{"agent/update", binPath, true, "raw", "deltas"},
		{"no-agent/empty-dst", "none", false, "tar", "missing or empty"},
		{"no-agent/full-dst", "none", true, "rsync", "already holds files"},
		{"agent-missing/empty-dst", "/nonexistent/restoresync", false, "tar", "missing or empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dst := filepath.Join(t.TempDir(), "alice")
			if tc.prefill {
				// An older restore: the same tree with a few files changed.
				mustRun(t, append(append([]string{"restore", "--method", "raw", "--remote-path", binPath}, base...), sshdURL(srv, src), dst)...)
				for _, p := range []string{"public_html/index.php", "backups/db.sql"} {
					if err := os.WriteFile(filepath.Join(dst, p), []byte("older version\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			args := append([]string{"restore", "--json", "--remote-path", tc.remotePath}, base...)
			r := mustRun(t, append(args, sshdURL(srv, src), dst)...)
			rep := parseReport(t, r)
			if rep.Method != tc.want || !strings.Contains(rep.MethodReason, tc.reason) {
				t.Errorf("auto chose %q (%q); want %q (%q)", rep.Method, rep.MethodReason, tc.want, tc.reason)
			}
			if len(rep.Errors) != 0 {
				t.Errorf("errors: %+v", rep.Errors)
			}
			assertSameTree(t, src, dst)
		})
	}
}
