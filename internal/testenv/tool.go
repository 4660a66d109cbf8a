package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// CIVar is the environment variable that marks a CI run; .ci/run exports
// CI=true, as most CI services do.
const CIVar = "CI"

// InCI reports whether the tests run in CI: CIVar is set to a non-empty
// value. There a test must not skip for want of something `make test`
// provides.
func InCI() bool { return os.Getenv(CIVar) != "" }

// RequireTool looks up each of names on $PATH (exec.LookPath) and returns
// the path of the first one. When one is missing it ends t: with t.Skip
// when not in CI, with t.Fatal in CI (see InCI); either way the message
// names the program and says that `make test` installs it. With no names
// it returns "". It is safe for concurrent use by parallel tests.
func RequireTool(t testing.TB, names ...string) string {
	t.Helper()
	first := ""
	for i, name := range names {
		p, err := exec.LookPath(name)
		if err != nil {
			if InCI() {
				t.Fatalf("%s is required and missing in CI (%s=%q): %v; `make test` installs it", name, CIVar, os.Getenv(CIVar), err)
			}
			t.Skipf("%s is not installed (%v); `make test` installs it", name, err)
		}
		if i == 0 {
			first = p
		}
	}
	return first
}
