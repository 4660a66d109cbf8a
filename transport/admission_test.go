package transport

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// holdHandler writes "x" and holds its session until release is closed.
func holdHandler(release <-chan struct{}) func(context.Context, ServerSession) error {
	return func(ctx context.Context, s ServerSession) error {
		if _, err := s.Stdout.Write([]byte("x")); err != nil {
			return err
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
}

// readX reads the one byte holdHandler writes.
func readX(s Stream) error {
	b := make([]byte, 1)
	if _, err := io.ReadFull(s, b); err != nil {
		return err
	}
	if b[0] != 'x' {
		return errors.New("unexpected byte")
	}
	return nil
}

// Past MaxSessions a session waits AdmissionWait, then is refused: the
// client's stream ends with an error marked ErrBusy and ErrConnect (exit
// 255) whose message names the bound; once a slot is free, a session runs.
func TestListenMaxSessionsRefusesBeyondBound(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	ts := startListenWith(t, holdHandler(release), func(c *ListenConfig) {
		c.MaxSessions, c.AdmissionWait = 1, 50*time.Millisecond
	})
	d := ts.dialer(t, "alice", ts.identity, SSHOptions{})
	first := dialT(t, d)
	if err := readX(first); err != nil {
		t.Fatalf("first session: %v", err)
	}
	err := readX(dialT(t, d))
	if !errors.Is(err, ErrBusy) || !errors.Is(err, ErrConnect) || errors.Is(err, ErrRemoteRefused) ||
		!strings.Contains(err.Error(), "the server is busy") || !strings.Contains(err.Error(), "--max-sessions 1") {
		t.Fatalf("second session: %v; want ErrBusy and ErrConnect, saying the server is busy at --max-sessions 1", err)
	}
	close(release)
	first.CloseWrite()
	io.Copy(io.Discard, first)
	if err := readX(dialT(t, d)); err != nil {
		t.Errorf("a session once the first ended: %v", err)
	}
}

// A session past MaxSessions that finds a slot within AdmissionWait runs.
func TestListenMaxSessionsWaitsForSlot(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	ts := startListenWith(t, holdHandler(release), func(c *ListenConfig) {
		c.MaxSessions, c.AdmissionWait = 1, time.Minute
	})
	d := ts.dialer(t, "alice", ts.identity, SSHOptions{})
	first := dialT(t, d)
	if err := readX(first); err != nil {
		t.Fatalf("first session: %v", err)
	}
	second := dialT(t, d)
	done := make(chan error, 1)
	go func() { done <- readX(second) }()
	select {
	case err := <-done:
		t.Fatalf("second session ran beside the first (%v), past --max-sessions 1", err)
	default:
	}
	close(release) // the first session ends: its slot goes to the second
	if err := <-done; err != nil {
		t.Errorf("second session, once a slot was free: %v", err)
	}
}

// Past MaxStartups a connection waits AdmissionWait, then is disconnected
// with SSH_DISCONNECT_TOO_MANY_CONNECTIONS and a message naming the bound,
// which the client reports as ErrBusy and ErrConnect.
func TestListenMaxStartupsRefusesBeyondBound(t *testing.T) {
	t.Parallel()
	ts := startListenWith(t, echoHandler, func(c *ListenConfig) {
		c.MaxStartups, c.AdmissionWait = 1, 50*time.Millisecond
	})
	// A client that never sends its version holds the one startup slot
	// once the server has sent its own version line.
	idle, err := net.Dial("tcp", ts.addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if line, err := bufio.NewReader(idle).ReadString('\n'); err != nil || !strings.HasPrefix(line, "SSH-2.0-") {
		t.Fatalf("server version line: %q, %v", line, err)
	}
	d := ts.dialer(t, "alice", ts.identity, SSHOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := d.Dial(ctx)
	if err == nil {
		s.Close()
	}
	if !errors.Is(err, ErrBusy) || !errors.Is(err, ErrConnect) || !strings.Contains(err.Error(), "--max-startups 1") {
		t.Fatalf("dial past --max-startups 1: %v; want ErrBusy and ErrConnect naming the bound", err)
	}
	idle.Close()
	checkEcho(t, dialT(t, d), 1<<10)
}
