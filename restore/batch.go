package restore

import (
	"cmp"
	"slices"

	"github.com/restoresync/restoresync/delta"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// Batching: many small files travel together, so one request carries
// hundreds of them; a file larger than the block size is split into blocks,
// each its own batch, so that one big file is spread across the streams.
const (
	// batchBytes is the payload a batch of small files aims at.
	batchBytes = 1 << 20
	// batchFiles caps the files in one batch.
	batchFiles = 512
)

// batch is a unit of work for one stream.
type batch struct {
	items []transfer.Item
	bytes int64
	// chunk is the chunk of the file list the items are of, which is
	// finished once its batches are all done; nil outside a run.
	chunk *chunkState
	// list, when not nil, makes the batch a request for the next chunk
	// of a pull's file list (connChunks), whose reply goes on list;
	// such a batch has no items and is not booked (done).
	list chan listReply
}

// listReply is the reply to a list batch: the chunk, or the error that
// ended the stream.
type listReply struct {
	ch  treewalk.Chunk
	err error
}

// makeBatches plans the data transfer of the needed entries. Big work comes
// first (largest files first), so that the streams finish together instead
// of one ending with a big file while the others idle. A file with a
// signature in sigs travels as a delta: each block of a split file with the
// part of the signature around it. Batches count a delta's bytes in full:
// its wire bytes are few, but it is read and written in full.
func makeBatches(entries []treewalk.Entry, need []int, sigs map[int]*delta.Signature, blockSize int64) []*batch {
	var big, small []*batch
	cur := &batch{}
	for _, i := range need {
		e := entries[i]
		sig := sigs[i]
		switch {
		case e.Size > blockSize:
			for off := int64(0); off < e.Size; off += blockSize {
				n := min(blockSize, e.Size-off)
				it := transfer.Item{Entry: e, Offset: off, Length: n, Split: true}
				if sig != nil {
					it.Delta = sig.Slice(off, off+n)
				}
				big = append(big, &batch{items: []transfer.Item{it}, bytes: n})
			}
		case e.Size >= batchBytes/2:
			big = append(big, &batch{items: []transfer.Item{{Entry: e, Length: e.Size, Delta: sig}}, bytes: e.Size})
		default:
			cur.items = append(cur.items, transfer.Item{Entry: e, Length: e.Size, Delta: sig})
			cur.bytes += e.Size
			if cur.bytes >= batchBytes || len(cur.items) >= batchFiles {
				small = append(small, cur)
				cur = &batch{}
			}
		}
	}
	if len(cur.items) > 0 {
		small = append(small, cur)
	}
	// Largest files first; the blocks of one file stay together, in order,
	// so that each split file completes (and is put in place) as early as
	// possible and an interruption loses little.
	slices.SortStableFunc(big, func(a, b *batch) int {
		x, y := &a.items[0], &b.items[0]
		return cmp.Or(cmp.Compare(y.Entry.Size, x.Entry.Size), cmp.Compare(x.Entry.Path, y.Entry.Path), cmp.Compare(x.Offset, y.Offset))
	})
	return append(big, small...)
}
