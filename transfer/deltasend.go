package transfer

import (
	"fmt"
	"io"
	"sync"

	"github.com/zeebo/xxh3"

	"github.com/restoresync/restoresync/delta"
)

// deltaOps writes the op stream of one delta item as delta.Search finds
// it: literal chunks of at most chunkBytes and copies of basis blocks.
// Wire errors are sticky in enc.
type deltaOps struct{ enc *encoder }

// Copy writes a copy of count basis blocks from first.
func (o deltaOps) Copy(first, count uint64) {
	o.enc.byte(tagCopy)
	o.enc.uvarint(first)
	o.enc.uvarint(count)
}

// Literal writes data as chunks of at most chunkBytes.
func (o deltaOps) Literal(data []byte) {
	for len(data) > 0 {
		k := min(len(data), chunkBytes)
		o.enc.byte(tagChunk)
		o.enc.bytes(data[:k])
		data = data[k:]
	}
}

// deltaHashes holds the hashers of the data of delta items.
var deltaHashes = sync.Pool{New: func() any { return xxh3.New() }}

// sendDelta writes the data of the delta item it, read from r (exactly
// it.Length bytes), as literal chunks and copies of the basis blocks that
// it.Delta describes, then the sum tag with the xxh3-128 hash of all the
// data. If r fails or ends early it writes an error tag and returns the
// error (ErrSizeMismatch when the file shrank). Wire errors are sticky in
// enc.
func sendDelta(enc *encoder, r io.Reader, it *Item) error {
	h := deltaHashes.Get().(*xxh3.Hasher)
	defer deltaHashes.Put(h)
	h.Reset()
	read, err := delta.Search(io.TeeReader(r, h), it.Length, it.Delta, deltaOps{enc})
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		err = fmt.Errorf("%w: file shrank to %d bytes while being read (expected %d)", ErrSizeMismatch, it.Offset+read, it.Offset+it.Length)
	}
	if err == nil {
		err = finishRead(r)
	}
	if err != nil {
		enc.byte(tagErr)
		enc.str(err.Error())
		return err
	}
	sum := h.Sum128().Bytes()
	enc.byte(tagSum)
	enc.fw.Write(sum[:])
	return nil
}
