package transfer

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/zeebo/xxh3"

	"github.com/restoresync/restoresync/delta"
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

// Basis is the receiver's current copy of a file, opened for a delta item.
type Basis interface {
	io.ReaderAt
	io.Closer
}

// BasisOpener is implemented by an ItemWriter that can apply deltas (items
// with Delta set). OpenBasis is called before WriteItem for such an item,
// concurrently like it.
type BasisOpener interface {
	// OpenBasis opens the receiver's current copy of it.Entry's file,
	// which must still be a regular file of it.Delta.FileSizeBytes bytes;
	// an error makes the item fail with ErrDeltaFailed. WriteItem then
	// gets the rebuilt data, checked against the sender's hash, and the
	// basis is closed after it returns.
	OpenBasis(ctx context.Context, it *Item) (Basis, error)
}

// ItemSource is the sending end of item data: LocalSource implements it.
// Open is called concurrently.
type ItemSource interface {
	// Open returns a reader of exactly it.Length bytes of the item's file
	// from it.Offset (fewer bytes, or an error, if the file shrank).
	Open(ctx context.Context, it *Item) (io.ReadCloser, error)
}

// finishRead checks, after the last byte of an item was read from r, that
// the source file did not change while it was read (see LocalSource.Open).
func finishRead(r io.Reader) error {
	if c, ok := r.(interface{ unchanged() error }); ok {
		return c.unchanged()
	}
	return nil
}

// sendItems sends the data of a read request's items in turn
// (sendItemData), through one readBatch of src.
func sendItems(ctx context.Context, enc *encoder, src *LocalSource, items []Item, readBytes int) {
	b := src.readBatch()
	defer b.Close()
	for i := range items {
		sendItemData(ctx, enc, b, &items[i], readBytes)
	}
}

// sendItemData writes one item's data as chunks and an end tag, or an error
// tag if the source fails. With enc.verify the end tag is a sum tag: the
// xxh3-128 of the bytes read, which the receiver checks. readBytes is the
// read size (--read-buffer): the item is cut into chunks of readBytes, or
// chunkBytes if smaller, each read from the source straight into the
// frames (frameWriter.writeChunkFrom), so that its bytes are copied by no
// code of ours on their way to the wire. It returns the item's error: the
// source's (a failed open or read, a file that shrank or changed while it
// was read, ErrSizeMismatch, ErrSourceChanged), which the error tag also
// tells the receiver. Stream errors are sticky in enc's frame writer
// (enc.fw.Err), for the caller to check.
func sendItemData(ctx context.Context, enc *encoder, src ItemSource, it *Item, readBytes int) (itemErr error) {
	r, err := src.Open(ctx, it)
	if err != nil {
		enc.byte(tagErr)
		enc.str(err.Error())
		return err
	}
	defer r.Close()
	if it.Delta != nil {
		return sendDelta(enc, r, it)
	}
	var h *xxh3.Hasher
	var hw io.Writer // h, or nil
	if enc.verify {
		h = xxh3.New()
		hw = h
	}
	readBytes = max(readBytes, 1)
	enc.fw.beginItem(it.Entry.Path, it.Offset, it.Length)
	defer enc.fw.endItem()
	var sent int64
	for sent < it.Length {
		// The chunks of a read of readBytes bytes, as the wire has always cut them.
		read := min(int64(readBytes), it.Length-sent)
		var err error
		for read > 0 && err == nil {
			k := int(min(read, chunkBytes))
			var n int
			n, err = enc.fw.writeChunkFrom(r, k, hw)
			sent += int64(n)
			read -= int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = fmt.Errorf("%w: file shrank to %d bytes while being read (expected %d)", ErrSizeMismatch, sent, it.Length)
		}
		if err != nil {
			enc.byte(tagErr)
			enc.str(err.Error())
			return err
		}
	}
	if err := finishRead(r); err != nil {
		enc.byte(tagErr)
		enc.str(err.Error())
		return err
	}
	if h != nil {
		sum := h.Sum128().Bytes()
		enc.byte(tagSum)
		enc.fw.Write(sum[:])
		return nil
	}
	enc.byte(tagEnd)
	return nil
}

// itemReader serves one item's chunks to an ItemWriter. It reports the
// sender's error tag as a RemoteError and enforces the announced length.
// For a delta item it also serves the basis blocks that copy tags name, and
// ends with an error wrapping ErrDeltaFailed instead of io.EOF unless what
// it served matches the sender's hash. On a --verify stream a whole item
// ends with the sender's hash too, and a mismatch is ErrVerifyFailed.
type itemReader struct {
	d         *decoder
	left      int64 // bytes the item may still yield
	chunk     int64 // bytes left in the current chunk
	done      bool  // end, sum or error tag consumed
	err       error // item error (remote or size), sticky
	streamErr error // stream error (the stream is out of sync), sticky

	delta    *delta.Signature // nil for a whole item
	basis    io.ReaderAt      // the basis of a delta item
	hash     *xxh3.Hasher     // of the bytes served: a delta item, or --verify; the item ends with a sum tag
	copyOff  int64            // basis offset of the current copy
	copyLeft int64            // bytes left in the current copy
	draining bool             // the writer is done: skip, do not check
	sum      [16]byte         // scratch for the sum tag
}

// nextTag consumes one tag (and a chunk's length) and updates the state.
func (r *itemReader) nextTag() {
	tag, err := r.d.byte()
	if err != nil {
		r.streamErr = unexpected(err)
		return
	}
	switch tag {
	case tagChunk:
		n, err := r.d.uvarint()
		if err != nil {
			r.streamErr = err
			return
		}
		if n > maxFrameRaw {
			r.streamErr = fmt.Errorf("%w: chunk of %d bytes", ErrProtocol, n)
			return
		}
		r.chunk = int64(n)
		if r.chunk > r.left && r.err == nil {
			r.err = fmt.Errorf("%w: sender sent more than the announced length", ErrSizeMismatch)
		}
	case tagEnd:
		if r.hash != nil {
			r.streamErr = fmt.Errorf("%w: end tag in a delta or verified item", ErrProtocol)
			return
		}
		r.done = true
		if r.left != 0 && r.err == nil {
			r.err = fmt.Errorf("%w: sender sent %d bytes too few", ErrSizeMismatch, r.left)
		}
	case tagCopy:
		if r.delta == nil {
			r.streamErr = fmt.Errorf("%w: copy tag in a whole item", ErrProtocol)
			return
		}
		r.nextCopy()
	case tagSum:
		if r.hash == nil {
			r.streamErr = fmt.Errorf("%w: sum tag in a whole item of a stream without --verify", ErrProtocol)
			return
		}
		if _, err := io.ReadFull(r.d.fr, r.sum[:]); err != nil {
			r.streamErr = unexpected(err)
			return
		}
		r.done = true
		switch {
		case r.err != nil || r.draining:
		case r.left != 0:
			r.err = fmt.Errorf("%w: sender sent %d bytes too few", ErrSizeMismatch, r.left)
		default:
			if got := r.hash.Sum128().Bytes(); !bytes.Equal(got[:], r.sum[:]) {
				if r.delta != nil {
					r.err = fmt.Errorf("%w: the rebuilt data does not match the sender's hash", ErrDeltaFailed)
				} else {
					r.err = ErrVerifyFailed
				}
			}
		}
	case tagErr:
		msg, err := r.d.str()
		if err != nil {
			r.streamErr = err
			return
		}
		r.done = true
		if r.err == nil {
			r.err = &RemoteError{Msg: msg}
		}
	default:
		r.streamErr = fmt.Errorf("%w: item data tag %d", ErrProtocol, tag)
	}
}

// nextCopy reads a copy tag's fields and sets up the copy. A copy outside
// the basis, or past the item's length, is an item error; the stream stays
// in sync.
func (r *itemReader) nextCopy() {
	first, err := r.d.uvarint()
	if err != nil {
		r.streamErr = err
		return
	}
	count, err := r.d.uvarint()
	if err != nil {
		r.streamErr = err
		return
	}
	if r.err != nil {
		return
	}
	blocks := uint64(r.delta.Blocks())
	if first >= blocks || count == 0 || count > blocks-first {
		r.err = fmt.Errorf("%w: copy of basis blocks %d+%d, which has %d", ErrDeltaFailed, first, count, blocks)
		return
	}
	bs := int64(r.delta.BlockSizeBytes)
	off := int64(first) * bs
	n := min(int64(first+count)*bs, r.delta.FileSizeBytes) - off
	if n > r.left {
		r.err = fmt.Errorf("%w: sender sent more than the announced length", ErrSizeMismatch)
		return
	}
	r.copyOff, r.copyLeft = off, n
}

// Read hands out the item's bytes, io.EOF after the end tag.
func (r *itemReader) Read(p []byte) (int, error) {
	for r.chunk == 0 && r.copyLeft == 0 && !r.done && r.streamErr == nil {
		r.nextTag()
	}
	switch {
	case r.streamErr != nil:
		return 0, r.streamErr
	case r.err != nil:
		return 0, r.err
	case r.done:
		return 0, io.EOF
	}
	if r.copyLeft > 0 {
		p = p[:min(int64(len(p)), r.copyLeft)]
		n, err := r.basis.ReadAt(p, r.copyOff)
		if n < len(p) {
			r.err = fmt.Errorf("%w: basis changed: read at %d: %w", ErrDeltaFailed, r.copyOff, err)
			return 0, r.err
		}
		r.hash.Write(p)
		r.copyOff += int64(n)
		r.copyLeft -= int64(n)
		r.left -= int64(n)
		return n, nil
	}
	n, err := r.d.fr.Read(p[:min(int64(len(p)), r.chunk)])
	r.chunk -= int64(n)
	r.left -= int64(n)
	if r.hash != nil {
		r.hash.Write(p[:n])
	}
	if err != nil {
		r.streamErr = unexpected(err)
		return n, r.streamErr
	}
	return n, nil
}

// drain consumes what is left of the item so the stream stays in sync, and
// returns a wire error if one ends the stream.
func (r *itemReader) drain() error {
	r.draining = true
	for !r.done && r.streamErr == nil {
		if r.copyLeft > 0 {
			r.left -= r.copyLeft
			r.copyLeft = 0
			continue
		}
		if r.chunk > 0 {
			n, err := io.CopyN(io.Discard, r.d.fr, r.chunk)
			r.chunk -= n
			r.left -= n
			if err != nil {
				r.streamErr = unexpected(err)
			}
			continue
		}
		r.nextTag()
	}
	return r.streamErr
}

// recvItemData reads one item's data into w. It returns the item's own error
// (sender failure, size mismatch, write failure) and, separately, a stream
// error after which the stream is out of sync and unusable.
func recvItemData(ctx context.Context, d *decoder, w ItemWriter, it *Item) (itemErr, err error) {
	r := &itemReader{d: d, left: it.Length}
	var werr error
	if it.Delta == nil {
		if d.verify {
			r.hash = xxh3.New()
		}
		werr = w.WriteItem(ctx, it, r)
	} else {
		r.delta, r.hash = it.Delta, xxh3.New()
		werr = writeDelta(ctx, w, it, r)
	}
	if err := r.drain(); err != nil {
		return nil, err
	}
	if r.err != nil {
		return r.err, nil
	}
	return werr, nil
}

// writeDelta opens the basis of the delta item it and has w write it from r.
func writeDelta(ctx context.Context, w ItemWriter, it *Item, r *itemReader) error {
	bo, ok := w.(BasisOpener)
	if !ok {
		return fmt.Errorf("%w: this receiver cannot apply deltas", ErrDeltaFailed)
	}
	basis, err := bo.OpenBasis(ctx, it)
	if err != nil {
		return fmt.Errorf("%w: open basis: %w", ErrDeltaFailed, err)
	}
	defer basis.Close()
	r.basis = basis
	return w.WriteItem(ctx, it, r)
}
