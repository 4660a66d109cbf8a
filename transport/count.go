package transport

import (
	"io"
	"sync/atomic"
)

// CountingReader returns a reader that reads from r and adds to n the bytes
// each Read returned, errors included: the wire bytes of a stream. n may be
// read from any goroutine; the reader is used like r.
func CountingReader(r io.Reader, n *atomic.Int64) io.Reader { return countingReader{r, n} }

// CountingWriter returns a writer that writes to w and adds to n the bytes
// each Write wrote, errors included. n may be read from any goroutine; the
// writer is used like w.
func CountingWriter(w io.Writer, n *atomic.Int64) io.Writer { return countingWriter{w, n} }

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n.Add(int64(k))
	return k, err
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	k, err := c.w.Write(p)
	c.n.Add(int64(k))
	return k, err
}
