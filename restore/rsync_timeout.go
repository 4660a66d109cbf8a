package restore

import (
	"bytes"
	"sync/atomic"

	"github.com/restoresync/restoresync/transport"
)

// --timeout with the rsync method. The rsync stream times out when no byte
// moves while gokrazy's client waits on the sender, in a Read or a Write
// (transfer.RsyncStream.SetIdleTimeout). One phase of a protocol 27
// receiver moves no byte while the sender rightly waits on us: the
// generator going through entries that need no transfer (directories made,
// files already up to date, as on a rerun), during which the receiver's
// Read is pending. rsync 3 sends keepalives then, which protocol 27 does
// not have; instead, the client runs with --debug=GENR, so that gokrazy's
// generator logs each entry it goes through, and genrLog counts those
// lines as our side's progress, which keeps the timeout from firing.

// genrLogMarks are the beginnings of the lines gokrazy/rsync v0.3.6's
// generator (internal/receiver/generator.go) logs at --debug=GENR: they are
// counted and kept out of error messages.
var genrLogMarks = [][]byte{
	[]byte("recv_generator("), []byte("generateFiles "), []byte("MkdirAll("),
	[]byte("existing target: "), []byte("symlink "), []byte("requesting: "), []byte("sending sums for: "),
}

// genrLog is the rsync client's log (its stderr): lines that gokrazy's
// generator logs (generator.go, in the log's file:line prefix) count as
// entries gone through; its --debug=GENR lines are dropped and every other
// line goes to tail. gokrazy logs through a log.Logger, which writes one
// whole line per Write. Safe for concurrent use. It is an io.WriteCloser,
// as gokrazy's client asks of its stderr; Close does nothing.
type genrLog struct {
	entries atomic.Int64 // generator lines seen
	tail    *transport.TailBuffer
}

// Write counts or forwards p; it never fails.
func (g *genrLog) Write(p []byte) (int, error) {
	if i := bytes.Index(p, []byte("generator.go:")); i >= 0 {
		g.entries.Add(1)
		msg := p[i:]
		if j := bytes.Index(msg, []byte(": ")); j >= 0 {
			msg = msg[j+2:]
		}
		for _, m := range genrLogMarks {
			if bytes.HasPrefix(msg, m) {
				return len(p), nil
			}
		}
	}
	return g.tail.Write(p)
}

// Close does nothing: the log outlives the rsync run that writes to it.
func (g *genrLog) Close() error { return nil }
