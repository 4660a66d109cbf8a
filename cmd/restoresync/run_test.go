package main

// Helpers of the in-process tests: run() with arguments, what it printed,
// and the --json report it wrote.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// result is what a run() in this process returned and printed.
type result struct {
	args           []string
	code           int // exit status
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("restoresync %s: exit %d\nstdout: %s\nstderr: %s",
		strings.Join(r.args, " "), r.code, strings.TrimSpace(r.stdout), strings.TrimSpace(r.stderr))
}

// runIn runs restoresync in this process and returns what it printed.
func runIn(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), args, &stdout, &stderr)
	return result{args: args, code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// mustRunIn is runIn that fails t unless the exit status is 0.
func mustRunIn(t *testing.T, args ...string) result {
	t.Helper()
	r := runIn(t, args...)
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	return r
}

// report is restore --json's output (restore.Report), decoded here
// independently of the Go type, as a script would.
type report struct {
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
	Errors       []struct {
		Path  string `json:"path"`
		Error string `json:"error"`
	} `json:"errors"`
}

// parseReport decodes the one JSON object restore --json prints.
func parseReport(t *testing.T, r result) report {
	t.Helper()
	var rep report
	out := strings.TrimSpace(r.stdout)
	if strings.Count(out, "\n") != 0 {
		t.Fatalf("--json printed more than one line:\n%s", r)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("--json output: %v\n%s", err, r)
	}
	if rep.Errors == nil {
		t.Errorf("--json: \"errors\" is null or missing, want a list:\n%s", out)
	}
	return rep
}

// smallTree writes a small account-like tree and returns its path.
func smallTree(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	files := map[string]string{
		"public_html/index.php":      "<?php echo 'hi';\n",
		"public_html/wp-config.php":  "<?php define('DB_PASSWORD', 'x');\n",
		"public_html/img/logo.png":   strings.Repeat("\x89PNG", 3000),
		"mail/cur/1700000000.M1.box": "Subject: hi\n\nhello\n",
		"empty":                      "",
	}
	for name, data := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// ansi matches terminal escape sequences.
var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)
