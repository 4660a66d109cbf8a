package dest

import (
	"bufio"
	"context"
	"runtime"
	"sync"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/delta"
	"github.com/restoresync/restoresync/treewalk"
)

// Signatures of basis files, for the raw method's native delta: Plan reads
// the destination's current copy of each needed file that it holds as a
// non-empty regular file and sends its block signature to the sender (see
// delta.Signature), which answers with a delta.

// maxSignatureMemory bounds the memory that one Plan's signatures take (12
// bytes a block): beyond it, the remaining files are sent whole. 64 MiB
// covers about 100 GiB of changed multi-megabyte files, or a million
// changed small ones.
const maxSignatureMemory = 64 << 20

// basisFile is a needed file that DST holds as a regular file.
type basisFile struct {
	i    int   // index in the file list
	size int64 // size of DST's copy, in bytes (> 0)
}

// signatures computes the signatures of bases, several files at a time, as
// long as they fit in maxSignatureMemory. A file that cannot be read, or
// that is no longer the regular file of the size Plan saw, gets none and is
// sent whole. Only a cancellation is an error.
func (w *Writer) signatures(ctx context.Context, entries []treewalk.Entry, bases []basisFile) (map[int]*delta.Signature, error) {
	if len(bases) == 0 {
		return nil, nil
	}
	var mem int64
	for k, b := range bases {
		blocks := (b.size + int64(delta.SignatureBlockSize(b.size)) - 1) / int64(delta.SignatureBlockSize(b.size))
		if blocks > delta.MaxSigBlocks || mem+12*blocks > maxSignatureMemory {
			bases = bases[:k]
			break
		}
		mem += 12 * blocks
	}
	var (
		mu   sync.Mutex
		sigs = make(map[int]*delta.Signature, len(bases))
	)
	work := make(chan basisFile)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(work)
		for _, b := range bases {
			select {
			case work <- b:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	for range min(len(bases), max(2, runtime.GOMAXPROCS(0))) {
		g.Go(func() error {
			br := bufio.NewReaderSize(nil, 256<<10)
			buf := make([]byte, delta.MaxSigBlockBytes)
			for b := range work {
				if sig := w.signature(&entries[b.i], b.size, br, buf); sig != nil {
					mu.Lock()
					sigs[b.i] = sig
					mu.Unlock()
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return sigs, nil
}

// signature returns the signature of DST's copy of e, of size bytes, or nil
// if it cannot be read. The file is opened beneath DST without following
// any symlink.
func (w *Writer) signature(e *treewalk.Entry, size int64, br *bufio.Reader, buf []byte) *delta.Signature {
	dirfd, base, err := w.parent(e.Path)
	if err != nil {
		return nil
	}
	defer unix.Close(dirfd)
	f, err := openBasisAt(dirfd, base, size)
	if err != nil {
		return nil
	}
	defer f.Close()
	br.Reset(f)
	sig, err := delta.ComputeSignature(br, size, buf)
	br.Reset(nil)
	if err != nil {
		return nil
	}
	return sig
}
