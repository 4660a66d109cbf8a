package treewalk

import (
	"container/heap"
	"context"
	"fmt"
	"os"
	"path"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// The merge of several parts as chunks (WalkPartsChunks): each part's
// walk is in tree order already, so the merged list is a k-way merge of
// the parts' walks, taken as they go, ties (one path given by several
// parts) broken as WalkParts breaks them (the first part given wins,
// except that a directory wins over a non-directory, and the contents of
// every directory given at a path are listed). A part is a cursor: first
// the paths it lists itself (its implied root, its implied directories,
// the part), each looked up only when the merge reaches it; then, when
// the part is a directory, its contents, walked on a goroutine of its own
// from the moment the merge has reached the part, a few chunks ahead. So
// the merge holds the cursors of every part (their next path), and walks
// only the parts whose directory holds the merge's place: its memory
// grows with the number of parts and the depth of the tree, not with the
// size of the tree. Hardlinks are linked by the merge, in merged order
// (the parts' walks only note the inodes of entries with more than one
// link): each group is led by its first member in the list, as WalkParts
// leads it, and only the inodes with more than one link are remembered.

// mergeChunk is a chunk of one part's walk of a directory's contents:
// entries in tree order, the inode of each that has more than one link
// (walker.inodes), the walk's errors; err ends the walk (cancellation).
type mergeChunk struct {
	entries []Entry
	inodes  []devIno
	errors  []*PathError
	err     error
}

// mergeStep is a path a part lists itself: its implied root, an implied
// directory, or the part's own entry.
type mergeStep struct {
	path string
	kind mergeStepKind
}

type mergeStepKind int

const (
	stepImpliedRoot mergeStepKind = iota // the Base as ".", listed first of all
	stepImpliedDir                       // a directory between the Base and Rel
	stepPart                             // Rel itself, then its contents
)

// mergeCursor is one part in the merge: its next path (key), from its
// steps, then from the walk of its contents (sub).
type mergeCursor struct {
	order int // the part's place in the order given: ties go to the first
	part  Part
	steps []mergeStep
	key   string

	// The walk of the part's contents, once started: the chunk being
	// taken and the place in it.
	sub chan mergeChunk
	cur mergeChunk
	i   int
}

// cursorHeap orders the cursors by their next path in tree order, then
// by their part's place.
type cursorHeap []*mergeCursor

func (h cursorHeap) Len() int { return len(h) }
func (h cursorHeap) Less(i, j int) bool {
	if c := treeCompare(h[i].key, h[j].key); c != 0 {
		return c < 0
	}
	return h[i].order < h[j].order
}
func (h cursorHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)   { *h = append(*h, x.(*mergeCursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return c
}

// partsMerge is the state of one merge of several parts.
type partsMerge struct {
	ctx    context.Context
	filter *Filter
	// w looks up the paths the parts list themselves (merge mode), on the
	// merge's goroutine.
	w     *walker
	bases map[*os.Root]*os.File // each part's Base, opened once
	subs  sync.WaitGroup        // the walks of the parts' contents

	out     Chunk
	errs    []*PathError // the errors met since the last chunk
	extra   []*PathError // the selection's, with the first chunk
	first   bool         // no chunk emitted yet
	leaders map[devIno]string
	emit    func(Chunk) error
}

// mergeParts emits the merge of parts as chunks of ChunkEntries entries
// (the last one Last), extra with the first chunk; see the comment at the
// top of this file. Its error is a part's that cannot be walked at all (a
// bad Rel, a Base that cannot be opened), emit's or ctx's.
func mergeParts(ctx context.Context, parts []Part, f *Filter, extra []*PathError, emit func(Chunk) error) error {
	ctx, cancel := context.WithCancel(ctx)
	m := &partsMerge{ctx: ctx, filter: f, w: newWalker(f), bases: map[*os.Root]*os.File{},
		extra: extra, first: true, leaders: map[devIno]string{}, emit: emit}
	m.w.merge = true
	defer func() {
		cancel()
		m.subs.Wait() // before the bases they walk beneath are closed
		for _, d := range m.bases {
			d.Close()
		}
	}()
	h, err := cursors(parts)
	if err != nil {
		return err
	}
	if h, err = m.precheck(h); err != nil {
		return err
	}
	heap.Init(&h)
	var tied []*mergeCursor
	var entries []Entry
	var inodes []devIno
	var listed []bool
	for h.Len() > 0 {
		tied = append(tied[:0], heap.Pop(&h).(*mergeCursor))
		for h.Len() > 0 && h[0].key == tied[0].key {
			tied = append(tied, heap.Pop(&h).(*mergeCursor))
		}
		// Each tied cursor's entry, in the parts' order: the first
		// directory among them wins, else the first.
		entries, inodes, listed = entries[:0], inodes[:0], listed[:0]
		win := -1
		for _, c := range tied {
			e, ino, ok, err := m.take(c)
			if err != nil {
				return err
			}
			entries, inodes, listed = append(entries, e), append(inodes, ino), append(listed, ok)
			if ok && (win < 0 || entries[win].Kind != KindDir && e.Kind == KindDir) {
				win = len(entries) - 1
			}
		}
		if win >= 0 {
			if err := m.add(entries[win], inodes[win]); err != nil {
				return err
			}
		}
		for k, c := range tied {
			more, err := m.advance(c, &entries[k], listed[k])
			if err != nil {
				return err
			}
			if more {
				heap.Push(&h, c)
			}
		}
	}
	return m.flush(true)
}

// cursors returns the parts' cursors: each part's own paths, the first
// part that gives the root (Rel "." or ImpliesRoot) giving ".", a part at
// or below one already given from the same Base listing nothing of its
// own (as WalkParts).
func cursors(parts []Part) (cursorHeap, error) {
	type givenPart struct {
		base *os.Root
		rel  string
	}
	var given []givenPart
	rootGiven := false
	var h cursorHeap
	for i, pt := range parts {
		if err := ValidPath(pt.Rel); err != nil {
			return nil, fmt.Errorf("walk %s: %w", pt.Rel, err)
		}
		c := &mergeCursor{order: i, part: pt}
		if !rootGiven && pt.ImpliesRoot && pt.Rel != "." {
			c.steps = append(c.steps, mergeStep{".", stepImpliedRoot})
		}
		rootGiven = rootGiven || pt.Rel == "." || pt.ImpliesRoot
		if !slices.ContainsFunc(given, func(q givenPart) bool { return q.base == pt.Base && IsUnder(pt.Rel, q.rel) }) {
			given = append(given, givenPart{pt.Base, pt.Rel})
			var dirs []string
			if pt.Rel != "." {
				for d := path.Dir(pt.Rel); d != "."; d = path.Dir(d) {
					dirs = append(dirs, d)
				}
			}
			for _, d := range slices.Backward(dirs) {
				c.steps = append(c.steps, mergeStep{d, stepImpliedDir})
			}
			c.steps = append(c.steps, mergeStep{pt.Rel, stepPart})
		}
		if len(c.steps) > 0 {
			c.key = c.steps[0].path
			h = append(h, c)
		}
	}
	return h, nil
}

// precheck looks up, before the merge starts, the paths each part lists
// itself beneath its Base (its implied directories, the part), as the
// merge will: a part that cannot be listed (missing, below a file) is an
// error of the list known before the walk, with the first chunk, as
// rsync knows its arguments' errors before it deletes anything; that
// part then stops before the path in error. It returns the cursors that
// still list something; its error is a Base's that cannot be opened.
func (m *partsMerge) precheck(h cursorHeap) (cursorHeap, error) {
	kept := h[:0]
	for _, c := range h {
		d, err := m.base(c.part.Base)
		if err != nil {
			return nil, err
		}
		m.w.rootFd = int(d.Fd())
		for k, step := range c.steps {
			if step.kind == stepImpliedRoot || step.path == "." {
				continue
			}
			st, pfd, err := m.w.lstat(step.path)
			if err == nil {
				unix.Close(pfd)
				if step.kind == stepImpliedDir && st.Mode&unix.S_IFMT != unix.S_IFDIR {
					err = fmt.Errorf("implied directory of %s is not a directory", c.part.Rel)
				}
			}
			if err != nil {
				m.fail(step.path, err)
				c.steps = c.steps[:k]
				break
			}
		}
		m.w.rootFd = -1
		if len(c.steps) > 0 {
			kept = append(kept, c)
		}
	}
	clear(h[len(kept):])
	return kept, nil
}

// base returns the open directory of b.
func (m *partsMerge) base(b *os.Root) (*os.File, error) {
	if d, ok := m.bases[b]; ok {
		return d, nil
	}
	d, err := b.Open(".")
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", b.Name(), err)
	}
	m.bases[b] = d
	return d, nil
}

// take returns c's entry at its key and its inode (walker.inodes); ok
// is false when c lists nothing there (it could not be read: an error of
// the list; or the filter excludes it). err ends the merge.
func (m *partsMerge) take(c *mergeCursor) (e Entry, ino devIno, ok bool, err error) {
	if c.sub != nil {
		return c.cur.entries[c.i], c.cur.inodes[c.i], true, nil
	}
	d, err := m.base(c.part.Base)
	if err != nil {
		return Entry{}, devIno{}, false, err
	}
	w := m.w
	w.rootFd = int(d.Fd())
	defer func() { w.rootFd = -1 }()
	step := c.steps[0]
	var st unix.Stat_t
	pfd := -1
	switch {
	case step.path == ".":
		if err := unix.Fstat(w.rootFd, &st); err != nil {
			m.fail(".", err)
			return Entry{}, devIno{}, false, nil
		}
	default:
		st, pfd, err = w.lstat(step.path)
		if err == nil && step.kind == stepImpliedDir && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			unix.Close(pfd)
			err = fmt.Errorf("implied directory of %s is not a directory", c.part.Rel)
		}
		if err != nil {
			m.fail(step.path, err)
			return Entry{}, devIno{}, false, nil
		}
		defer unix.Close(pfd)
		if step.kind == stepPart && w.filter.Excluded(step.path, st.Mode&unix.S_IFMT == unix.S_IFDIR) {
			return Entry{}, devIno{}, false, nil
		}
	}
	if err := w.add(step.path, &st, pfd); err != nil {
		m.fail(step.path, err)
		return Entry{}, devIno{}, false, nil
	}
	if len(w.list.Entries) == 0 { // a socket: skipped as Walk skips it
		return Entry{}, devIno{}, false, nil
	}
	e, ino = w.list.Entries[0], w.inodes[0]
	w.list.Entries, w.inodes = w.list.Entries[:0], w.inodes[:0]
	return e, ino, true, nil
}

// fail notes an error of the list.
func (m *partsMerge) fail(p string, err error) {
	m.errs = append(m.errs, &PathError{Path: p, Err: err})
}

// advance moves c past its key, e being what c listed there if listed:
// to its next step, to the walk of its contents (started when
// the part is a directory) or to the walk's next entry. It reports
// whether c has more; err ends the merge.
func (m *partsMerge) advance(c *mergeCursor, e *Entry, listed bool) (bool, error) {
	if c.sub == nil {
		step := c.steps[0]
		c.steps = c.steps[1:]
		switch {
		case !listed && step.kind != stepImpliedRoot:
			// A part stops at what it cannot list (as WalkParts);
			// a root that cannot be listed does not stop it.
			return false, nil
		case len(c.steps) > 0:
			c.key = c.steps[0].path
			return true, nil
		case step.kind != stepPart || !listed || e.Kind != KindDir:
			return false, nil
		}
		m.walk(c, step.path)
	} else {
		c.i++
	}
	for c.i >= len(c.cur.entries) {
		var mc mergeChunk
		var open bool
		select {
		case mc, open = <-c.sub:
		case <-m.ctx.Done():
			return false, m.ctx.Err()
		}
		if !open {
			c.cur = mergeChunk{}
			return false, nil
		}
		if mc.err != nil {
			return false, mc.err
		}
		m.errs = append(m.errs, mc.errors...)
		c.cur, c.i = mc, 0
	}
	c.key = c.cur.entries[c.i].Path
	return true, nil
}

// walk starts the walk of the contents of c's directory p, a few chunks
// ahead of the merge.
func (m *partsMerge) walk(c *mergeCursor, p string) {
	ch := make(chan mergeChunk, 1)
	c.sub, c.cur, c.i = ch, mergeChunk{}, 0
	d := m.bases[c.part.Base] // opened by take
	w := newWalker(m.filter)
	w.merge, w.rootFd = true, int(d.Fd())
	ctx := m.ctx
	w.emitMerge = func(mc mergeChunk) error {
		select {
		case ch <- mc:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m.subs.Add(1)
	go func() {
		defer m.subs.Done()
		defer close(ch)
		err := w.dir(ctx, p)
		if err == nil {
			err = w.flush(true)
		}
		if err != nil && ctx.Err() == nil {
			select {
			case ch <- mergeChunk{err: err}:
			case <-ctx.Done():
			}
		}
	}()
}

// add appends e, the merged list's next entry, to the chunk being made,
// linking it to the first entry of its inode (ino) in the list, which
// leads its group; a follower file carries no extended metadata, as
// Walk lists it (its leader has the inode's).
func (m *partsMerge) add(e Entry, ino devIno) error {
	if ino != (devIno{}) {
		if lead, ok := m.leaders[ino]; ok {
			e.LinkTo = lead
			if e.Kind == KindFile {
				e.Xattrs, e.ACL, e.DefaultACL = nil, nil, nil
			}
		} else {
			m.leaders[ino] = e.Path
			m.out.Leaders = append(m.out.Leaders, len(m.out.Entries))
		}
	}
	m.out.Entries = append(m.out.Entries, e)
	return m.flush(false)
}

// flush emits the chunk made so far when it has ChunkEntries entries, or
// with last, with the errors met so far (and the selection's with the
// first).
func (m *partsMerge) flush(last bool) error {
	if !last && len(m.out.Entries) < max(ChunkEntries, 1) {
		return nil
	}
	c := m.out
	c.Errors, c.Last = m.errs, last
	if m.first {
		c.Errors = append(c.Errors, m.extra...)
		m.first = false
	}
	m.out, m.errs = Chunk{}, nil
	return m.emit(c)
}
