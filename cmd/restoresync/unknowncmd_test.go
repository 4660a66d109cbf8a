package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestUnknownCommandExitsUsage checks that a first word that is no command
// exits 1 with cobra's message, its suggestion and the pointer to --help,
// while a known command group with a wrong subcommand is not taken for one.
func TestUnknownCommandExitsUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"restor", "a", "b"}, &stdout, &stderr)
	if code != exitUsage {
		t.Errorf("exit code %d, want %d; stderr %q", code, exitUsage, stderr.String())
	}
	for _, want := range []string{`unknown command "restor" for "restoresync"`, "Did you mean this?", "\trestore\n", "Run 'restoresync --help' for the commands."} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q does not say %q", stderr.String(), want)
		}
	}
	stderr.Reset()
	if code := run(t.Context(), []string{"serve", "--no-such-flag"}, &stdout, &stderr); code != exitUsage || strings.Contains(stderr.String(), "for the commands") {
		t.Errorf("serve --no-such-flag: exit %d, stderr %q", code, stderr.String())
	}
}
