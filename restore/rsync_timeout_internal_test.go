package restore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gokrazy/rsync/rsyncclient"

	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
)

// gokrazy's generator, run with --debug=GENR as the rsync method runs it
// under --timeout, logs a line per entry it goes through, files already up
// to date included: genrLog counts them (the idle timeout's view of our
// own side's progress) and keeps them out of the log tail that error
// messages quote. If a gokrazy/rsync upgrade changes these lines, this
// fails rather than the timeout firing on a rerun of a large tree.
func TestGenrLogCountsGeneratorEntries(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	const files = 40
	for i := range files {
		p := filepath.Join(src, "d"+string(rune('a'+i%4)), "f"+string(rune('a'+i))+".txt")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.Repeat("x", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dst := filepath.Join(t.TempDir(), "dst")
	d := transfer.PipeDialer{Config: transfer.ServerConfig{Root: filepath.Dir(src), ReadOnly: true}}
	for run := range 2 { // the second finds every file up to date
		rs, err := transfer.DialRsyncSender(t.Context(), d, transfer.Hello{Path: "src", RsyncArgs: rsyncArgs}, transfer.Timeouts{})
		if err != nil {
			t.Fatal(err)
		}
		tail := new(transport.TailBuffer)
		log := &genrLog{tail: tail}
		client, err := rsyncclient.New(append(append([]string(nil), rsyncArgs...), "--debug=GENR"), rsyncclient.DontRestrict(), rsyncclient.WithStderr(log))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Run(t.Context(), rs, []string{dst}); err != nil {
			t.Fatalf("run %d: %v (log %q)", run, err, tail.String())
		}
		rs.Close()
		// 40 files, 4 directories and ".": at least one line each.
		if n := log.entries.Load(); n < files+5 {
			t.Errorf("run %d: %d generator lines counted; want one per entry, at least %d", run, n, files+5)
		}
		if s := tail.String(); strings.Contains(s, "recv_generator") || strings.Contains(s, "generateFiles") {
			t.Errorf("run %d: debug lines reached the log tail: %q", run, s)
		}
	}
}
