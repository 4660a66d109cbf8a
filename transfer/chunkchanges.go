package transfer

import (
	"context"
	"fmt"
	"math"

	"github.com/restoresync/restoresync/treewalk"
)

// ChunkOptions says what a receiver does with a chunk of a list streamed
// in chunks before it plans it (PlanChunk): --delete, --itemize-changes
// and --dry-run, chunk by chunk as a pull does them on its own writer.
// The zero value asks for none of them.
type ChunkOptions struct {
	// Delete deletes, in each directory whose listing the chunk
	// completes, what the list lacks (rsync's --delete-during). Once a
	// chunk comes without it, nothing more is deleted in that list: the
	// client clears it from the chunk in which the sender reported a
	// list error on (as rsync skips deletion after an I/O error).
	Delete bool
	// Itemize returns the change lines of the chunk: the deletions of
	// the directories it completes, then its entries'.
	Itemize bool
	// DryRun writes and deletes nothing and plans nothing: the chunk's
	// deletions are only listed, and the receiver keeps nothing of it
	// to finish.
	DryRun bool
}

// flags is o's wire form, one byte.
func (o ChunkOptions) flags() byte {
	var b byte
	if o.Delete {
		b |= 1
	}
	if o.Itemize {
		b |= 2
	}
	if o.DryRun {
		b |= 4
	}
	return b
}

// any says that o asks for something beyond the plan.
func (o ChunkOptions) any() bool { return o != ChunkOptions{} }

// chunkOptions decodes ChunkOptions.flags; an unknown bit is refused.
func chunkOptions(b byte) (ChunkOptions, bool) {
	return ChunkOptions{Delete: b&1 != 0, Itemize: b&2 != 0, DryRun: b&4 != 0}, b&^7 == 0
}

// Changes is what --delete, --itemize-changes and --dry-run did (or, on
// a dry run, would do) on one chunk of a list.
type Changes struct {
	// Lines are the change lines in rsync's --itemize-changes format
	// (with ChunkOptions.Itemize): the "*deleting" lines of each
	// directory the chunk completes, in list order of the directories,
	// then the lines of the chunk's entries in list order.
	Lines []string
	// Deleted is the number of paths deleted (on a dry run, that would
	// be).
	Deleted int
	// Errors are the paths that could not be deleted and, on a dry run,
	// the entries a restore could not change.
	Errors []*treewalk.PathError
}

// ChunkChanger is a Sink that deletes and itemizes a list streamed in
// chunks (--delete, --itemize-changes, --dry-run); restore's Writer is
// one, and a pull's client uses the same on its own writer.
type ChunkChanger interface {
	// ChunkChanges returns the changes of one list, to be given its
	// chunks in turn, asking for what o asks (o.Delete may then only be
	// cleared, with a list error).
	ChunkChanges(o ChunkOptions) ListChanges
}

// ListChanges does what ChunkOptions ask, on one list read chunk by
// chunk. Not safe for concurrent use.
type ListChanges interface {
	// Chunk takes the next chunk of the list; listErr says that the
	// sender reported a list error in it, after which nothing more is
	// deleted (the directories the chunk completes included). Its
	// error is for cancellation only.
	Chunk(ctx context.Context, ch *treewalk.Chunk, listErr bool) (Changes, error)
}

func (e *encoder) changes(c Changes) {
	e.strings(c.Lines)
	e.uvarint(uint64(c.Deleted))
	e.pathErrors(c.Errors)
}

func (d *decoder) changes() (Changes, error) {
	var c Changes
	var err error
	if c.Lines, err = d.strings(); err != nil {
		return c, err
	}
	n, err := d.uvarint()
	if err != nil {
		return c, err
	}
	if n > math.MaxInt32 {
		return c, fmt.Errorf("%w: %d deleted in a chunk", ErrProtocol, n)
	}
	c.Deleted = int(n)
	c.Errors, err = d.pathErrors()
	return c, err
}

func (e *encoder) strings(list []string) {
	e.uvarint(uint64(len(list)))
	for _, s := range list {
		e.str(s)
	}
}

func (d *decoder) strings() ([]string, error) {
	n, err := d.count()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, min(n, 1<<10))
	for range n {
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
