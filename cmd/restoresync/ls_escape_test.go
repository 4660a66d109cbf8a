package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// No name from a backup can add a line to what ls prints: the --versions
// table and the errors on stderr escape names as the listing does
// ("\#012" for a newline), so "*deleting   precious" stays inside its line.
func TestLsEscapesNamesInVersionsAndErrors(t *testing.T) {
	t.Setenv("LC_ALL", "C.UTF-8")
	root := t.TempDir()
	evil := "evil\n*deleting   precious"
	for _, snap := range []string{"daily.0", "daily.1"} {
		if err := os.MkdirAll(filepath.Join(root, snap), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, snap, evil), []byte(snap), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	forged := func(out string) bool {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "*deleting") {
				return true
			}
		}
		return false
	}
	r := runIn(t, "ls", "--versions", filepath.Join(root, "daily.0", evil), filepath.Join(root, "daily.1", evil))
	if r.code != 0 || forged(r.stdout) || !strings.Contains(r.stdout, `evil\#012*deleting   precious`) {
		t.Errorf("ls --versions: a name forged a line or is not escaped:\n%s", r)
	}
	r = runIn(t, "ls", filepath.Join(root, "nope\n*deleting   x"))
	if r.code == 0 || forged(r.stderr) || !strings.Contains(r.stderr, `nope\#012*deleting   x`) {
		t.Errorf("ls of a missing name: its error forged a line or is not escaped:\n%s", r)
	}
}
