package integration

import (
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/bench"
	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/internal/testsshd"
)

// benchTree is a tiny hosting account for the bench run tests.
var benchTree = &sharedTree{name: "bench-run", args: []string{"--profile", "hosting", "--scale", "0.01", "--seed", "3"}}

// runBenchJSON runs bench run with args and --format json, and decodes the
// results.
func runBenchJSON(t *testing.T, args ...string) bench.Results {
	t.Helper()
	out := filepath.Join(t.TempDir(), "results.json")
	r := mustRun(t, append(append([]string{"bench", "run"}, args...), "--format", "json", "--out", out)...)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res bench.Results
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("bench run --format json: %v\n%s\n%s", err, b, r)
	}
	return res
}

// findRow returns the row of tool (and method for restoresync) in phase.
func findRow(t *testing.T, res bench.Results, tool, method, phase string) bench.Row {
	t.Helper()
	for _, r := range res.Rows {
		if r.Tool == tool && (method == "" || r.Method == method) && r.Phase == phase {
			return r
		}
	}
	t.Fatalf("no %s %s %s row in %+v", tool, method, phase, res.Rows)
	return bench.Row{}
}

func TestBenchRunLocal(t *testing.T) {
	e2e(t)
	t.Parallel()
	testenv.RequireTool(t, "rsync")
	src := benchTree.get(t)
	dir := t.TempDir()
	chart := filepath.Join(dir, "chart.svg")
	r := mustRun(t, "bench", "run", "--src", src, "--methods", "raw", "--compress", "none,zstd", "--jobs", "1",
		"--runs", "1", "--baselines", "rsync", "--chart", chart, "--tmp", dir)
	for _, want := range []string{"median wall s", "min–max s", "raw ", "rsync -aH", "ok", "their results are compared with the source ignoring xattrs, ACLs and sparseness"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, r.stdout)
		}
	}
	// Three rows of one run: the first run's line says how long the two
	// left take.
	if first, _, _ := strings.Cut(r.stderr[strings.Index(r.stderr, "run 1/1"):], "\n"); !strings.Contains(first, "(bench ETA ") {
		t.Errorf("the first run's line has no overall ETA:\n%s", r.stderr)
	}
	res := runBenchJSON(t, "--src", src, "--methods", "raw", "--compress", "none", "--jobs", "1", "--runs", "1", "--baselines", "rsync")
	if len(res.Rows) != 2 || res.PayloadBytes <= 0 || res.Files <= 0 {
		t.Fatalf("want 2 rows and a payload, got %+v", res)
	}
	for _, row := range res.Rows {
		if row.Error != "" || row.Verified != "ok" {
			t.Errorf("row %s: error %q, verified %q", row.Label(), row.Error, row.Verified)
		}
		if row.MedianWallSeconds <= 0 || row.MiBPerSecond <= 0 || row.ClientCPUSeconds <= 0 || row.VsRsync <= 0 || row.PayloadBytes <= 0 {
			t.Errorf("row %s: want positive numbers, got %+v", row.Label(), row)
		}
	}
	// The chart: well-formed XML with one bar per row of the table.
	b, err := os.ReadFile(chart)
	if err != nil {
		t.Fatal(err)
	}
	bars := countBars(t, b)
	if bars != 2 {
		t.Errorf("chart has %d bars, want 2 (raw none j1, rsync)", bars)
	}
	// SRC is never written: only the destinations and the delta copy are.
	if r := runBin(t, "bench", "compare", src, src); r.code != 0 {
		t.Errorf("source changed?\n%s", r)
	}
}

// countBars parses an SVG and counts its rect elements of class "bar".
func countBars(t *testing.T, svg []byte) int {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(string(svg)))
	bars := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				return bars
			}
			t.Fatalf("chart is not well-formed XML: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			for _, a := range se.Attr {
				if a.Name.Local == "class" && a.Value == "bar" {
					bars++
				}
			}
		}
	}
}

func TestBenchRunSSHD(t *testing.T) {
	e2e(t)
	t.Parallel()
	testenv.RequireTool(t, "rsync", "tar", "ssh")
	srv := testsshd.Start(t)
	src := benchTree.get(t)
	// The far side's commands run with a TMPDIR of this test's own, so
	// that what they leave behind is told from other bench runs' (tests
	// in parallel); each lists TMPDIR when it ends.
	farTmp, farLog := t.TempDir(), filepath.Join(t.TempDir(), "far.log")
	agent := filepath.Join(t.TempDir(), "agent.sh")
	script := fmt.Sprintf("#!/bin/sh\nTMPDIR=%s; export TMPDIR\n%s \"$@\"\nrc=$?\nls -A \"$TMPDIR\" >> %s\nexit $rc\n", farTmp, binPath, farLog)
	if err := os.WriteFile(agent, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	res := runBenchJSON(t, append(sshdArgs(srv), "--remote-path", agent, "--src", sshdURL(srv, src), "--methods", "raw", "--compress", "zstd",
		"--jobs", "2", "--runs", "1", "--baselines", "rsync,tar-ssh", "--delta", "5%", "--tmp", t.TempDir(),
		"--server-pid", strconv.Itoa(srv.PID))...)
	if !res.Remote {
		t.Errorf("results: remote = false for %s", res.Source)
	}
	for _, row := range res.Rows {
		// Every row verified, the delta rows too (against the changed
		// copy's counts, as the agent reported them).
		if row.Error != "" || row.Verified != "ok" {
			t.Errorf("row %s: error %q, verified %q", row.Label(), row.Error, row.Verified)
		}
		if row.MedianWallSeconds <= 0 || row.WireBytes <= 0 {
			t.Errorf("row %s: want positive wall time and wire bytes, got %+v", row.Label(), row)
		}
		// Both ends measured: the far side's commands ran under the
		// rusage wrapper, and sshd's reaped time holds them and more.
		if row.ServerCommandCPUSeconds <= 0 || row.ServerCPUSeconds < row.ServerCommandCPUSeconds ||
			row.ServerPeakRSSBytes < 1<<20 || row.ClientPeakRSSBytes < 1<<20 {
			t.Errorf("row %s: want server CPU >= its commands' CPU > 0 and both peak RSS > 1 MiB, got server %.3f s (commands %.3f s), RSS client %d server %d",
				row.Label(), row.ServerCPUSeconds, row.ServerCommandCPUSeconds, row.ClientPeakRSSBytes, row.ServerPeakRSSBytes)
		}
	}
	// Nothing of the far side's measuring is left on the host: it was
	// made in farTmp (far-setup's listing shows it), and is gone.
	if b, err := os.ReadFile(farLog); err != nil || !strings.Contains(string(b), "restoresync-bench-far-") {
		t.Errorf("the far side's measuring directory was not made in the test's TMPDIR (log: %q, %v)", b, err)
	}
	if left, _ := filepath.Glob(filepath.Join(farTmp, "*")); len(left) > 0 {
		t.Errorf("bench run left %v behind", left)
	}
	full := findRow(t, res, bench.ToolRestoresync, "raw", bench.PhaseFull)
	delta := findRow(t, res, bench.ToolRestoresync, "raw", bench.PhaseDelta)
	if delta.WireBytes >= full.WireBytes {
		t.Errorf("raw delta moved %d wire bytes, the full restore %d: want fewer", delta.WireBytes, full.WireBytes)
	}
	rfull := findRow(t, res, bench.BaselineRsync, "", bench.PhaseFull)
	rdelta := findRow(t, res, bench.BaselineRsync, "", bench.PhaseDelta)
	if rdelta.WireBytes >= rfull.WireBytes {
		t.Errorf("rsync delta moved %d wire bytes, the full one %d: want fewer", rdelta.WireBytes, rfull.WireBytes)
	}
	tar := findRow(t, res, bench.BaselineTarSSH, "", bench.PhaseFull)
	if tar.WireBytes < res.PayloadBytes {
		t.Errorf("tar|ssh|tar relayed %d bytes, less than the payload %d", tar.WireBytes, res.PayloadBytes)
	}
	if full.CompressionRatio <= 1 {
		t.Errorf("raw zstd: compression ratio %v, want > 1 on a hosting tree", full.CompressionRatio)
	}
	// A source directory missing on the host stops the run up front.
	r0 := runBin(t, append(append([]string{"bench", "run"}, sshdArgs(srv)...), "--src", sshdURL(srv, src+"-missing"), "--runs", "1", "--tmp", t.TempDir())...)
	if r0.code != exitFileIO || r0.stdout != "" || !strings.Contains(r0.stderr, src+"-missing is not a directory on 127.0.0.1") {
		t.Errorf("missing source directory: want exit 11 up front:\n%s", r0)
	}
	// bench report redraws the saved results: CSV with a row each, and a PNG chart.
	dir := t.TempDir()
	js, _ := json.Marshal(res)
	in := filepath.Join(dir, "res.json")
	if err := os.WriteFile(in, js, 0o600); err != nil {
		t.Fatal(err)
	}
	pngFile := filepath.Join(dir, "chart.png")
	r := mustRun(t, "bench", "report", "--in", in, "--format", "csv", "--chart", pngFile, "--chart", filepath.Join(dir, "chart.svg"))
	if recs, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll(); err != nil || len(recs) != 1+len(res.Rows) {
		t.Errorf("bench report --format csv: %d records, %v", len(recs), err)
	}
	f, err := os.Open(pngFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if img, err := png.Decode(f); err != nil || img.Bounds().Dy() < 24*len(res.Rows) {
		t.Errorf("chart.png: %v", err)
	}
}
