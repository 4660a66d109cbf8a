package bench

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// spreadResults has a row whose runs took 0.94, 3.55 and 3.34 s (a spread
// of 78% of the median) and one whose runs agree (5%).
func spreadResults() *Results {
	return &Results{Source: "/srv/alice", PayloadBytes: 100 << 20, Files: 10, Runs: 3, Rows: []Row{
		{Tool: ToolRestoresync, Method: "raw", Codec: "zstd", Jobs: 4, Phase: PhaseFull, WallSeconds: []float64{0.94, 3.55, 3.34}, MedianWallSeconds: 3.34, PayloadBytes: 100 << 20, Verified: "ok"},
		{Tool: BaselineRsync, Method: "rsync -aH", Codec: "none", Jobs: 1, Phase: PhaseFull, WallSeconds: []float64{2.0, 2.1, 2.05}, MedianWallSeconds: 2.05, PayloadBytes: 100 << 20, Verified: "ok"},
	}}
}

const wideNote = "wide spread: the wall times of raw zstd j4 full (0.94–3.55 s around 3.34 s, 78%) differ by more than 25% of their median, which may not represent them: rerun with more --runs on a quieter host"

// Every format shows the fastest and slowest run beside the median, and
// the note on a spread over WideSpreadPercent names that row only.
func TestWriteResultsSpread(t *testing.T) {
	res := spreadResults()
	write := func(format string) string {
		var b bytes.Buffer
		if err := WriteResults(&b, res, format); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	for _, f := range []string{"table", "markdown"} {
		out := write(f)
		for _, want := range []string{"min–max s", "3.34", "0.94–3.55", "2.05", "2.00–2.10", wideNote} {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %q:\n%s", f, want, out)
			}
		}
		if strings.Count(out, "wide spread") != 1 || strings.Contains(out, "rsync -aH full (") {
			t.Errorf("%s: the note must name the wide row only:\n%s", f, out)
		}
	}

	recs, err := csv.NewReader(strings.NewReader(write("csv"))).ReadAll()
	if err != nil || len(recs) != 3 {
		t.Fatalf("csv: %d records, %v", len(recs), err)
	}
	col := map[string]string{}
	for i, h := range recs[0] {
		col[h] = recs[1][i]
	}
	for k, want := range map[string]string{"median_wall_seconds": "3.3400", "min_wall_seconds": "0.9400", "max_wall_seconds": "3.5500", "wall_spread_percent": "78.1437"} {
		if col[k] != want {
			t.Errorf("csv %s = %q, want %q", k, col[k], want)
		}
	}

	var js struct {
		Rows []struct {
			Median float64 `json:"median_wall_seconds"`
			Min    float64 `json:"min_wall_seconds"`
			Max    float64 `json:"max_wall_seconds"`
			Spread float64 `json:"wall_spread_percent"`
		} `json:"rows"`
		Notes []string `json:"notes"`
	}
	if err := json.Unmarshal([]byte(write("json")), &js); err != nil {
		t.Fatal(err)
	}
	if r := js.Rows[0]; r.Median != 3.34 || r.Min != 0.94 || r.Max != 3.55 || r.Spread < 78.1 || r.Spread > 78.2 {
		t.Errorf("json row: %+v", r)
	}
	if len(js.Notes) != 1 || js.Notes[0] != wideNote {
		t.Errorf("json notes %q, want the wide spread's", js.Notes)
	}
}

// The overall ETA of a bench run: 3 runs of two series, one run of the
// first measured at 2 s, so 2 more of it and 3 of the other (taken at the
// mean, 2 s) are 10 s of restores; 4 s elapsed for 2 s measured doubles
// that for what is not timed.
func TestBenchETA(t *testing.T) {
	a, b := &series{walls: []float64{2}}, &series{}
	if _, ok := benchETA([]*series{{}, {}}, 3, time.Second); ok {
		t.Error("an ETA before any run was measured")
	}
	if eta, ok := benchETA([]*series{a, b}, 3, 4*time.Second); !ok || eta != 20*time.Second {
		t.Errorf("ETA %v (%v), want 20s", eta, ok)
	}
	b.failed = true // a failed series runs no more
	if eta, _ := benchETA([]*series{a, b}, 3, 2*time.Second); eta != 4*time.Second {
		t.Errorf("ETA with a failed series %v, want 4s", eta)
	}
}
