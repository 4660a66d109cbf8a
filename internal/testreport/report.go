// Package testreport decodes `restoresync restore --json` output for the
// tests, as a script would: by the documented field names, independently
// of restore.Report's Go type, so that a renamed Go field that changes the
// JSON fails the tests.
//
// Files: report.go — Report, Codec and Parse.
package testreport

import (
	"encoding/json"
	"strings"
	"testing"
)

// Report is the one JSON object restore --json prints. Fields absent from
// the output keep their zero value; Errors is nil only when the output
// had no "errors" list.
type Report struct {
	Method       string  `json:"method"`
	MethodReason string  `json:"method_reason"`
	Compression  string  `json:"compression"`
	Jobs         int     `json:"jobs"`
	Files        int     `json:"files"`
	Dirs         int     `json:"dirs"`
	Symlinks     int     `json:"symlinks"`
	Hardlinks    int     `json:"hardlinks"`
	Bytes        int64   `json:"bytes"`
	WireBytes    int64   `json:"wire_bytes"`
	Skipped      int     `json:"skipped"`
	Seconds      float64 `json:"seconds"`
	ExitCode     int     `json:"exit_code"`
	Error        string  `json:"error"`
	Hint         string  `json:"hint"`
	Errors       []struct {
		Path  string `json:"path"`
		Error string `json:"error"`
	} `json:"errors"`
	JobsReason    string  `json:"jobs_reason"`
	LinkMiBPerSec float64 `json:"link_mib_per_s"`
	Codecs        []Codec `json:"codecs"`
}

// Codec is one object of the report's "codecs": what one codec carried.
type Codec struct {
	Codec     string  `json:"codec"`
	Files     int64   `json:"files"`
	Bytes     int64   `json:"bytes"`
	WireBytes int64   `json:"wire_bytes"`
	Ratio     float64 `json:"ratio"`
	MiBPerSec float64 `json:"mib_per_s"`
}

// Parse decodes stdout, which must hold exactly one JSON object on one
// line, and fails t (showing run, the command's whole result) when it does
// not; a missing or null "errors" list is reported as an error of t. Safe
// for parallel tests.
func Parse(t testing.TB, stdout string, run any) Report {
	t.Helper()
	var rep Report
	out := strings.TrimSpace(stdout)
	if strings.Count(out, "\n") != 0 {
		t.Fatalf("--json printed more than one line:\n%v", run)
	}
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&rep); err != nil {
		t.Fatalf("--json output: %v\n%v", err, run)
	}
	if rep.Errors == nil {
		t.Errorf("--json: \"errors\" is null or missing, want a list:\n%s", out)
	}
	return rep
}
