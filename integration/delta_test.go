package integration

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/internal/testsshd"
)

// Native delta of the raw method over a real sshd, beside the system's
// `rsync -a` on the same change: restore (pull and push) and rsync a
// generated account, change about 1% of its files (appends, and bytes
// edited in the middle of the largest file), then do it all again. The
// second raw runs send deltas: their wire bytes stay under 5% of the tree
// and within 1.5 times rsync's, and the trees compare equal.
func TestE2ERawDelta(t *testing.T) {
	e2e(t)
	t.Parallel()
	testenv.RequireTool(t, "rsync")
	src := filepath.Join(t.TempDir(), "dave")
	mustRun(t, "bench", "gen", "--profile", "hosting", "--scale", "0.03", "--seed", "13", "--owners", src)
	srv := testsshd.Start(t)
	cfg := srv.Config(t)
	pullDst := filepath.Join(t.TempDir(), "pull", "dave")
	pushDst := filepath.Join(t.TempDir(), "push", "dave")
	rsyncDst := filepath.Join(t.TempDir(), "dave")
	pull := append(append([]string{"restore", "--json"}, sshdArgs(srv)...), sshdURL(srv, src), pullDst)
	push := append(append([]string{"restore", "--json"}, sshdArgs(srv)...), src, sshdURL(srv, pushDst))
	rsync := func() int64 {
		t.Helper()
		out, err := exec.CommandContext(t.Context(), "rsync", "-a", "--stats", "-e", "ssh -F "+cfg, "testhost:"+src+"/", rsyncDst+"/").CombinedOutput()
		if err != nil {
			t.Fatalf("rsync -a: %v\n%s", err, out)
		}
		return rsyncWireBytes(t, string(out))
	}

	mustRun(t, pull...)
	mustRun(t, push...)
	rsync()
	changeOnePercent(t, src)
	st := statTree(t, src)
	rsyncWire := rsync()
	for _, tt := range []struct {
		name string
		args []string
		dst  string
	}{{"pull", pull, pullDst}, {"push", push, pushDst}} {
		r := mustRun(t, tt.args...)
		rep := parseReport(t, r)
		var extra struct {
			DeltaFiles *int `json:"delta_files"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &extra); err != nil || extra.DeltaFiles == nil {
			t.Fatalf("%s: --json has no delta_files: %v\n%s", tt.name, err, r.stdout)
		}
		t.Logf("%s: %d files (%d as deltas), %d payload bytes, %d wire bytes, %.2f s; rsync -a: %d wire bytes (tree: %d files, %d bytes)",
			tt.name, rep.Files, *extra.DeltaFiles, rep.Bytes, rep.WireBytes, rep.Seconds, rsyncWire, st.files, st.bytes)
		if len(rep.Errors) != 0 {
			t.Errorf("%s: errors: %+v", tt.name, rep.Errors)
		}
		if rep.Files == 0 || rep.Files > st.files/20 || *extra.DeltaFiles != rep.Files {
			t.Errorf("%s: %d files sent, %d as deltas, of %d", tt.name, rep.Files, *extra.DeltaFiles, st.files)
		}
		if limit := st.bytes / 20; rep.WireBytes >= limit {
			t.Errorf("%s: wire_bytes = %d, want under 5%% of the tree's %d bytes (%d)", tt.name, rep.WireBytes, st.bytes, limit)
		}
		if rep.WireBytes > rsyncWire*3/2 {
			t.Errorf("%s: wire_bytes = %d, more than 1.5 times rsync -a's %d", tt.name, rep.WireBytes, rsyncWire)
		}
		assertSameTree(t, src, tt.dst)
		assertNoTempFiles(t, tt.dst)
	}
}

var rsyncStatRE = regexp.MustCompile(`(?m)^Total bytes (sent|received): ([\d,.]+)`)

// rsyncWireBytes adds up the bytes rsync --stats says it sent and
// received (its protocol's bytes, as restoresync's wire_bytes are).
func rsyncWireBytes(t *testing.T, stats string) int64 {
	t.Helper()
	m := rsyncStatRE.FindAllStringSubmatch(stats, -1)
	if len(m) != 2 {
		t.Fatalf("rsync --stats: no byte totals in:\n%s", stats)
	}
	var n int64
	for _, s := range m {
		v, err := strconv.ParseInt(strings.NewReplacer(",", "", ".", "").Replace(s[2]), 10, 64)
		if err != nil {
			t.Fatalf("rsync --stats: %q: %v", s[0], err)
		}
		n += v
	}
	return n
}
