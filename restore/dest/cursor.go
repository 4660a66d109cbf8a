package dest

import (
	"context"
	"fmt"
	"path"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/treewalk"
)

// dirCursor keeps the descriptor of the directory last resolved, so that a
// pass over a file list (which groups entries by directory) opens each
// directory once. Not safe for concurrent use.
type dirCursor struct {
	w   *Writer
	dir string
	fd  int
	// made holds the directories this pass created (Plan's mkdir): until
	// the pass ends, nothing of the list is in them yet.
	made map[string]bool
}

// markMade records that the pass created the directory rel.
func (c *dirCursor) markMade(rel string) {
	if c.made == nil {
		c.made = map[string]bool{}
	}
	c.made[rel] = true
}

// inMade reports whether the cursor's current directory (the last
// parent's) is one the pass created: a name in it needs no lookup to be
// known missing, unless two entries of the list share it.
func (c *dirCursor) inMade() bool { return c.made[c.dir] }

// parent returns the descriptor of rel's directory (owned by the cursor)
// and rel's last component.
func (c *dirCursor) parent(rel string) (int, string, error) {
	dir, base := path.Split(rel)
	if dir == "" {
		dir = "."
	} else {
		dir = dir[:len(dir)-1]
	}
	if c.fd > 0 && c.dir == dir {
		return c.fd, base, nil
	}
	c.close()
	fd, err := openDirBeneath(c.w.rootFd, dir)
	if err != nil {
		return -1, "", fmt.Errorf("open directory %s: %w", dir, err)
	}
	c.dir, c.fd = dir, fd
	return fd, base, nil
}

func (c *dirCursor) close() {
	if c.fd > 0 {
		unix.Close(c.fd)
	}
	c.fd, c.dir = 0, ""
}

// pass is one walk of the Writer over entries, a file list, in list
// order (Plan, Finish, FixRsync, RsyncQuickCheck, Itemize): it calls fn
// with each entry's index, the entry and a directory cursor that the pass
// shares and closes at its end, and records each error fn returns as that
// entry's PathError. Every 1024 entries it checks ctx, and returns
// ctx.Err() with the errors so far when ctx has ended. Not safe for
// concurrent use of one cursor; fn runs on the caller's goroutine.
func (w *Writer) pass(ctx context.Context, entries []treewalk.Entry, fn func(cur *dirCursor, i int, e *treewalk.Entry) error) ([]*treewalk.PathError, error) {
	var errs []*treewalk.PathError
	cur := &dirCursor{w: w}
	defer cur.close()
	for i := range entries {
		if i%1024 == 0 && ctx.Err() != nil {
			return errs, ctx.Err()
		}
		e := &entries[i]
		if err := fn(cur, i, e); err != nil {
			errs = append(errs, &treewalk.PathError{Path: e.Path, Err: err})
		}
	}
	return errs, nil
}
