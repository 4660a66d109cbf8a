package dest

import (
	"bytes"
	"fmt"

	"golang.org/x/sys/unix"
)

// Sparse files (rsync's -S, on by default here). The sender flags a file
// that allocates fewer bytes than its size (treewalk.Entry.Sparse); the
// writer then leaves a hole wherever a whole aligned block of sparseBlock
// bytes is zero, instead of writing it, and sets the file's size at the
// end, so a trailing hole stays a hole. Blocks of a split file land at
// their offsets in a temporary file that was made full-size and empty
// (all hole), so they work the same way. The result allocates at most what
// the source does (zero blocks that the source had allocated become holes,
// as with rsync -S). Files without the flag are written as they come.

// sparseBlock is the hole granularity: the page and block size of the
// usual file systems.
const sparseBlock = 4 << 10

var zeroBlock [sparseBlock]byte

// sparseWriter writes at increasing offsets of f, skipping zero blocks.
// Without punch, every byte of f it skips must already read as zero (a
// fresh or truncated file); with punch (a block of a split file, which an
// earlier attempt, a failed delta, may have written), it punches a hole
// there instead. Not safe for concurrent use.
type sparseWriter struct {
	f     fdFile
	off   int64
	punch bool
}

// Write implements io.Writer; it never writes a zero block aligned on
// sparseBlock (nor the zero head or tail of p within such a block).
func (s *sparseWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(sparseBlock-int(s.off%sparseBlock), len(p))
		if bytes.Equal(p[:k], zeroBlock[:k]) {
			for k < len(p) { // the whole zero run, punched at once
				j := min(sparseBlock, len(p)-k)
				if !bytes.Equal(p[k:k+j], zeroBlock[:j]) {
					break
				}
				k += j
			}
			if s.punch {
				err := unix.Fallocate(int(s.f), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, s.off, int64(k))
				if err != nil {
					return n - len(p), fmt.Errorf("punch a hole: %w", err)
				}
			}
			s.off += int64(k)
			p = p[k:]
			continue
		}
		// A run of blocks with data, written at once.
		for k < len(p) {
			j := min(sparseBlock, len(p)-k)
			if bytes.Equal(p[k:k+j], zeroBlock[:j]) {
				break
			}
			k += j
		}
		if _, err := s.f.WriteAt(p[:k], s.off); err != nil {
			return n - len(p), err
		}
		s.off += int64(k)
		p = p[k:]
	}
	return n, nil
}

// digHoles turns the zero blocks of the regular file open at fd (size
// bytes) into holes (fallocate PUNCH_HOLE, keeping the size): for a file
// another program wrote in full (the rsync method's receiver). Its
// contents do not change; its mtime does, so call it before setting that.
func digHoles(fd int, size int64) error {
	buf := make([]byte, 1<<20)
	var holeStart, holeEnd int64 = -1, -1
	punch := func() error {
		if holeStart < 0 || holeEnd <= holeStart {
			return nil
		}
		err := unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, holeStart, holeEnd-holeStart)
		holeStart = -1
		if err != nil {
			return fmt.Errorf("punch a hole: %w", err)
		}
		return nil
	}
	for off := int64(0); off < size; {
		n, err := unix.Pread(fd, buf[:min(int64(len(buf)), size-off)], off)
		if err != nil {
			return fmt.Errorf("read to find holes: %w", err)
		}
		if n == 0 {
			break
		}
		for i := 0; i+sparseBlock <= n; i += sparseBlock {
			at := off + int64(i)
			if bytes.Equal(buf[i:i+sparseBlock], zeroBlock[:]) {
				if holeStart < 0 {
					holeStart = at
				}
				holeEnd = at + sparseBlock
			} else if err := punch(); err != nil {
				return err
			}
		}
		off += int64(n - n%sparseBlock)
		if n%sparseBlock != 0 {
			break // the tail block of the file: kept
		}
	}
	return punch()
}
