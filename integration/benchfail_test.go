package integration

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/bench"
	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/internal/testsshd"
)

// A baseline that fails makes bench run exit 23 once every output is
// written: the JSON results with the failed row and the good one, and each
// of several --chart files. The test sshd has no SFTP subsystem, so
// OpenSSH 9's scp (SFTP by default) fails the targz-scp baseline, as on
// any host whose sshd serves no SFTP.
func TestBenchRunFailedRowExits23(t *testing.T) {
	e2e(t)
	t.Parallel()
	testenv.RequireTool(t, "tar", "gzip", "ssh", "scp")
	srv := testsshd.Start(t)
	src := benchTree.get(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "res.json")
	svg, pngFile := filepath.Join(dir, "c.svg"), filepath.Join(dir, "c.png")
	r := runBin(t, append(sshdArgs(srv), "bench", "run", "--src", sshdURL(srv, src), "--methods", "raw", "--compress", "none",
		"--jobs", "1", "--runs", "1", "--baselines", "targz-scp", "--tmp", t.TempDir(),
		"--format", "json", "--out", out, "--chart", svg, "--chart", pngFile)...)
	if r.code != exitPartial || !strings.Contains(r.stderr, "1 of 2 rows failed or did not verify (tar.gz+scp;") {
		t.Errorf("a failed baseline: want exit %d and how many rows failed on stderr:\n%s", exitPartial, r)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("--out was not written: %v\n%s", err, r)
	}
	var res bench.Results
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("--out: %v\n%s", err, b)
	}
	raw := findRow(t, res, bench.ToolRestoresync, "raw", bench.PhaseFull)
	if raw.Error != "" || raw.Verified != "ok" || raw.MedianWallSeconds <= 0 {
		t.Errorf("the restoresync row: error %q, verified %q, %v s; want a good row", raw.Error, raw.Verified, raw.MedianWallSeconds)
	}
	scp := findRow(t, res, bench.BaselineTarGzSCP, "", bench.PhaseFull)
	if !strings.Contains(scp.Error, "scp") {
		t.Errorf("the targz-scp row: error %q, want scp's failure (the test sshd has no SFTP subsystem)", scp.Error)
	}
	// Both charts, not only the last --chart.
	sb, err := os.ReadFile(svg)
	if err != nil {
		t.Fatalf("--chart %s: %v", svg, err)
	}
	if bars := countBars(t, sb); bars < 1 {
		t.Errorf("c.svg has %d bars, want the good row's", bars)
	}
	f, err := os.Open(pngFile)
	if err != nil {
		t.Fatalf("--chart %s: %v", pngFile, err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("c.png: %v", err)
	}
}
