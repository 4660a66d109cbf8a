package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
)

// A missing SRC is said once, on stderr and in --json's error: the path
// and the cause, not the operation and path again.
func TestMissingSrcSaidOnce(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	dst := filepath.Join(t.TempDir(), "dst")
	want := "open source " + missing + ": no such file or directory"
	r := runIn(t, "--config", "none", "restore", missing, dst)
	if r.code != exitFileIO || strings.TrimSpace(r.stderr) != "restoresync: "+want {
		t.Errorf("want exit %d and stderr %q:\n%s", exitFileIO, "restoresync: "+want, r)
	}
	r = runIn(t, "--config", "none", "restore", "--json", missing, dst)
	if rep := parseReport(t, r); rep.Error != want || rep.ExitCode != exitFileIO {
		t.Errorf("--json: error %q, exit_code %d; want %q, %d", rep.Error, rep.ExitCode, want, exitFileIO)
	}
	// The tar method's sender says it on its stderr too: once is enough.
	r = runIn(t, "--config", "none", "restore", "--method", "tar", missing, dst)
	if strings.Count(r.stderr, want) != 1 {
		t.Errorf("--method tar: want %q once:\n%s", want, r)
	}
}

// --json keeps what failed in "error" and the advice in "hint"; stderr
// has both, the hint on its own line.
func TestJSONHintApartFromError(t *testing.T) {
	died := fmt.Errorf("%w: %w: ssh exited with signal KILL", transfer.ErrProtocol, transport.ErrRemoteExited)
	rep := &restore.Report{Files: 3, Bytes: 300}
	err := restoreEndError(context.Background(), rep, died)
	b, _ := json.Marshal(newJSONReport(context.Background(), rep, err))
	var got struct {
		Error    string `json:"error"`
		Hint     string `json:"hint"`
		ExitCode int    `json:"exit_code"`
	}
	if jerr := json.Unmarshal(b, &got); jerr != nil {
		t.Fatal(jerr)
	}
	if got.Error != died.Error() || got.Hint != "files already restored are in place; rerun the same command to complete the restore" || got.ExitCode != exitProtocol {
		t.Errorf("--json report %s: want error %q, the rerun hint apart, exit %d", b, died, exitProtocol)
	}
	if want := died.Error() + "\n(files already restored are in place; rerun the same command to complete the restore)"; err.Error() != want {
		t.Errorf("stderr says %q, want %q", err, want)
	}
}

// An interrupted run says so in --json's error, and the rerun advice in
// its hint; stderr keeps the one line.
func TestJSONHintInterrupted(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	rep := &restore.Report{Files: 1, Bytes: 1}
	err := restoreEndError(cancelled, rep, fmt.Errorf("stream 2: %w", context.Canceled))
	jr := newJSONReport(cancelled, rep, err)
	if jr.Error != "interrupted by signal" || jr.Hint != "rerun the same command to complete the restore" || jr.ExitCode != exitSignal {
		t.Errorf("--json: error %q, hint %q, exit %d", jr.Error, jr.Hint, jr.ExitCode)
	}
	if err.Error() != "interrupted by signal; rerun the same command to complete the restore" {
		t.Errorf("stderr says %q", err)
	}
}

// A command the SSH server refused to run (its exec request refused) is
// not fixed by a rerun, as a command that exits before any output is not.
func TestRefusedCommandGetsNoRerunHint(t *testing.T) {
	for _, kind := range []error{transport.ErrCommandRefused, transport.ErrRemoteRefused} {
		err := fmt.Errorf("%w: %w: ssh backup: exec request failed", transport.ErrConnect, kind)
		if instead, ok := notFixedByRerun(err); !ok || !strings.Contains(instead, "a rerun will not help") {
			t.Errorf("%v: notFixedByRerun = %q, %v; want the advice instead of the rerun hint", kind, instead, ok)
		}
	}
}
