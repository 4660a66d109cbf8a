package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// ItemWriter is the receiving end of item data: restore's safe writer
// implements it. WriteItem is called concurrently, from one goroutine per
// stream.
type ItemWriter interface {
	// WriteItem stores the Length bytes that r yields for it. r returns
	// io.EOF after exactly it.Length bytes, or an error if the sender failed
	// or lied about the size; WriteItem must then leave nothing under the
	// item's final name. The returned error concerns this item only.
	WriteItem(ctx context.Context, it *Item, r io.Reader) error
}

// ItemSource is the sending end of item data: LocalSource implements it.
// Open is called concurrently.
type ItemSource interface {
	// Open returns a reader of exactly it.Length bytes of the item's file
	// from it.Offset (fewer bytes, or an error, if the file shrank).
	Open(ctx context.Context, it *Item) (io.ReadCloser, error)
}

// ErrSizeMismatch is reported for an item whose data was shorter or longer
// than its announced length.
var ErrSizeMismatch = errors.New("data length differs from the file list")

// sendItemData writes one item's data as chunks and an end tag, or an error
// tag if the source fails. buf is the disk read buffer (any size; chunks on
// the wire stay at most chunkBytes). It returns only wire errors; the source's error
// is returned as itemErr.
func sendItemData(ctx context.Context, enc *encoder, src ItemSource, it *Item, buf []byte) (itemErr error) {
	r, err := src.Open(ctx, it)
	if err != nil {
		enc.byte(tagErr)
		enc.str(err.Error())
		return err
	}
	defer r.Close()
	var sent int64
	for sent < it.Length {
		n, err := io.ReadFull(r, buf[:min(int64(len(buf)), it.Length-sent)])
		for data := buf[:n]; len(data) > 0; { // chunks of at most chunkBytes
			k := min(len(data), chunkBytes)
			enc.byte(tagChunk)
			enc.bytes(data[:k])
			data = data[k:]
		}
		sent += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = fmt.Errorf("%w: file shrank to %d bytes while being read (expected %d)", ErrSizeMismatch, sent, it.Length)
		}
		if err != nil {
			enc.byte(tagErr)
			enc.str(err.Error())
			return err
		}
	}
	enc.byte(tagEnd)
	return nil
}

// itemReader serves one item's chunks to an ItemWriter. It reports the
// sender's error tag as a RemoteError and enforces the announced length.
type itemReader struct {
	d     *decoder
	left  int64 // bytes the item may still yield
	chunk int64 // bytes left in the current chunk
	done  bool  // end or error tag consumed
	err   error // item error (remote or size), sticky
	fatal error // wire error, sticky
}

// nextTag consumes one tag (and a chunk's length) and updates the state.
func (r *itemReader) nextTag() {
	tag, err := r.d.byte()
	if err != nil {
		r.fatal = unexpected(err)
		return
	}
	switch tag {
	case tagChunk:
		n, err := r.d.uvarint()
		if err != nil {
			r.fatal = err
			return
		}
		if n > maxFrameRaw {
			r.fatal = fmt.Errorf("%w: chunk of %d bytes", ErrProtocol, n)
			return
		}
		r.chunk = int64(n)
		if r.chunk > r.left && r.err == nil {
			r.err = fmt.Errorf("%w: sender sent more than the announced length", ErrSizeMismatch)
		}
	case tagEnd:
		r.done = true
		if r.left != 0 && r.err == nil {
			r.err = fmt.Errorf("%w: sender sent %d bytes too few", ErrSizeMismatch, r.left)
		}
	case tagErr:
		msg, err := r.d.str()
		if err != nil {
			r.fatal = err
			return
		}
		r.done = true
		if r.err == nil {
			r.err = &RemoteError{Msg: msg}
		}
	default:
		r.fatal = fmt.Errorf("%w: item data tag %d", ErrProtocol, tag)
	}
}

// Read hands out the item's bytes, io.EOF after the end tag.
func (r *itemReader) Read(p []byte) (int, error) {
	for r.chunk == 0 && !r.done && r.fatal == nil {
		r.nextTag()
	}
	switch {
	case r.fatal != nil:
		return 0, r.fatal
	case r.err != nil:
		return 0, r.err
	case r.done:
		return 0, io.EOF
	}
	n, err := r.d.fr.Read(p[:min(int64(len(p)), r.chunk)])
	r.chunk -= int64(n)
	r.left -= int64(n)
	if err != nil {
		r.fatal = unexpected(err)
		return n, r.fatal
	}
	return n, nil
}

// drain consumes what is left of the item so the stream stays in sync, and
// returns a wire error if one ends the stream.
func (r *itemReader) drain() error {
	for !r.done && r.fatal == nil {
		if r.chunk > 0 {
			n, err := io.CopyN(io.Discard, r.d.fr, r.chunk)
			r.chunk -= n
			r.left -= n
			if err != nil {
				r.fatal = unexpected(err)
			}
			continue
		}
		r.nextTag()
	}
	return r.fatal
}

// recvItemData reads one item's data into w. It returns the item's own error
// (sender failure, size mismatch, write failure) and, separately, a wire
// error that ends the stream.
func recvItemData(ctx context.Context, d *decoder, w ItemWriter, it *Item) (itemErr, fatal error) {
	r := &itemReader{d: d, left: it.Length}
	werr := w.WriteItem(ctx, it, r)
	if fatal := r.drain(); fatal != nil {
		return nil, fatal
	}
	if r.err != nil {
		return r.err, nil
	}
	return werr, nil
}
