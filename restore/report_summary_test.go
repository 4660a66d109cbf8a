package restore_test

import (
	"testing"

	"github.com/restoresync/restoresync/restore"
)

// The summary gives the rate of the payload and of the wire, the bytes
// --bwlimit limits: compressed, 20 MB of payload over 5 MB on the wire in
// 2 s is 10 MB/s of payload and 2.5 MB/s on the wire.
func TestSummaryPayloadAndWireRates(t *testing.T) {
	rep := restore.Report{Method: "raw", Compression: "zstd:1", Jobs: 4, Files: 3, Bytes: 20e6, WireBytes: 5e6, Seconds: 2}
	want := "restored 3 files (0 up to date), 0 dirs, 0 symlinks, 0 hardlinks: 20.0 MB payload, 5.0 MB on the wire, 2.00 s, 10.0 MB/s payload, 2.5 MB/s on the wire [raw, zstd:1, 4 jobs]"
	if got := rep.Summary(); got != want {
		t.Errorf("summary:\n%s\nwant:\n%s", got, want)
	}
}
