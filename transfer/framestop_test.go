package transfer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"
)

// frameReaders counts the goroutines running frameReader.run.
func frameReaders() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "(*frameReader).run(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// waitFrameReaders waits up to 5 s for at most want frameReader goroutines.
func waitFrameReaders(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for frameReaders() > want {
		if time.Now().After(deadline) {
			t.Fatalf("%d frameReader goroutines still run, want at most %d: one outlived its consumer", frameReaders(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// manyFrames returns more frames than a frameReader queues, so that its
// goroutine blocks on handing one over if nobody reads.
func manyFrames(t *testing.T) []byte {
	var wire []byte
	for range 3 * frameQueue {
		wire = append(wire, validFrame(t, CodecNone, bytes.Repeat([]byte("x"), 1000))...)
	}
	return wire
}

// TestFrameReaderStopsWithConsumer checks that a frameReader whose consumer
// stops reading, and closes it, does not leave its goroutine blocked on the
// frame it is handing over.
func TestFrameReaderStopsWithConsumer(t *testing.T) {
	fr := newFrameReader(bufio.NewReader(bytes.NewReader(manyFrames(t))))
	if _, err := fr.ReadByte(); err != nil {
		t.Fatal(err)
	}
	fr.Close()
	select {
	case <-fr.exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the frame reader's goroutine still runs after Close")
	}
	fr.Close() // idempotent
}

// TestConnAbortStopsFrameReader checks that aborting a Conn whose peer sent
// more frames than were read also ends the Conn's frame reader goroutine.
func TestConnAbortStopsFrameReader(t *testing.T) {
	before := frameReaders()
	frames := manyFrames(t)
	s := fakePeer(t, "", func(in *bufio.Reader, out io.Writer) {
		var h Hello
		if readHandshake(in, &h) == nil {
			writeHandshake(out, helloReply{Proto: ProtocolVersion, Version: "test", Codecs: CodecNames()})
			out.Write(frames)
		}
	})
	c, err := Handshake(testContext(t), s, Hello{Role: RoleSender, Path: "/srv", Compression: "none"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the reader fills its queue and waits
	c.Abort()
	waitFrameReaders(t, before)
}

// TestConnCallHonoursContext checks that a Conn call blocked on a peer that
// never answers returns when its context ends, with the context's error,
// and leaves no frame reader behind.
func TestConnCallHonoursContext(t *testing.T) {
	before := frameReaders()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	t.Cleanup(func() { sw.Close(); sr.Close() })
	go func() { // answers the handshake, then reads and never replies
		in := bufio.NewReader(sr)
		var h Hello
		if readHandshake(in, &h) == nil {
			writeHandshake(sw, helloReply{Proto: ProtocolVersion, Version: "test", Codecs: CodecNames()})
		}
		io.Copy(io.Discard, in)
	}()
	c, err := Handshake(testContext(t), &testStream{r: cr, w: cw}, Hello{Role: RoleSender, Path: "/srv", Compression: "none"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.List(ctx)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("List with an expired context: %v, want context.DeadlineExceeded", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("List still blocks on a silent peer after its context ended")
	}
	waitFrameReaders(t, before)
}
