package delta

import (
	"fmt"
	"io"

	"github.com/zeebo/xxh3"
)

// Native delta, after the rsync algorithm (A. Tridgell and P. Mackerras,
// "The rsync algorithm", TR-CS-96-05, ANU 1996): the receiver cuts its
// current copy of a file (the basis) into blocks and sends a weak rolling
// checksum and a short strong hash of each; the sender slides a window over
// its version, finds the blocks the receiver already has, and sends copy
// instructions for them and literal bytes for the rest; the receiver
// rebuilds the file from both and checks it against a hash of the whole
// range before it is put in place.

// Limits of a Signature, checked when one is decoded.
const (
	// MinSigBlockBytes and MaxSigBlockBytes bound the block size: rsync's
	// BLOCK_SIZE (700) is the smallest that SignatureBlockSize picks,
	// rsync's MAX_BLOCK_SIZE (128 KiB, protocol 30) the largest.
	MinSigBlockBytes = 700
	MaxSigBlockBytes = 128 << 10
	// MaxSigBlocks bounds the blocks of one basis file (12 MiB of sums in
	// memory at most); a larger file is sent whole.
	MaxSigBlocks = 1 << 20
	// MaxStrongBytes is the most of each block's 64-bit strong hash kept.
	MaxStrongBytes = 8
)

// Signature describes the receiver's current copy of a file (the basis) for
// a delta: the weak rolling checksum and the strong hash of each block. A
// Signature is not modified once built; it may be read concurrently.
type Signature struct {
	// BlockSizeBytes is the size of every block but the basis's last,
	// which holds the rest of the file.
	BlockSizeBytes int
	// FileSizeBytes is the size of the basis file (at least 1 byte).
	FileSizeBytes int64
	// StrongBytes is how many low-order bytes of each block's 64-bit xxh3
	// hash Strong keeps (1 to 8).
	StrongBytes int
	// First is the index, among the basis's blocks, of Weak[0]: a split
	// item carries only the blocks around its range (see Slice).
	First int
	// Weak holds the rolling checksum of each block (WeakSum), Strong its
	// truncated xxh3 hash (StrongSum). Both are empty in a header-only
	// signature, which is all that the side applying the delta needs.
	Weak   []uint32
	Strong []uint64
}

// Blocks returns the number of blocks of the whole basis file.
func (s *Signature) Blocks() int64 {
	return (s.FileSizeBytes + int64(s.BlockSizeBytes) - 1) / int64(s.BlockSizeBytes)
}

// blockLen returns the length of block i (an index among the whole basis's
// blocks).
func (s *Signature) blockLen(i int64) int {
	return int(min(int64(s.BlockSizeBytes), s.FileSizeBytes-i*int64(s.BlockSizeBytes)))
}

// Slice returns the signature of the basis blocks that overlap the range
// [off-slack, end+slack) of the file, where slack is an eighth of the
// range: what a split item covering [off, end) needs to find data that
// stayed in place or moved a little. Out-of-range bounds are clipped.
func (s *Signature) Slice(off, end int64) *Signature {
	slack := (end - off) / 8
	bs := int64(s.BlockSizeBytes)
	first := max(0, (off-slack)/bs)
	last := min(int64(s.First+len(s.Weak)), (end+slack+bs-1)/bs) // exclusive
	first = max(first, int64(s.First))
	if last < first {
		last = first
	}
	out := *s
	out.First = int(first)
	out.Weak = s.Weak[first-int64(s.First) : last-int64(s.First)]
	out.Strong = s.Strong[first-int64(s.First) : last-int64(s.First)]
	return &out
}

// SignatureBlockSize returns the block size for a basis of size bytes:
// rsync's choice (generator.c, sum_sizes_sqroot), about the square root of
// the size in a multiple of 8, at least 700 bytes and at most 128 KiB, which
// balances the size of the signature against the literal data a change
// costs.
func SignatureBlockSize(size int64) int {
	if size <= MinSigBlockBytes*MinSigBlockBytes {
		return MinSigBlockBytes
	}
	c := int64(1)
	for l := size >> 2; l != 0; l >>= 2 {
		c <<= 1
	}
	if c >= MaxSigBlockBytes {
		return MaxSigBlockBytes
	}
	var b int64
	for ; c >= 8; c >>= 1 {
		b |= c
		if size < b*b {
			b &^= c
		}
	}
	return int(max(b, MinSigBlockBytes))
}

// signatureStrongBytes returns how many bytes of strong hash to keep per
// block: rsync's formula (generator.c, sum_sizes_sqroot, BLOCKSUM_BIAS 10),
// which grows with the number of positions a false match could occur at,
// at least 2 bytes, at most 8. A false match that slips through is caught by
// the whole-range hash and the item is sent again whole.
func signatureStrongBytes(size int64, blockSize int) int {
	b := 10 // BLOCKSUM_BIAS
	for l := size >> 1; l != 0; l >>= 1 {
		b += 2
	}
	for c := blockSize >> 1; c != 0 && b > 0; c >>= 1 {
		b--
	}
	n := (b + 1 - 32 + 7) / 8
	return min(max(n, 2), MaxStrongBytes)
}

// WeakSum returns rsync's weak checksum of block (the rolling checksum of
// the rsync technical report): s1 is the sum of the bytes, s2 the sum of
// the running values of s1, both mod 2^16; the result is s1 | s2<<16. rsync
// adds its bytes as signed chars; these are unsigned, so the sums differ
// from rsync's, which only this package has to agree with.
func WeakSum(block []byte) uint32 {
	s1, s2 := weakParts(block)
	return s1&0xffff | s2<<16
}

func weakParts(block []byte) (s1, s2 uint32) {
	for _, x := range block {
		s1 += uint32(x)
		s2 += s1
	}
	return s1, s2
}

// rollWeak moves the window of a weak checksum of n bytes on by one byte:
// out leaves it, in enters it.
func rollWeak(s1, s2 uint32, n int, out, in byte) (uint32, uint32) {
	s1 += uint32(in) - uint32(out)
	s2 += s1 - uint32(n)*uint32(out)
	return s1, s2
}

// StrongSum returns the strong hash of block truncated to n bytes (the n
// low-order bytes of its 64-bit xxh3 hash).
func StrongSum(block []byte, n int) uint64 {
	return xxh3.Hash(block) & strongMask(n)
}

func strongMask(n int) uint64 {
	if n >= 8 {
		return ^uint64(0)
	}
	return 1<<(8*n) - 1
}

// ComputeSignature reads the basis file of size bytes from r and returns its
// signature. buf is a scratch buffer (any size; MaxSigBlockBytes avoids a
// new one). It fails if r yields fewer than size bytes, or if the file has
// too many blocks (over MaxSigBlocks) or none.
func ComputeSignature(r io.Reader, size int64, buf []byte) (*Signature, error) {
	if size <= 0 {
		return nil, fmt.Errorf("signature of an empty file")
	}
	bs := SignatureBlockSize(size)
	sig := &Signature{BlockSizeBytes: bs, FileSizeBytes: size, StrongBytes: signatureStrongBytes(size, bs)}
	n := sig.Blocks()
	if n > MaxSigBlocks {
		return nil, fmt.Errorf("signature of %d blocks: more than %d", n, MaxSigBlocks)
	}
	if len(buf) < bs {
		buf = make([]byte, bs)
	}
	sig.Weak = make([]uint32, n)
	sig.Strong = make([]uint64, n)
	for i := range n {
		b := buf[:sig.blockLen(i)]
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, fmt.Errorf("read block %d: %w", i, err)
		}
		sig.Weak[i] = WeakSum(b)
		sig.Strong[i] = StrongSum(b, sig.StrongBytes)
	}
	return sig, nil
}
