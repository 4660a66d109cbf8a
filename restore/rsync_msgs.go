package restore

import (
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"sync"
)

// senderMessages sits between gokrazy/rsync's client and the rsync stream
// and takes the sender's error and warning messages out of the stream, as
// stock rsync's receiver takes them: it prints them and goes on, where
// gokrazy's receiver ends its run at the first one (a file the sender
// could not read, a name it could not send). What passes is the stream
// as it came, less those messages: the version and seed words before the
// multiplexing, then the data and info messages, header and payload. The
// messages are kept, in order, for the report (Messages). Like the
// stream it wraps it has one reader and one writer; Messages is safe from
// any goroutine.
type senderMessages struct {
	rw io.ReadWriteCloser
	// raw is what is left of the words the sender writes before it
	// multiplexes (protocol version and checksum seed).
	raw int
	// hdr is a data message's header still to pass (hdr[hdrOff:]), and
	// data what is left of its payload.
	hdr    [4]byte
	hdrOff int
	data   int

	mu   sync.Mutex
	msgs []string
}

// rsyncMplexBase is the offset of a multiplexed message's tag in its
// header's high byte (rsync's MPLEX_BASE).
const rsyncMplexBase = 7

// rsyncTextTags are the tags of the messages that senderMessages keeps out
// of the stream: rsync's MSG_ERROR_XFER (1), MSG_ERROR (3), MSG_WARNING
// (4), MSG_ERROR_SOCKET (5), MSG_LOG (6) and MSG_ERROR_UTF8 (8). MSG_DATA
// (0) and MSG_INFO (2), which gokrazy reads, pass, and so does any other,
// for gokrazy to refuse.
var rsyncTextTags = map[byte]bool{1: true, 3: true, 4: true, 5: true, 6: true, 8: true}

// rsyncMaxMessageBytes bounds a message's payload (gokrazy's own bound).
const rsyncMaxMessageBytes = 256 << 10

func newSenderMessages(rw io.ReadWriteCloser) *senderMessages {
	return &senderMessages{rw: rw, raw: 8, hdrOff: 4}
}

// Read passes the stream on, less the sender's error messages.
func (m *senderMessages) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		switch {
		case m.raw > 0:
			n, err := m.rw.Read(p[:min(len(p), m.raw)])
			m.raw -= n
			return n, err
		case m.hdrOff < len(m.hdr):
			n := copy(p, m.hdr[m.hdrOff:])
			m.hdrOff += n
			return n, nil
		case m.data > 0:
			n, err := m.rw.Read(p[:min(len(p), m.data)])
			m.data -= n
			return n, err
		}
		var h [4]byte
		if _, err := io.ReadFull(m.rw, h[:]); err != nil {
			return 0, err
		}
		v := binary.LittleEndian.Uint32(h[:])
		tag, n := byte(v>>24)-rsyncMplexBase, int(v&0xffffff)
		if !rsyncTextTags[tag] || n > rsyncMaxMessageBytes {
			m.hdr, m.hdrOff, m.data = h, 0, n
			continue
		}
		msg := make([]byte, n)
		if _, err := io.ReadFull(m.rw, msg); err != nil {
			return 0, err
		}
		m.mu.Lock()
		m.msgs = append(m.msgs, strings.TrimSpace(string(msg)))
		m.mu.Unlock()
	}
}

// Write passes p to the stream.
func (m *senderMessages) Write(p []byte) (int, error) { return m.rw.Write(p) }

// Close closes the stream: how gokrazy ends a run.
func (m *senderMessages) Close() error { return m.rw.Close() }

// Messages returns the sender's messages kept out of the stream so far.
func (m *senderMessages) Messages() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.msgs...)
}

// messagesSuffix is "; the rsync sender said: A; B" for msgs, or "".
func messagesSuffix(msgs []string) string {
	if len(msgs) == 0 {
		return ""
	}
	const most = 5
	s := strings.Join(msgs[:min(len(msgs), most)], "; ")
	if len(msgs) > most {
		s += fmt.Sprintf("; and %d more", len(msgs)-most)
	}
	return "; the rsync sender said: " + s
}
