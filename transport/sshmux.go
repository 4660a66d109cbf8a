package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// DefaultSessionsPerConn is how many streams SSHMux puts on one SSH
// connection by default: OpenSSH's MaxSessions default.
const DefaultSessionsPerConn = 10

// SSHMux shares SSH connections among the streams of the built-in client
// (SSHOptions.Mux), as OpenSSH's ControlMaster does: each stream is a
// session on one of at most MaxConns connections per set of connection
// settings (the same user, host, port, host key name, keys and known_hosts
// files), each carrying at most SessionsPerConn sessions. A Dial takes a
// session on the least busy connection, opens a new connection while there
// are fewer than MaxConns (so that the streams spread over them), and
// otherwise waits for a session to end. Connection setup (TCP, key
// exchange, authentication: a few hundred milliseconds on a busy sshd) is
// then paid once per connection, not once per stream: many restores of
// one run (restore --accounts) share it.
//
// A session that the server refuses (a MaxSessions below SessionsPerConn)
// caps that connection at the sessions it has; a connection that ends (a
// lost link) is dropped and its streams fail as a lost connection does.
// Closing a stream ends its session only; Close ends every connection.
// A stream whose agent awaits another handshake can be parked (Park): a
// later Dial with the same settings and command takes it instead of
// starting the command again; a Dial that would wait for a session closes
// a parked one first, so parked streams never hold a Dial up. Safe for
// concurrent use.
type SSHMux struct {
	maxConns, perConn int

	mu      sync.Mutex
	conns   map[string][]*muxConn
	dialing map[string]int // connections being opened, per key
	changed chan struct{}  // closed and replaced whenever a slot may have freed
	closed  bool
	// parked are the parked streams by key and command, oldest first;
	// nParked counts them.
	parked  map[string][]*sshStream
	nParked int
	opened  atomic.Int64
}

// muxConn is one shared connection.
type muxConn struct {
	client   *ssh.Client
	sessions int  // open sessions (guarded by SSHMux.mu)
	cap      int  // sessions it takes: perConn, less when the server refused one
	dead     bool // the connection ended
}

// NewSSHMux returns a mux of at most maxConns connections per host (less
// than 1: 1), each with at most sessionsPerConn sessions (less than 1:
// DefaultSessionsPerConn).
func NewSSHMux(maxConns, sessionsPerConn int) *SSHMux {
	if sessionsPerConn < 1 {
		sessionsPerConn = DefaultSessionsPerConn
	}
	return &SSHMux{maxConns: max(maxConns, 1), perConn: sessionsPerConn,
		conns: map[string][]*muxConn{}, dialing: map[string]int{}, changed: make(chan struct{}),
		parked: map[string][]*sshStream{}}
}

// maxParked is how many parked streams m keeps: half its sessions, so
// that as many remain for streams in use.
func (m *SSHMux) maxParked() int { return max(m.maxConns*m.perConn/2, 1) }

// park keeps s, a stream on one of m's connections, for a later Dial of
// its key and command; false when m is closed, s's connection is gone, or
// m keeps as many as it may.
func (m *SSHMux) park(s *sshStream) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || s.shared.c.dead || m.nParked >= m.maxParked() {
		return false
	}
	k := s.shared.key + "\x02" + s.command
	m.parked[k] = append(m.parked[k], s)
	m.nParked++
	return true
}

// unparkLocked takes the newest parked stream of key k, or nil. Called
// with mu held.
func (m *SSHMux) unparkLocked(k string) *sshStream {
	for ss := m.parked[k]; len(ss) > 0; ss = m.parked[k] {
		s := ss[len(ss)-1]
		m.parked[k] = ss[:len(ss)-1]
		m.nParked--
		if !s.shared.c.dead {
			return s
		}
		go s.Close() // its connection ended while it was parked
	}
	delete(m.parked, k)
	return nil
}

// evictLocked takes the oldest parked stream of any key, or nil. Called
// with mu held.
func (m *SSHMux) evictLocked() *sshStream {
	for k, ss := range m.parked {
		if len(ss) == 0 {
			continue
		}
		s := ss[0]
		m.parked[k] = ss[1:]
		m.nParked--
		return s
	}
	return nil
}

// Opened returns how many SSH connections the mux has opened so far.
func (m *SSHMux) Opened() int { return int(m.opened.Load()) }

// Close closes every connection; the streams on them fail. Dials after
// Close fail.
func (m *SSHMux) Close() error {
	m.mu.Lock()
	m.closed = true
	for _, ss := range m.parked {
		for _, s := range ss {
			s.session.Close()
		}
	}
	m.parked, m.nParked = map[string][]*sshStream{}, 0
	var all []*muxConn
	for _, cs := range m.conns {
		all = append(all, cs...)
	}
	m.conns = map[string][]*muxConn{}
	m.notify()
	m.mu.Unlock()
	for _, c := range all {
		c.client.Close()
	}
	return nil
}

// notify wakes the Dials waiting for a slot. Called with mu held.
func (m *SSHMux) notify() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// key names the connection settings of d: streams share a connection
// only when each of them could have opened it.
func (m *SSHMux) key(d *sshDialer) string {
	return strings.Join([]string{d.display, d.hostKeyAddr, strings.Join(d.keyFiles, "\x00"),
		strings.Join(d.knownFiles, "\x00"), d.agentSock}, "\x01")
}

// dial opens a stream running d's command as a session on a shared
// connection, opening one if there are fewer than maxConns; it waits for a
// free session otherwise. ctx bounds the wait and the setup, as Dial's.
func (m *SSHMux) dial(ctx context.Context, d *sshDialer) (Stream, error) {
	key := m.key(d)
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, fmt.Errorf("%w: %s: connections closed", ErrConnect, d.display)
		}
		if s := m.unparkLocked(key + "\x02" + d.command); s != nil {
			m.mu.Unlock()
			s.reused = true
			return s, nil
		}
		var best *muxConn
		for _, c := range m.conns[key] {
			if !c.dead && c.sessions < c.cap && (best == nil || c.sessions < best.sessions) {
				best = c
			}
		}
		total := len(m.conns[key]) + m.dialing[key]
		if total < m.maxConns && (best == nil || best.sessions > 0) {
			m.dialing[key]++
			m.mu.Unlock()
			s, err := d.dialNew(ctx)
			m.mu.Lock()
			m.dialing[key]--
			if err != nil {
				m.notify()
				m.mu.Unlock()
				return nil, err
			}
			m.opened.Add(1)
			c := &muxConn{client: s.client, sessions: 1, cap: m.perConn}
			if m.closed {
				m.mu.Unlock()
				s.Close()
				return nil, fmt.Errorf("%w: %s: connections closed", ErrConnect, d.display)
			}
			m.conns[key] = append(m.conns[key], c)
			m.notify() // its other sessions are free
			m.mu.Unlock()
			go m.watch(key, c)
			s.shared = &muxSession{m: m, c: c, key: key}
			// The connection's keepalives, whichever of its streams are
			// open: they end with it.
			d.keepaliveStart(&sshStream{display: d.display, client: c.client, done: make(chan struct{})})
			return s, nil
		}
		if best != nil {
			best.sessions++
			m.mu.Unlock()
			s, err := d.start(best.client, false)
			if err != nil {
				m.mu.Lock()
				best.sessions--
				var oce *ssh.OpenChannelError
				if errors.As(err, &oce) && oce.Reason == ssh.Prohibited && best.sessions > 0 {
					best.cap = best.sessions // the server's MaxSessions: retry elsewhere
					m.notify()
					m.mu.Unlock()
					continue
				}
				if errors.Is(err, io.EOF) {
					// The connection ended as the session was asked
					// for (its watch has not dropped it yet): another
					// connection, or a new one, can carry the stream.
					m.dropLocked(key, best)
					m.mu.Unlock()
					continue
				}
				m.notify()
				m.mu.Unlock()
				return nil, err
			}
			s.shared = &muxSession{m: m, c: best, key: key}
			return s, nil
		}
		wait := m.changed
		evict := m.evictLocked()
		m.mu.Unlock()
		if evict != nil {
			evict.Close() // its session's end frees a slot
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, fmt.Errorf("ssh %s: waiting for a shared connection: %w", d.display, ctx.Err())
		}
	}
}

// watch drops c once its connection ends.
func (m *SSHMux) watch(key string, c *muxConn) {
	c.client.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropLocked(key, c)
}

// dropLocked marks c dead and takes it out of the mux, so that no Dial
// puts a session on it any more. Called with mu held; dropping c twice is
// harmless.
func (m *SSHMux) dropLocked(key string, c *muxConn) {
	c.dead = true
	cs := m.conns[key]
	for i, x := range cs {
		if x == c {
			m.conns[key] = append(cs[:i:i], cs[i+1:]...)
			break
		}
	}
	m.notify()
}

// end closes the session of s, a stream on a shared connection, and
// gives its slot back once sshd has closed it too: sshd does when the
// remote command's output ends, so a command that no longer runs (it
// exited, or the close killed it) frees it at once. One that is stopped
// (SIGSTOP) would hold the session, and a Write of s waiting for window
// space, for good: after remoteExitWait the whole connection is closed,
// and the other streams on it fail as on a lost connection.
func (s *sshStream) endShared() {
	s.session.Close()
	go func() {
		done := make(chan struct{})
		go func() {
			s.waitOnce.Do(func() { s.waitErr = s.session.Wait() })
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(remoteExitWait):
			s.shared.condemn() // before the close: no Dial may pick it after
			s.client.Close()
		}
		s.shared.release()
	}()
}

// muxSession is a stream's hold on a shared connection.
type muxSession struct {
	m    *SSHMux
	c    *muxConn
	key  string
	once sync.Once
}

// condemn takes the session's connection out of the mux before it is
// closed.
func (s *muxSession) condemn() {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	for key, cs := range s.m.conns {
		for _, c := range cs {
			if c == s.c {
				s.m.dropLocked(key, c)
				return
			}
		}
	}
	s.c.dead = true
}

// release gives the session's slot back.
func (s *muxSession) release() {
	s.once.Do(func() {
		s.m.mu.Lock()
		s.c.sessions--
		s.m.notify()
		s.m.mu.Unlock()
	})
}

// canPark implements parker: s is on a mux connection, open, and the mux
// is open.
func (s *sshStream) canPark() bool {
	if s.shared == nil || s.closed.Load() || s.readErr != nil {
		return false
	}
	s.shared.m.mu.Lock()
	defer s.shared.m.mu.Unlock()
	return !s.shared.m.closed && !s.shared.c.dead
}

// park implements parker.
func (s *sshStream) park() bool {
	if !s.canPark() {
		return false
	}
	return s.shared.m.park(s)
}
