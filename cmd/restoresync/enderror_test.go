package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
)

// How a restore's error is said (stderr, --json, the post-hook's report):
// the rerun hint comes when the restore had begun, also when no file was
// counted yet (the rsync method counts at the end, a raw run may be cut
// short inside its first big file); an interrupt is said as such.
func TestRestoreEndError(t *testing.T) {
	died := fmt.Errorf("%w: %w: ssh exited with signal KILL", transfer.ErrProtocol, transport.ErrRemoteExited)
	noAgent := fmt.Errorf("%w: dial: connection refused", transport.ErrConnect)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		rep      restore.Report
		err      error
		code     int
		contains string
		lacks    string
	}{
		{"killed, nothing counted", context.Background(), restore.Report{}, died, exitProtocol, "(rerun the same command to complete the restore)", "files already restored"},
		{"killed, files placed", context.Background(), restore.Report{Files: 3, Bytes: 300}, died, exitProtocol, "(files already restored are in place; rerun", ""},
		{"unreachable", context.Background(), restore.Report{}, noAgent, exitSSH, "connection refused", "rerun"},
		{"interrupted", cancelled, restore.Report{Files: 1, Bytes: 1}, fmt.Errorf("stream 2: %w", context.Canceled), exitSignal, interruptedMessage, "context canceled"},
		{"partial", context.Background(), restore.Report{Errors: []restore.FileError{{Path: "a", Error: "x"}}}, nil, exitPartial, "some files could not be restored (1 error)", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := restoreEndError(tc.ctx, &tc.rep, tc.err)
			if err == nil {
				t.Fatal("nil error")
			}
			if c := exitCode(tc.ctx, err); c != tc.code {
				t.Errorf("exit code %d, want %d (%v)", c, tc.code, err)
			}
			if !strings.Contains(err.Error(), tc.contains) || tc.lacks != "" && strings.Contains(err.Error(), tc.lacks) {
				t.Errorf("error %q: want %q, not %q", err, tc.contains, tc.lacks)
			}
			if tc.err != nil && !errors.Is(err, tc.err) && tc.code != exitSignal {
				t.Errorf("%v does not wrap %v", err, tc.err)
			}
		})
	}
	if err := restoreEndError(context.Background(), &restore.Report{Files: 2}, nil); err != nil {
		t.Errorf("complete restore: %v", err)
	}
}
