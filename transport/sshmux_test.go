package transport

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testsshd"
)

// Streams through an SSHMux are sessions on at most MaxConns connections
// of SessionsPerConn sessions each, spread over them; each echoes its own
// bytes, a stream closed leaves the others on its connection working, a
// Dial beyond the bound waits for a session to end, and a second dialer
// with the same settings (another restore of the run) shares them.
func TestSSHMuxSharesBoundedConnections(t *testing.T) {
	t.Parallel()
	srv := testsshd.Start(t)
	mux := NewSSHMux(2, 3)
	defer mux.Close()
	newDialer := func() Dialer {
		d, err := NewSSHDialer(Location{Host: "testhost"}, SSHOptions{
			ConfigFile: srv.Config(t), RemotePath: echoAgent(t), Mux: mux,
		})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d1, d2 := newDialer(), newDialer()
	var streams []Stream
	for i := range 6 {
		d := d1
		if i%2 == 1 {
			d = d2
		}
		streams = append(streams, dialT(t, d))
	}
	if n := mux.Opened(); n != 2 {
		t.Fatalf("6 streams opened %d connections, want 2 (3 sessions each)", n)
	}
	// A seventh waits until a session ends.
	got := make(chan Stream, 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		s, err := d1.Dial(ctx)
		if err != nil {
			t.Errorf("the seventh Dial: %v", err)
		}
		got <- s
	}()
	checkEcho(t, streams[0], 1<<20)
	streams[0].Close()
	s7 := <-got
	if s7 == nil {
		t.FailNow()
	}
	defer s7.Close()
	for _, s := range append(streams[1:], s7) {
		checkEcho(t, s, 64<<10)
	}
	if n := mux.Opened(); n != 2 {
		t.Errorf("%d connections opened in all, want 2", n)
	}
}

// Close of a shared stream whose remote command is stopped (it never
// reads, never exits) still ends a Write blocked on the channel's window:
// the connection is closed, and a new Dial opens another.
func TestSSHMuxCloseStoppedCommand(t *testing.T) {
	t.Parallel()
	srv := testsshd.Start(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	stopper := filepath.Join(dir, "stopper")
	if err := os.WriteFile(stopper, []byte("#!/bin/sh\necho $$ > "+pidFile+"\nkill -STOP $$\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the stopped command is this test's: end it
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	mux := NewSSHMux(1, 3)
	defer mux.Close()
	d, err := NewSSHDialer(Location{Host: "testhost"}, SSHOptions{ConfigFile: srv.Config(t), RemotePath: stopper, Mux: mux})
	if err != nil {
		t.Fatal(err)
	}
	s := dialT(t, d)
	werr := make(chan error, 1)
	go func() {
		_, err := s.Write(make([]byte, 8<<20)) // beyond the 2 MiB window
		werr <- err
	}()
	for {
		if _, err := os.Stat(pidFile); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.Close()
	if err := <-werr; err == nil {
		t.Error("the blocked Write returned no error after Close")
	}
	echo, err := NewSSHDialer(Location{Host: "testhost"}, SSHOptions{ConfigFile: srv.Config(t), RemotePath: echoAgent(t), Mux: mux})
	if err != nil {
		t.Fatal(err)
	}
	checkEcho(t, dialT(t, echo), 64<<10)
	if n := mux.Opened(); n != 2 {
		t.Errorf("%d connections opened, want 2 (the stopped command's was closed)", n)
	}
}

// A parked stream is what the next Dial with the same settings and
// command gets (its remote command still running: the bytes echo on);
// a Dial that finds every session taken, one of them parked, closes the
// parked one instead of waiting; a stream of its own connection cannot
// be parked.
func TestSSHMuxParkedStreamReusedOrEvicted(t *testing.T) {
	t.Parallel()
	srv := testsshd.Start(t)
	mux := NewSSHMux(1, 2)
	defer mux.Close()
	newDialer := func(remote string, mux *SSHMux) Dialer {
		d, err := NewSSHDialer(Location{Host: "testhost"}, SSHOptions{ConfigFile: srv.Config(t), RemotePath: remote, Mux: mux})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	echo := echoAgent(t)
	d := newDialer(echo, mux)
	echoLine := func(s Stream, line string) {
		t.Helper()
		if _, err := s.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(line))
		if _, err := io.ReadFull(s, got); err != nil || string(got) != line {
			t.Fatalf("echo %q: got %q, %v", line, got, err)
		}
	}
	s1 := dialT(t, d)
	echoLine(s1, "first\n")
	if Reused(s1) || !CanPark(s1) || !Park(s1) {
		t.Fatalf("a new mux stream: reused %v, can park %v; want new, parkable", Reused(s1), CanPark(s1))
	}
	s2 := dialT(t, d)
	if !Reused(s2) {
		t.Fatal("the Dial after Park started a new command, want the parked stream")
	}
	echoLine(s2, "again\n") // the same cat
	s3 := dialT(t, d)
	defer s3.Close()
	if !Park(s2) {
		t.Fatal("Park refused a stream")
	}
	// Both sessions taken (s3, parked s2): another command's Dial closes
	// the parked one and gets its session.
	other := dialT(t, newDialer(echoAgent(t), mux))
	if Reused(other) {
		t.Error("a Dial of another command got a stream parked for another")
	}
	checkEcho(t, other, 64<<10)
	if n := mux.Opened(); n != 1 {
		t.Errorf("%d connections opened, want 1", n)
	}
	own := dialT(t, newDialer(echo, nil))
	if CanPark(own) || Park(own) {
		t.Error("a stream on a connection of its own was parked")
	}
}
