package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that records how RequireTool ended it instead
// of ending the test that runs it.
type recorder struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recorder) Helper() {}

func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = true
	r.msg = fmt.Sprintf(format, args...)
	panic(r)
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = true
	r.msg = fmt.Sprintf(format, args...)
	panic(r)
}

// requireTool runs RequireTool on a recorder and returns what it left.
func requireTool(t *testing.T, names ...string) (path string, r *recorder) {
	r = &recorder{TB: t}
	defer func() {
		if v := recover(); v != nil && v != r {
			panic(v)
		}
	}()
	return RequireTool(r, names...), r
}

// fakePath makes a directory holding an executable named tool and sets
// $PATH to it alone for the rest of t.
func fakePath(t *testing.T, tool string) string {
	dir := t.TempDir()
	p := filepath.Join(dir, tool)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	return p
}

// A program on $PATH: its path, whatever CI says; with several names, the
// first one's.
func TestRequireToolFound(t *testing.T) {
	for _, ci := range []string{"", "true"} {
		t.Run("CI="+ci, func(t *testing.T) {
			t.Setenv(CIVar, ci)
			want := fakePath(t, "sometool")
			got, r := requireTool(t, "sometool", "sometool")
			if r.skipped || r.failed || got != want {
				t.Errorf("RequireTool = %q (skipped %v, failed %v: %s), want %q", got, r.skipped, r.failed, r.msg, want)
			}
		})
	}
	if got, r := requireTool(t); got != "" || r.skipped || r.failed {
		t.Errorf("RequireTool with no names = %q (skipped %v, failed %v)", got, r.skipped, r.failed)
	}
}

// A missing program skips the test locally and fails it in CI, and the
// message names it and says make test installs it, also when the missing
// one is not the first.
func TestRequireToolMissing(t *testing.T) {
	for _, c := range []struct {
		ci            string
		skip, fail    bool
		names         []string
		missingInText string
	}{
		{"", true, false, []string{"no-such-tool-x"}, "no-such-tool-x"},
		{"true", false, true, []string{"no-such-tool-x"}, "no-such-tool-x"},
		{"true", false, true, []string{"sometool", "no-such-tool-y"}, "no-such-tool-y"},
		{"", true, false, []string{"sometool", "no-such-tool-y"}, "no-such-tool-y"},
	} {
		t.Run("CI="+c.ci+"/"+strings.Join(c.names, ","), func(t *testing.T) {
			t.Setenv(CIVar, c.ci)
			fakePath(t, "sometool")
			_, r := requireTool(t, c.names...)
			if r.skipped != c.skip || r.failed != c.fail {
				t.Errorf("skipped %v, failed %v; want %v, %v (%s)", r.skipped, r.failed, c.skip, c.fail, r.msg)
			}
			if !strings.Contains(r.msg, c.missingInText) || !strings.Contains(r.msg, "make test") {
				t.Errorf("message %q: want the program's name and `make test`", r.msg)
			}
		})
	}
}
