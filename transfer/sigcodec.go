package transfer

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/restoresync/restoresync/delta"
)

// Wire form of a signature in an item: a mode byte, then for sigHeader and
// sigFull the block size, file size and, for sigFull, the strong size, the
// first block, the count of blocks and each block's 4-byte weak sum and
// StrongBytes of strong hash, little-endian.
const (
	sigNone   byte = 0 // no delta: the item travels whole
	sigFull   byte = 1 // the sender's copy, with the sums
	sigHeader byte = 2 // the receiver's copy: sizes only
)

func (e *encoder) signature(s *delta.Signature, full bool) {
	if s == nil {
		e.byte(sigNone)
		return
	}
	if !full {
		e.byte(sigHeader)
		e.uvarint(uint64(s.BlockSizeBytes))
		e.varint(s.FileSizeBytes)
		return
	}
	e.byte(sigFull)
	e.uvarint(uint64(s.BlockSizeBytes))
	e.varint(s.FileSizeBytes)
	e.byte(byte(s.StrongBytes))
	e.uvarint(uint64(s.First))
	e.uvarint(uint64(len(s.Weak)))
	var b [4 + delta.MaxStrongBytes]byte
	for i := range s.Weak {
		binary.LittleEndian.PutUint32(b[:4], s.Weak[i])
		binary.LittleEndian.PutUint64(b[4:], s.Strong[i])
		e.fw.Write(b[:4+s.StrongBytes])
	}
}

// signature decodes and validates an item's signature (nil for sigNone).
// Its memory grows only as the sums arrive.
func (d *decoder) signature() (*delta.Signature, error) {
	mode, err := d.byte()
	if err != nil {
		return nil, unexpected(err)
	}
	if mode == sigNone {
		return nil, nil
	}
	if mode != sigFull && mode != sigHeader {
		return nil, fmt.Errorf("%w: signature mode %d", ErrProtocol, mode)
	}
	bs, err := d.uvarint()
	if err != nil {
		return nil, err
	}
	size, err := d.varint()
	if err != nil {
		return nil, err
	}
	if bs < delta.MinSigBlockBytes || bs > delta.MaxSigBlockBytes || size < 1 || (size+int64(bs)-1)/int64(bs) > delta.MaxSigBlocks {
		return nil, fmt.Errorf("%w: signature of %d-byte blocks for a %d-byte file", ErrProtocol, bs, size)
	}
	s := &delta.Signature{BlockSizeBytes: int(bs), FileSizeBytes: size}
	if mode == sigHeader {
		return s, nil
	}
	sb, err := d.byte()
	if err != nil {
		return nil, unexpected(err)
	}
	first, err := d.uvarint()
	if err != nil {
		return nil, err
	}
	n, err := d.uvarint()
	if err != nil {
		return nil, err
	}
	if sb < 1 || sb > delta.MaxStrongBytes || first > uint64(s.Blocks()) || n > uint64(s.Blocks())-first {
		return nil, fmt.Errorf("%w: signature of blocks %d+%d (%d-byte sums) of %d", ErrProtocol, first, n, sb, s.Blocks())
	}
	s.StrongBytes, s.First = int(sb), int(first)
	s.Weak = make([]uint32, 0, min(n, 1<<12)) // grows as the sums prove the count
	s.Strong = make([]uint64, 0, min(n, 1<<12))
	var b [4 + delta.MaxStrongBytes]byte
	for range n {
		if _, err := io.ReadFull(d.fr, b[:4+sb]); err != nil {
			return nil, unexpected(err)
		}
		clear(b[4+sb:])
		s.Weak = append(s.Weak, binary.LittleEndian.Uint32(b[:4]))
		s.Strong = append(s.Strong, binary.LittleEndian.Uint64(b[4:]))
	}
	return s, nil
}
