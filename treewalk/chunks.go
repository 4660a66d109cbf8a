package treewalk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// ChunkEntries is the most entries a chunk of a chunked walk holds. It is a variable so that tests can make small trees span many
// chunks; change it only while no walk runs.
var ChunkEntries = 1000

// AfterChunk, when not nil, is called by a chunked walk after it has
// handed out each chunk, with the chunk's number (1 for the first), on
// the walk's goroutine: the walk waits for it to return. It is a hook for
// tests (a walk held back after its first chunk); set it only while no
// walk runs.
var AfterChunk func(n int)

// chunksAhead is how many chunks a walk may have ready before its reader
// takes them: the walk goes on while the reader works, and waits beyond.
const chunksAhead = 2

// Chunk is a piece of a file list, in walk order: the next entries and
// the per-entry errors met while listing them. The chunks of a walk, in
// order, concatenated, are the List that Walk returns.
type Chunk struct {
	Entries []Entry
	Errors  []*PathError
	// Leaders holds the indices in Entries, ascending, of the hardlink
	// leaders of this chunk (entries with more than one link, the first
	// of their inode in walk order): a later entry's LinkTo names one of
	// them, of this chunk or an earlier one, and nothing else.
	Leaders []int
	// Last marks the walk's last chunk (Next then returns io.EOF).
	Last bool
	// Closed is how many of the directories that hold the chunk's last
	// entry (its listed ancestors, innermost first; not the entry itself)
	// are complete: nothing more will be listed beneath them. Directories
	// a later entry leaves are complete too, and all of them after the
	// last chunk; Closed only says it without waiting for the next chunk.
	Closed int
}

// Chunks is a file list produced as it is walked: Next returns its
// chunks in order. The walk runs on a goroutine of its own at most
// chunksAhead chunks ahead of the reader, so that memory does not grow
// with the tree: only the chunks not yet taken, the open directories
// (one descriptor per level) and the inodes with more than one link are
// held. Next is for one goroutine; Close may be called from any, and
// more than once.
type Chunks struct {
	ch       chan Chunk
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	err      error // the walk's, set before done is closed
}

// Next returns the next chunk, io.EOF after the last one, or the error
// that ended the walk (a root that cannot be opened, ctx's error).
func (c *Chunks) Next() (Chunk, error) {
	if ch, ok := <-c.ch; ok {
		return ch, nil
	}
	<-c.done
	if c.err != nil {
		return Chunk{}, c.err
	}
	return Chunk{}, io.EOF
}

// NextOr is Next when a chunk (or the walk's end) is ready or comes
// before wake delivers; when wake delivers first, it takes nothing and
// returns ok false. A ready chunk is returned even if wake is ready too,
// so a closed wake makes NextOr a Next that does not wait.
func (c *Chunks) NextOr(wake <-chan struct{}) (_ Chunk, ok bool, _ error) {
	select {
	case ch, open := <-c.ch:
		return c.took(ch, open)
	default:
	}
	select {
	case ch, open := <-c.ch:
		return c.took(ch, open)
	case <-wake:
		return Chunk{}, false, nil
	}
}

// took is Next's result for a receive from c.ch.
func (c *Chunks) took(ch Chunk, open bool) (Chunk, bool, error) {
	if open {
		return ch, true, nil
	}
	<-c.done
	if c.err != nil {
		return Chunk{}, true, c.err
	}
	return Chunk{}, true, io.EOF
}

// Close stops the walk, if it still runs, and waits for its goroutine to
// end; the chunks not taken are dropped.
func (c *Chunks) Close() {
	c.stopOnce.Do(func() { close(c.stop) })
	<-c.done
}

// Collect takes every remaining chunk and returns them as one List, or
// the walk's error.
func (c *Chunks) Collect() (List, error) { return CollectChunks(c.Next) }

// CollectChunks calls next until it returns io.EOF and joins the chunks'
// entries and errors, in order, into one List: a whole file list from a
// chunked one (a walk, or one received over the wire). Any other error of
// next is returned, with an empty List.
func CollectChunks(next func() (Chunk, error)) (List, error) {
	var l List
	for {
		ch, err := next()
		if err == io.EOF {
			return l, nil
		}
		if err != nil {
			return List{}, err
		}
		l.Entries = append(l.Entries, ch.Entries...)
		l.Errors = append(l.Errors, ch.Errors...)
	}
}

var errChunksClosed = errors.New("chunked walk closed")

// runChunks starts walk on a goroutine, its chunks going to the reader
// of the Chunks returned; walk calls emit for each (the walker's emit),
// and its error ends the list. The last chunk is emitted by runChunks.
func runChunks(ctx context.Context, walk func(emit func(Chunk) error) error) *Chunks {
	c := &Chunks{ch: make(chan Chunk, chunksAhead-1), stop: make(chan struct{}), done: make(chan struct{})}
	n := 0
	emit := func(ch Chunk) error {
		select {
		case c.ch <- ch:
		case <-c.stop:
			return errChunksClosed
		case <-ctx.Done():
			return ctx.Err()
		}
		n++
		if AfterChunk != nil {
			AfterChunk(n)
		}
		return nil
	}
	go func() {
		defer close(c.done)
		defer close(c.ch)
		err := walk(emit)
		if errors.Is(err, errChunksClosed) {
			err = nil
		}
		c.err = err
	}()
	return c
}

// WalkRootChunks is WalkRoot as chunks of at most ChunkEntries entries
// (see Chunks): the same entries, order and errors, the walk going on
// while the reader works. Close it when done with it.
func WalkRootChunks(ctx context.Context, r *os.Root) *Chunks {
	return runChunks(ctx, func(emit func(Chunk) error) error {
		d, err := r.Open(".")
		if err != nil {
			return fmt.Errorf("walk %s: %w", r.Name(), err)
		}
		defer d.Close()
		w := newWalker(nil)
		w.emit = emit
		w.rootFd = int(d.Fd())
		var st unix.Stat_t
		if err := unix.Fstat(w.rootFd, &st); err != nil {
			return fmt.Errorf("walk %s: %w", r.Name(), err)
		}
		if err := w.add(".", &st, -1); err != nil {
			return fmt.Errorf("walk %s: %w", r.Name(), err)
		}
		if err := w.flush(false); err != nil {
			return err
		}
		if err := w.dir(ctx, "."); err != nil {
			return err
		}
		return w.flush(true)
	})
}

// WalkPartsChunks is WalkParts as chunks (see Chunks), with extra, errors
// of the selection found before the walk, with the first chunk (so that a
// receiver that deletes as it goes knows of them before it deletes). One
// part is walked chunk by chunk; several parts are merged as they are
// walked, the walks of the parts whose directories hold the merge's place
// going on at once (mergechunks.go): the same entries in the same order
// as WalkParts, its errors as they are met. Close it when done with it.
func WalkPartsChunks(ctx context.Context, parts []Part, f *Filter, extra []*PathError) *Chunks {
	if len(parts) != 1 {
		return runChunks(ctx, func(emit func(Chunk) error) error {
			return mergeParts(ctx, parts, f, extra, emit)
		})
	}
	return runChunks(ctx, func(emit func(Chunk) error) error {
		w := newWalker(f)
		w.emit = emit
		w.list.Errors = append(w.list.Errors, extra...) // known before the walk: with the first chunk
		if err := w.walkPart(ctx, parts[0]); err != nil {
			return err
		}
		return w.flush(true)
	})
}

// ListChunks serves an already complete list as chunks (see Chunks), its
// hardlink leaders being the entries a LinkTo names.
func ListChunks(list List) *Chunks {
	return runChunks(context.Background(), func(emit func(Chunk) error) error { return cutList(list, emit) })
}

// cutList emits list as chunks of ChunkEntries entries, its errors with
// the first: a receiver that stops deleting once the sender has reported
// an error (--delete) then deletes nothing.
func cutList(list List, emit func(Chunk) error) error {
	linked := map[string]bool{}
	for i := range list.Entries {
		if to := list.Entries[i].LinkTo; to != "" {
			linked[to] = true
		}
	}
	n := max(ChunkEntries, 1)
	for start := 0; ; start += n {
		end := min(start+n, len(list.Entries))
		c := Chunk{Entries: list.Entries[start:end:end]}
		if start == 0 {
			c.Errors = list.Errors
		}
		for i := range c.Entries {
			if e := &c.Entries[i]; e.LinkTo == "" && linked[e.Path] {
				c.Leaders = append(c.Leaders, i)
			}
		}
		if end == len(list.Entries) {
			c.Last = true
			return emit(c)
		}
		if err := emit(c); err != nil {
			return err
		}
	}
}
