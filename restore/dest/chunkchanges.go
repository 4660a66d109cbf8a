package dest

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// ChunkChanges implements transfer.ChunkChanger: it returns what
// --delete, --dry-run and --itemize-changes do on DST for a file list
// read chunk by chunk, as a pull does them on its own writer and a
// push's receiver on the far side (the same code, so the same lines in
// the same order). Each chunk in turn: in each directory whose listing
// the chunk completes, in list order of the directories (each after its
// subdirectories), it deletes what the list lacks (DeleteIn; a dry run
// only lists it: ItemizeDeletesIn), unless the sender has reported a
// list error in this chunk or an earlier one (then nothing more is
// deleted, as rsync's "IO error encountered -- skipping file
// deletion"); then it itemizes the chunk's entries (Itemizer.Lines).
// The deletions' lines come first, as rsync lists a directory's
// deletions before its entries. It remembers only the directories being
// listed, with --delete their listed names (all that a directory's
// deletion keeps), and what Itemizer remembers of hardlink groups, so
// its memory does not grow with the tree.
func (w *Writer) ChunkChanges(o transfer.ChunkOptions) transfer.ListChanges {
	c := &chunkChanges{w: w, del: o.Delete, dry: o.DryRun}
	if o.DryRun || o.Itemize {
		c.itz = w.NewItemizer()
	}
	return c
}

// chunkChanges is ChunkChanges' transfer.ListChanges.
type chunkChanges struct {
	w   *Writer
	itz *Itemizer // nil when no lines are asked for
	del bool      // deletes (lists, on a dry run) until a list error
	dry bool
	// open are the directories being listed, outermost first; closed
	// those whose listing the chunk being taken completes.
	open, closed []listedDir
	seen         int // the directories listed so far: listedDir.seq
}

// listedDir is a directory of the list whose listing had not ended: its
// path, its place in the list among the directories (seq), and, with
// --delete, the names listed directly in it.
type listedDir struct {
	path  string
	seq   int
	names map[string]bool
}

// Chunk implements transfer.ListChanges.
func (c *chunkChanges) Chunk(ctx context.Context, ch *treewalk.Chunk, listErr bool) (transfer.Changes, error) {
	c.track(ch)
	closed := c.closed
	c.closed = nil
	if listErr {
		c.del = false
		closed = nil
	}
	slices.SortFunc(closed, func(a, b listedDir) int { return a.seq - b.seq })
	var out transfer.Changes
	for _, d := range closed {
		var del []string
		var err error
		if c.dry {
			del, err = c.w.ItemizeDeletesIn(ctx, d.path, d.names)
		} else {
			var perItem []*treewalk.PathError
			del, perItem, err = c.w.DeleteIn(ctx, d.path, d.names)
			out.Errors = append(out.Errors, perItem...)
			if c.itz != nil {
				for i, p := range del {
					del[i] = "*deleting   " + p
				}
			}
		}
		if err != nil {
			return transfer.Changes{}, fmt.Errorf("delete: %w", err)
		}
		out.Deleted += len(del)
		if c.itz != nil {
			out.Lines = append(out.Lines, del...)
		}
	}
	if c.itz != nil {
		more, perItem, err := c.itz.Lines(ctx, ch.Entries, ch.Leaders)
		if err != nil {
			return transfer.Changes{}, fmt.Errorf("itemize: %w", err)
		}
		out.Lines = append(out.Lines, more...)
		if c.dry {
			out.Errors = append(out.Errors, perItem...) // a real run reports them when it writes them
		}
	}
	return out, nil
}

// track follows the directories being listed through ch: those its
// entries leave, those it says are complete, all of them after the last
// chunk go to closed; with --delete, each entry's first name below the
// innermost directory being listed is kept in that directory's names.
func (c *chunkChanges) track(ch *treewalk.Chunk) {
	for i := range ch.Entries {
		e := &ch.Entries[i]
		for len(c.open) > 0 && !treewalk.IsUnder(e.Path, c.open[len(c.open)-1].path) {
			c.closeDir()
		}
		if c.del && len(c.open) > 0 {
			top := &c.open[len(c.open)-1]
			rel := e.Path
			if top.path != "." {
				rel = e.Path[len(top.path)+1:]
			}
			// The first name below the directory: an entry listed
			// without its parent keeps that parent in its place.
			name, _, _ := strings.Cut(rel, "/")
			top.names[name] = true
		}
		if e.Kind == treewalk.KindDir {
			d := listedDir{path: e.Path, seq: c.seen}
			c.seen++
			if c.del {
				d.names = map[string]bool{}
			}
			c.open = append(c.open, d)
		}
	}
	n := min(ch.Closed, len(c.open))
	if ch.Last {
		n = len(c.open)
	}
	for range n {
		c.closeDir()
	}
}

// closeDir moves the innermost directory being listed to closed (with
// --delete; else it is forgotten).
func (c *chunkChanges) closeDir() {
	last := len(c.open) - 1
	if c.del {
		c.closed = append(c.closed, c.open[last])
	}
	c.open[last] = listedDir{}
	c.open = c.open[:last]
}
