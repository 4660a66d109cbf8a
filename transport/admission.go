package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// Admission control of serve --listen, in the spirit of OpenSSH's
// MaxStartups and MaxSessions: ListenConfig.MaxStartups bounds the
// connections in their SSH handshake at once, ListenConfig.MaxSessions the
// sessions being served at once. Beyond a bound a connection or session
// waits for a slot, at most ListenConfig.AdmissionWait, then is refused
// with a message that says so, which the client reports as ErrBusy (exit
// 255, as ssh for an sshd past its MaxStartups). Memory the sessions used
// is returned to the system once the server has been idle for
// idleFreeAfter.

// ErrBusy marks, with ErrConnect, a client that the server refused because
// it was at its bound of connections starting up or of sessions (serve
// --listen's --max-startups, --max-sessions): a later rerun may succeed.
var ErrBusy = errors.New("the server is busy")

// ExitBusy is the exit status of a session refused because the server is
// at its MaxSessions: EX_TEMPFAIL of sysexits.h, a temporary failure.
const ExitBusy = 75

// defaultAdmissionWait is ListenConfig.AdmissionWait's zero value: under
// a client's default connection setup timeout (30 s), so that the client
// hears why it was refused rather than timing out.
const defaultAdmissionWait = 20 * time.Second

// idleFreeAfter is how long the server has served no session before it
// returns freed memory to the system (debug.FreeOSMemory): the Go runtime
// keeps the heap a burst of sessions grew for minutes otherwise.
const idleFreeAfter = 5 * time.Second

// sshDisconnectTooManyConnections is RFC 4253's
// SSH_DISCONNECT_TOO_MANY_CONNECTIONS reason code.
const sshDisconnectTooManyConnections = 12

// slots is a counting semaphore; a nil *slots admits everyone.
type slots chan struct{}

func newSlots(n int) slots {
	if n <= 0 {
		return nil
	}
	return make(slots, n)
}

// acquire takes a slot, waiting at most wait; it reports whether it got
// one. ctx's end gives up too.
func (s slots) acquire(ctx context.Context, wait time.Duration) bool {
	if s == nil {
		return true
	}
	select {
	case s <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case s <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// release gives back a slot that acquire took.
func (s slots) release() {
	if s != nil {
		<-s
	}
}

// refuseStartup answers conn, past the MaxStartups bound, as an SSH server
// that refuses it: its version line, then an unencrypted
// SSH_MSG_DISCONNECT with reason SSH_DISCONNECT_TOO_MANY_CONNECTIONS and
// msg, which clients show (x/crypto/ssh: "ssh: disconnect, reason 12:
// ..."; OpenSSH: "Received disconnect from ...").
func refuseStartup(conn net.Conn, msg string) {
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	payload := []byte{1} // SSH_MSG_DISCONNECT
	payload = binary.BigEndian.AppendUint32(payload, sshDisconnectTooManyConnections)
	payload = binary.BigEndian.AppendUint32(payload, uint32(len(msg)))
	payload = append(payload, msg...)
	payload = binary.BigEndian.AppendUint32(payload, 0) // language tag
	// RFC 4253 §6: length, padding length, payload, 4 to 255 bytes of
	// padding making the whole a multiple of 8.
	pad := 8 - (5+len(payload))%8
	if pad < 4 {
		pad += 8
	}
	pkt := binary.BigEndian.AppendUint32([]byte(serverVersion+"\r\n"), uint32(1+len(payload)+pad))
	pkt = append(pkt, byte(pad))
	pkt = append(pkt, payload...)
	pkt = append(pkt, make([]byte, pad)...)
	if _, err := conn.Write(pkt); err != nil {
		return
	}
	// Closed now, the socket would answer what the client sends meanwhile
	// (its version and key exchange) with a reset, and the client, whose
	// write then fails, could close before it reads the disconnect: the
	// server ends its side and reads until the client closes its own.
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(conn, 64<<10))
}

// isBusyDisconnect reports whether err, from an SSH handshake, is a
// server's disconnect with reason SSH_DISCONNECT_TOO_MANY_CONNECTIONS.
// x/crypto/ssh does not export its disconnect message type, so this reads
// the reason from its fixed wording.
func isBusyDisconnect(err error) bool {
	return err != nil && strings.Contains(err.Error(), fmt.Sprintf("ssh: disconnect, reason %d:", sshDisconnectTooManyConnections))
}

// idleFreer returns memory to the system once no session has run for
// idleFreeAfter: begin and end bracket each session. Safe for concurrent
// use.
type idleFreer struct {
	mu     sync.Mutex
	active int
	timer  *time.Timer
}

func (f *idleFreer) begin() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.active++
	if f.timer != nil {
		f.timer.Stop()
	}
}

func (f *idleFreer) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.active--; f.active > 0 {
		return
	}
	if f.timer == nil {
		f.timer = time.AfterFunc(idleFreeAfter, f.free)
	} else {
		f.timer.Reset(idleFreeAfter)
	}
}

// free returns freed memory to the system if the server is still idle:
// a first collection moves the buffers pooled in sync.Pools to their
// victim caches, the one debug.FreeOSMemory runs frees them, and it
// returns the free pages.
func (f *idleFreer) free() {
	f.mu.Lock()
	idle := f.active == 0
	f.mu.Unlock()
	if idle {
		runtime.GC()
		debug.FreeOSMemory()
	}
}
