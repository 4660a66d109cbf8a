package main

// Helpers of the in-process tests: run() with arguments, what it printed,
// and the --json report it wrote.

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/internal/testreport"
	"github.com/restoresync/restoresync/internal/testtree"
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

// parseReport decodes the one JSON object restore --json prints.
func parseReport(t *testing.T, r result) testreport.Report {
	t.Helper()
	return testreport.Parse(t, r.stdout, r)
}

// smallTree writes a small account-like tree and returns its path.
func smallTree(t *testing.T) string { return testtree.Small(t) }

// ansi matches terminal escape sequences.
var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)
