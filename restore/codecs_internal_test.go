package restore

import "testing"

// The summary names the codecs that carried something: the first frames of
// a --compress auto run (the file list's, before any file data) carry no
// file and a few bytes, and would read "zstd:1 0.0 MB -> 0.0 MB"; the JSON
// report keeps them.
func TestCodecsSummarySkipsEmptyCodecs(t *testing.T) {
	rep := Report{LinkMiBPerSec: 2, Codecs: []CodecReport{
		{Codec: "zstd:1", Files: 0, Bytes: 3000, WireBytes: 900, Ratio: 3.3, MiBPerSec: 40},
		{Codec: "zstd:3", Files: 12, Bytes: 12e6, WireBytes: 3.9e6, Ratio: 3.1, MiBPerSec: 140},
		{Codec: "none", Files: 3, Bytes: 40e6, WireBytes: 40e6, Ratio: 1},
	}}
	want := "zstd:3 12.0 MB -> 3.9 MB (3.1x, 140 MiB/s), none 40.0 MB; link 2 MiB/s"
	if got := rep.codecsSummary(); got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	// Frames without a file that carried a measurable amount still show.
	rep.Codecs[0].Bytes, rep.Codecs[0].WireBytes = 2e6, 0.6e6
	if got := rep.codecsSummary(); got != "zstd:1 2.0 MB -> 0.6 MB (3.3x, 40 MiB/s), "+want {
		t.Errorf("summary %q", got)
	}
	rep.Codecs = rep.Codecs[:1]
	rep.Codecs[0].Bytes = 100
	if got := rep.codecsSummary(); got != "" {
		t.Errorf("summary %q, want none", got)
	}
}
