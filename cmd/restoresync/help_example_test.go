package main

// restore --help's examples say where the files land; this runs the
// several-SRC example on a local copy of its paths and checks them.

import (
	"os"
	"strings"
	"testing"
)

// The "two things of an account" example names the paths its files land
// at; running it (backup:/snap/alice a local tree, /home/alice a temporary
// directory) creates exactly those.
func TestRestoreHelpExampleSeveralSrcs(t *testing.T) {
	t.Parallel()
	lines := strings.Split(newRestoreCmd().Example, "\n")
	var comment, command string
	for i, l := range lines {
		if strings.Contains(l, "# two things of an account") && i+1 < len(lines) {
			comment, command = l, strings.TrimSpace(lines[i+1])
		}
	}
	if command == "" {
		t.Fatalf("no several-SRC example in:\n%s", newRestoreCmd().Example)
	}
	_, paths, ok := strings.Cut(comment, ": ")
	if !ok {
		t.Fatalf("example comment names no paths: %q", comment)
	}
	src, home := smallTree(t), t.TempDir()
	local := strings.NewReplacer("backup:/snap/alice", src, "/home/alice", home)
	args := strings.Fields(local.Replace(command))[1:] // without "restoresync"
	mustRunIn(t, append([]string{"--config", "none"}, append(args[:1], append([]string{"-q"}, args[1:]...)...)...)...)
	for _, p := range strings.Split(paths, ", ") {
		p = local.Replace(strings.TrimSuffix(strings.TrimSpace(p), "/..."))
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("the example says a file lands at %s: %v\nDST holds: %v", p, err, listTree(t, home))
		}
	}
}
