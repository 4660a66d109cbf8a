package restore_test

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
)

// runWithin runs a restore and fails t if it does not end within limit
// (the run is then cancelled, and given as long again to end).
func runWithin(t *testing.T, ctx context.Context, o restore.Options, limit time.Duration) (error, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := restore.Run(ctx, o)
		done <- err
	}()
	select {
	case err := <-done:
		return err, time.Since(start)
	case <-time.After(limit):
	}
	cancel()
	select {
	case err := <-done:
		t.Errorf("the restore did not end within %v; it did once cancelled (%v)", limit, err)
		return err, time.Since(start)
	case <-time.After(limit):
		t.Fatalf("the restore did not end within %v, nor %v after it was cancelled", limit, limit)
	}
	return nil, 0
}

// freeze stops every stream of a freezeDialer at once, as SIGSTOP stops
// the remote agents: once the client has read at bytes over all its
// streams, nothing more is read or written on any of them, EOF included,
// until the client closes the stream. With lose, the stream whose read
// crosses at fails instead (its connection is lost); the others freeze.
type freeze struct {
	at   int64
	lose bool

	mu     sync.Mutex
	read   int64
	frozen bool
	lost   bool
}

// admit books n bytes read by a stream and says what the stream must do.
func (f *freeze) admit(n int) (stop, lostHere bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		return true, false
	}
	f.read += int64(n)
	if f.read >= f.at {
		f.frozen = true
		if f.lose && !f.lost {
			f.lost = true
			return true, true
		}
		return true, false
	}
	return false, false
}

func (f *freeze) isFrozen() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frozen
}

type freezeDialer struct {
	transport.Dialer
	f *freeze
}

func (d freezeDialer) Dial(ctx context.Context) (transport.Stream, error) {
	s, err := d.Dialer.Dial(ctx)
	if err != nil {
		return nil, err
	}
	return &freezeStream{Stream: s, f: d.f, closed: make(chan struct{})}, nil
}

type freezeStream struct {
	transport.Stream
	f         *freeze
	closed    chan struct{}
	closeOnce sync.Once
	lost      bool // reader goroutine only
}

var errFrozenClosed = errors.New("test: frozen stream closed")

func (s *freezeStream) Read(p []byte) (int, error) {
	if s.lost {
		return 0, errDropped
	}
	if s.f.isFrozen() {
		<-s.closed
		return 0, errFrozenClosed
	}
	n, err := s.Stream.Read(p)
	stop, lost := s.f.admit(n)
	switch {
	case lost:
		s.lost = true
		go s.Stream.Close()
		return 0, errDropped
	case stop:
		<-s.closed // the bytes that came are never delivered
		return 0, errFrozenClosed
	}
	return n, err
}

func (s *freezeStream) Write(p []byte) (int, error) {
	if s.f.isFrozen() {
		<-s.closed
		return 0, errFrozenClosed
	}
	return s.Stream.Write(p)
}

func (s *freezeStream) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return s.Stream.Close()
}

// A run with -j 4 and --timeout whose agents stop mid-transfer:
// one stream carries the data, the others came up and have no work left
// when every agent stops reading and writing. The busy stream times out;
// closing the idle ones must not wait for a goodbye their stopped agents
// never send. The run fails with the timeout, promptly, and leaves only
// complete files; the rerun completes.
func TestStallIdleStreamsTimeout(t *testing.T) {
	src := filepath.Join(t.TempDir(), "alice")
	TestDir{"big.bin": TestFile{Size: 8 << 20}, "small.txt": TestFile{Content: "hello\n"}}.build(t, src)
	dst := filepath.Join(t.TempDir(), "alice")
	o := options("pull", src, dst)
	o.Dialer = freezeDialer{o.Dialer, &freeze{at: 2 << 20}}
	o.Jobs = 4
	o.Compression = transfer.Compression{}
	o.Writer.BlockSizeBytes = 64 << 20 // one batch: one busy stream
	o.BwLimitBytes = 2 << 20           // the idle streams are up long before the stall
	o.IdleTimeout = time.Second
	err, took := runWithin(t, context.Background(), o, 30*time.Second)
	if !errors.Is(err, transport.ErrTimeout) || !strings.Contains(err.Error(), "timeout in data send/receive") {
		t.Fatalf("after %v: error %v; want the idle timeout", took, err)
	}
	t.Logf("timed out after %v: %v", took.Round(time.Millisecond), err)
	assertPlacedComplete(t, src, dst)
	assertNoTempFiles(t, dst)
	o = options("pull", src, dst)
	run(t, o)
	assertSameTreeQuick(t, src, dst)
}

// One stream is lost while the others wait on agents that stopped, and no
// --timeout is set: the lost stream's error ends the run at once (the
// other streams are torn down, not waited for), and it is the error
// reported.
func TestStallStreamLostOthersStalled(t *testing.T) {
	src := filepath.Join(t.TempDir(), "alice")
	faultTree(t, src)
	dst := filepath.Join(t.TempDir(), "alice")
	o := options("pull", src, dst)
	o.Dialer = freezeDialer{o.Dialer, &freeze{at: 1 << 20, lose: true}}
	o.Jobs = 4
	o.Compression = transfer.Compression{}
	o.Writer.BlockSizeBytes = 256 << 10 // many batches: every stream busy
	err, took := runWithin(t, context.Background(), o, 30*time.Second)
	if !errors.Is(err, transport.ErrConnect) {
		t.Fatalf("after %v: error %v; want the lost connection's", took, err)
	}
	assertPlacedComplete(t, src, dst)
	assertNoTempFiles(t, dst)
}

// silentDialer's streams reach a remote that never answers: the agent
// started but hangs (exec sleep), or an -e command stuck connecting.
// Reads block until Close; writes are taken.
type silentDialer struct{}

func (silentDialer) Dial(ctx context.Context) (transport.Stream, error) {
	return &silentStream{closed: make(chan struct{})}, nil
}

type silentStream struct {
	closed chan struct{}
	once   sync.Once
}

func (s *silentStream) Read([]byte) (int, error)    { <-s.closed; return 0, io.ErrClosedPipe }
func (s *silentStream) Write(p []byte) (int, error) { return len(p), nil }
func (s *silentStream) CloseWrite() error           { return nil }
func (s *silentStream) Close() error                { s.once.Do(func() { close(s.closed) }); return nil }
func (s *silentStream) Stderr() string              { return "" }

// An agent that never answers the handshake: --contimeout bounds the
// connection setup (exit 255, ErrConnect), --timeout bounds it too when
// shorter (exit 30, ErrTimeout), and cancelling ends it at once. Before,
// the handshake had no deadline at all.
func TestStallHandshakeNeverAnswered(t *testing.T) {
	for _, tc := range []struct {
		name          string
		connect, idle time.Duration
		cancelAfter   time.Duration
		want          error
		msg           string
	}{
		{"contimeout", time.Second, 0, 0, transport.ErrConnect, "--contimeout 1s"},
		{"timeout", time.Minute, time.Second, 0, transport.ErrTimeout, "--timeout 1s"},
		{"cancel", time.Minute, 0, 300 * time.Millisecond, context.Canceled, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dst := filepath.Join(t.TempDir(), "alice")
			o := restore.Options{Src: "backup:/srv/alice", Dst: dst, Dialer: silentDialer{}, Jobs: 2}
			o.SSH.Timeout, o.IdleTimeout = tc.connect, tc.idle
			ctx := context.Background()
			if tc.cancelAfter > 0 {
				c, cancel := context.WithCancel(ctx)
				time.AfterFunc(tc.cancelAfter, cancel)
				ctx = c
			}
			err, took := runWithin(t, ctx, o, 20*time.Second)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("after %v: error %v; want %v mentioning %q", took, err, tc.want, tc.msg)
			}
			if tc.want != context.DeadlineExceeded && errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %v wraps context.DeadlineExceeded (exit 30 whatever the cause)", err)
			}
			if errors.Is(err, transfer.ErrProtocol) {
				t.Errorf("error %v is called a protocol error", err)
			}
			t.Logf("after %v: %v", took.Round(time.Millisecond), err)
		})
	}
}
