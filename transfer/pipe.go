package transfer

import (
	"context"
	"io"
	"sync"

	"github.com/restoresync/restoresync/transport"
)

// PipeStream returns a Stream connected to Serve running in a goroutine of
// this process with cfg: the in-process server used for local restores'
// tests and for benchmarks of the pipeline without SSH. Closing the stream
// stops the server.
func PipeStream(ctx context.Context, cfg ServerConfig) transport.Stream {
	cr, sw := io.Pipe() // server → client
	sr, cw := io.Pipe() // client → server
	p := &pipeStream{r: cr, w: cw, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		err := Serve(ctx, sr, sw, cfg)
		if err != nil {
			p.mu.Lock()
			p.stderr = "restoresync serve: " + err.Error()
			p.mu.Unlock()
		}
		sw.CloseWithError(io.EOF)
		sr.CloseWithError(io.ErrClosedPipe)
	}()
	return p
}

type pipeStream struct {
	r      *io.PipeReader
	w      *io.PipeWriter
	done   chan struct{}
	mu     sync.Mutex
	stderr string
}

func (p *pipeStream) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *pipeStream) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p *pipeStream) CloseWrite() error           { return p.w.Close() }

func (p *pipeStream) Close() error {
	p.w.CloseWithError(io.ErrClosedPipe)
	p.r.CloseWithError(io.ErrClosedPipe)
	<-p.done
	return nil
}

func (p *pipeStream) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr
}

// PipeDialer is a Dialer whose streams go to Serve in this process (see
// PipeStream); the host of the location is ignored. Safe for concurrent use.
type PipeDialer struct {
	// Config configures each in-process server.
	Config ServerConfig
}

// Dial returns a new in-process stream; it never fails. ctx bounds only the
// dial, as for the SSH dialers: the stream lives until it is closed.
func (d PipeDialer) Dial(ctx context.Context) (transport.Stream, error) {
	return PipeStream(context.WithoutCancel(ctx), d.Config), nil
}
