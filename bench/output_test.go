package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/transport"
)

// tool runs a program a test needs; missing, it fails the test in CI
// (make test installs it) and skips it elsewhere.
func tool(t *testing.T, name string, args ...string) {
	t.Helper()
	testenv.RequireTool(t, name)
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// Figures that do not apply are empty CSV cells and JSON nulls, as they are
// "-" in the table: the delta row's CPU s/GiB and vs rsync, the failed
// row's numbers, the baselines' jobs, wire bytes nobody measured.
func TestWriteResultsNotApplicable(t *testing.T) {
	res := sampleResults()
	var b bytes.Buffer
	if err := WriteResults(&b, res, "csv"); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil || len(recs) != 1+len(res.Rows) {
		t.Fatalf("csv: %d records, %v", len(recs), err)
	}
	cell := func(row int, col string) string {
		for i, h := range recs[0] {
			if h == col {
				return recs[1+row][i]
			}
		}
		t.Fatalf("no csv column %q", col)
		return ""
	}
	for _, c := range []struct {
		row       int
		col, want string
	}{
		{0, "jobs", "4"}, {0, "cpu_seconds_per_gib", "37.5000"}, {0, "vs_rsync", "0.5000"}, {0, "wire_bytes", "52428800"},
		{1, "cpu_seconds_per_gib", ""}, {1, "vs_rsync", ""}, {1, "server_cpu_seconds", ""}, {1, "client_peak_rss_bytes", ""},
		{2, "jobs", ""}, {2, "compression_ratio", ""}, {2, "vs_rsync", "1.0000"},
		{3, "jobs", ""}, {3, "median_wall_seconds", ""}, {3, "mib_per_second", ""}, {3, "wire_bytes", ""},
		{3, "client_cpu_seconds", ""}, {3, "payload_bytes", "104857600"},
	} {
		if got := cell(c.row, c.col); got != c.want {
			t.Errorf("csv row %d (%s) %s = %q, want %q", c.row, res.Rows[c.row].Label(), c.col, got, c.want)
		}
	}

	b.Reset()
	if err := WriteResults(&b, res, "json"); err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(b.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		row  int
		key  string
		want any // nil: null
	}{
		{0, "jobs", 4.0}, {0, "cpu_seconds_per_gib", 37.5}, {0, "compression_ratio", nil},
		{1, "cpu_seconds_per_gib", nil}, {1, "vs_rsync", nil},
		{2, "jobs", nil}, {3, "median_wall_seconds", nil}, {3, "wire_bytes", nil}, {3, "payload_bytes", 104857600.0},
	} {
		got, ok := raw.Rows[c.row][c.key]
		if !ok || got != c.want {
			t.Errorf("json row %d %s = %v (present %v), want %v", c.row, c.key, got, ok, c.want)
		}
	}
	// Saved results read back as they were (null is the zero), and bench
	// report writes the same table from them.
	var back Results
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	var want, got bytes.Buffer
	WriteResults(&want, res, "markdown")
	WriteResults(&got, &back, "markdown")
	if want.String() != got.String() {
		t.Errorf("markdown from the JSON round trip differs:\n%s\nwant:\n%s", &got, &want)
	}
	for _, r := range back.Rows {
		if r.Tool != ToolRestoresync && r.Jobs != 0 {
			t.Errorf("%s: jobs %d after the round trip, want 0", r.Label(), r.Jobs)
		}
	}
	// The delta rows' note comes under the table and Markdown.
	for _, f := range []string{"table", "markdown"} {
		b.Reset()
		WriteResults(&b, res, f)
		if !strings.Contains(b.String(), "delta rows: MiB/s is the size of the files the tool rewrote") {
			t.Errorf("%s lacks the delta rows' note:\n%s", f, &b)
		}
	}
	res.Rows = res.Rows[:1]
	b.Reset()
	WriteResults(&b, res, "table")
	if strings.Contains(b.String(), "delta rows:") {
		t.Errorf("delta note without delta rows:\n%s", &b)
	}
}

// rowJSON has Row's JSON names, in Row's order, so that MarshalJSON
// changes no name: a field added to Row must be added there too.
func TestRowJSONMatchesRow(t *testing.T) {
	rt, jt := reflect.TypeFor[Row](), reflect.TypeFor[rowJSON]()
	if rt.NumField() != jt.NumField() {
		t.Fatalf("Row has %d fields, rowJSON %d", rt.NumField(), jt.NumField())
	}
	for i := range rt.NumField() {
		if r, j := rt.Field(i), jt.Field(i); r.Name != j.Name || r.Tag.Get("json") != j.Tag.Get("json") {
			t.Errorf("field %d: Row %s %q, rowJSON %s %q", i, r.Name, r.Tag.Get("json"), j.Name, j.Tag.Get("json"))
		}
	}
}

// A baseline's result is compared without xattrs and holes, which rsync -aH
// and tar do not keep; restoresync's is compared on them.
func TestVerifyLocalBaseline(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(src, "f")
	if err := os.WriteFile(f, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	tool(t, "setfattr", "-n", "user.bench", "-v", "1", f)
	tool(t, "truncate", "-s", "1M", filepath.Join(src, "holes"))
	tool(t, "cp", "-a", "--sparse=never", src, dst)
	tool(t, "setfattr", "-x", "user.bench", filepath.Join(dst, "f"))
	got, err := verifyLocal(context.Background(), src, dst, false)
	if err != nil || !strings.Contains(got, "2 differences") {
		t.Errorf("restoresync row: %q, %v; want 2 differences (xattr, sparseness)", got, err)
	}
	if got, err := verifyLocal(context.Background(), src, dst, true); err != nil || got != "ok" {
		t.Errorf("baseline row: %q, %v; want ok", got, err)
	}
}

// The agent's delta copy reports the counts the delta rows of a remote
// source are checked against.
func TestWriteDeltaCopySummary(t *testing.T) {
	src := t.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(src, n), []byte(strings.Repeat(n, 100)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a", filepath.Join(src, "l")); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteDeltaCopy(context.Background(), &b, src, 50, 1); err != nil {
		t.Fatal(err)
	}
	var out deltaCopyOutput
	if err := json.Unmarshal(b.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(out.Path)) })
	want := treeSummary{Files: 3, Dirs: 1, Symlinks: 1, Bytes: 300 + int64(out.Stats.Appended*len(deltaAppend))}
	if out.Summary == nil || *out.Summary != want || out.Stats.Files != 2 {
		t.Errorf("summary %+v, stats %+v; want %+v and 2 files changed", out.Summary, out.Stats, want)
	}
}

// A source host that does not answer stops Run before anything is timed,
// with an error wrapping transport.ErrConnect (exit 255).
func TestRunUnreachableSource(t *testing.T) {
	testenv.RequireTool(t, "ssh")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now
	var log bytes.Buffer
	start := time.Now()
	res, err := Run(context.Background(), RunOptions{
		Src: "127.0.0.1:/srv", Baselines: []string{BaselineRsync}, Runs: 1, Log: &log, TempDir: t.TempDir(),
		SSH: transport.SSHOptions{Rsh: "ssh -o BatchMode=yes -p " + strconv.Itoa(port)},
	})
	if !errors.Is(err, transport.ErrConnect) || res != nil {
		t.Fatalf("Run: %v, results %+v; want ErrConnect and none", err, res)
	}
	if !strings.Contains(err.Error(), "cannot reach 127.0.0.1") || !strings.Contains(err.Error(), "refused") {
		t.Errorf("error %q: want the host and ssh's reason", err)
	}
	if log.Len() != 0 || time.Since(start) > time.Minute {
		t.Errorf("rows ran (%v):\n%s", time.Since(start), &log)
	}
}
