package integration

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// When --out cannot be written at the end after all (/dev/full passes the
// check and then fails), the results go to stdout: nothing measured is lost.
func TestBenchOutputFailsLate(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := smallTree(t)
	r := runBin(t, "bench", "run", "--src", src, "--runs", "1", "--baselines", "none", "--format", "csv", "--out", "/dev/full", "--tmp", t.TempDir())
	recs, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
	if r.code != exitFileIO || !strings.Contains(r.stderr, "the results went to stdout instead") || err != nil ||
		len(recs) != 2 || recs[1][0] != "restoresync" || recs[1][12] != "ok" {
		t.Errorf("want exit 11 and the CSV results on stdout (%v):\n%s", err, r)
	}
	js := filepath.Join(t.TempDir(), "res.json")
	if err := os.WriteFile(js, []byte(`{"source":"x","rows":[{"tool":"restoresync","method":"raw","codec":"none","jobs":4,"phase":"full","median_wall_seconds":1}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runBin(t, "bench", "report", "--in", js, "--out", "/dev/full")
	if r.code != exitFileIO || !strings.Contains(r.stdout, "full   1.00") {
		t.Errorf("bench report: want exit 11 and the table on stdout:\n%s", r)
	}
}
