package transfer

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// ServerAliveInterval and ServerAliveCountMax from ssh_config set the
// built-in client's keepalives; unset, the defaults hold.
func TestSSHConfigServerAlive(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	conf := "Host alive\n  ServerAliveInterval 2\n  ServerAliveCountMax 5\nHost off\n  ServerAliveInterval 0\nHost bad\n  ServerAliveInterval soon\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	kh := filepath.Join(dir, "known_hosts")
	os.WriteFile(kh, nil, 0o600)
	for _, tc := range []struct {
		host      string
		interval  time.Duration
		countMax  int
		wantError bool
	}{
		{"alive", 2 * time.Second, 5, false},
		{"off", -1, keepaliveMaxMissed, false},
		{"other", defaultKeepalive, keepaliveMaxMissed, false},
		{"bad", 0, 0, true},
	} {
		d, err := NewSSHDialer(Location{Host: tc.host, Path: "/x"}, SSHOptions{ConfigFile: cfg, KnownHosts: []string{kh}})
		if tc.wantError {
			if err == nil {
				t.Errorf("%s: no error for a bad ServerAliveInterval", tc.host)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.host, err)
		}
		sd := d.(*sshDialer)
		if sd.keepalive != tc.interval || sd.keepaliveMax != tc.countMax {
			t.Errorf("%s: keepalive every %v, %d missed; want %v, %d", tc.host, sd.keepalive, sd.keepaliveMax, tc.interval, tc.countMax)
		}
	}
}

// silentStream is a Stream whose peer never answers: reads block until
// Close, writes are swallowed.
type silentStream struct{ closed chan struct{} }

func (s *silentStream) Read([]byte) (int, error)    { <-s.closed; return 0, errors.New("closed") }
func (s *silentStream) Write(p []byte) (int, error) { return len(p), nil }
func (s *silentStream) CloseWrite() error           { return nil }
func (s *silentStream) Close() error {
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	return nil
}
func (s *silentStream) Stderr() string { return "" }

// A stream with a request outstanding and no byte moving fails with
// ErrTimeout after the idle timeout; with nothing outstanding it may stay
// idle as long as it likes; agent-less streams (IdleTimeoutStream) time
// out on any silence.
func TestIdleTimeout(t *testing.T) {
	const d = 200 * time.Millisecond
	s := &silentStream{closed: make(chan struct{})}
	fw, _ := newFrameWriter(s, Compression{})
	c := &Conn{s: s, enc: encoder{fw: fw}, dec: decoder{fr: newFrameReader(bufio.NewReader(s))}}
	c.SetIdleTimeout(d)
	time.Sleep(3 * d) // idle, nothing asked: no timeout
	if err := c.idle.Err(); err != nil {
		t.Fatalf("timed out with no request outstanding: %v", err)
	}
	start := time.Now()
	_, err := c.List(context.Background())
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("List from a silent peer: %v; want ErrTimeout", err)
	}
	if took := time.Since(start); took < d || took > 20*d {
		t.Errorf("timed out after %v; the timeout is %v", took, d)
	}

	s2 := &silentStream{closed: make(chan struct{})}
	is := IdleTimeoutStream(s2, d)
	if _, err := is.Read(make([]byte, 1)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("read from a silent agent-less stream: %v; want ErrTimeout", err)
	}
	is.Close()
}

// An rsync stream's idle timeout (RsyncStream.SetIdleTimeout) counts only
// time in which a Read or Write waits on the peer: silence with no call in
// progress (our own disk work between calls) never fires it, a Read from a
// silent peer does, and while local progress is reported (rsync's generator
// going through files) a pending Read does not time out.
func TestRsyncStreamIdleTimeout(t *testing.T) {
	const d = 200 * time.Millisecond
	s := &silentStream{closed: make(chan struct{})}
	rs := NewRsyncStream(s)
	var local atomic.Int64
	rs.SetIdleTimeout(d, local.Load)
	defer rs.Close()
	time.Sleep(3 * d) // no call in progress: no timeout
	if err := rs.TimedOut(); err != nil {
		t.Fatalf("timed out with no call in progress: %v", err)
	}
	stopBusy := make(chan struct{})
	go func() { // our side makes progress for 4 d, then stops
		tick := time.NewTicker(d / 8)
		defer tick.Stop()
		end := time.After(4 * d)
		for {
			select {
			case <-tick.C:
				local.Add(1)
			case <-end:
				close(stopBusy)
				return
			}
		}
	}()
	start := time.Now()
	_, err := rs.Read(make([]byte, 1))
	took := time.Since(start)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("read from a silent peer: %v; want ErrTimeout", err)
	}
	<-stopBusy
	if took < 4*d || took > 40*d {
		t.Errorf("timed out after %v; local progress lasted %v, the timeout is %v", took, 4*d, d)
	}
	if rs.TimedOut() == nil {
		t.Error("TimedOut() is nil after the timeout")
	}
}
