package transfer

import (
	"context"
	"errors"

	"github.com/restoresync/restoresync/treewalk"
)

// Deleter is a Sink that can remove what a file list lacks (--delete);
// restore's Writer is one.
type Deleter interface {
	// Delete removes, within the restored scope, what the destination has
	// and entries lack. It returns the deleted paths, the per-entry
	// errors, and an error that ends the run.
	Delete(ctx context.Context, entries []treewalk.Entry) ([]string, []*treewalk.PathError, error)
}

// Itemizer is a Sink that can say what a restore of a file list would
// change (--dry-run, --itemize-changes); restore's Writer is one.
type Itemizer interface {
	// Itemize returns one line per change, in rsync's --itemize-changes
	// format, deletions included when del is set, and the entries a
	// restore could not change (per-entry errors). It writes nothing; the
	// error is for cancellation.
	Itemize(ctx context.Context, entries []treewalk.Entry, del bool) ([]string, []*treewalk.PathError, error)
}

// Delete asks a receiver to delete what the list last sent with Plan
// lacks (push, --delete). It returns the deleted paths and per-entry
// errors; the error ends the run.
func (c *Conn) Delete(ctx context.Context) (_ []string, _ []*treewalk.PathError, err error) {
	defer c.watch(ctx)(&err)
	c.pending.Add(1) // the idle timeout watches the wait for the reply
	defer c.pending.Add(-1)
	c.enc.byte(msgDelete)
	if err := c.enc.flush(); err != nil {
		return nil, nil, c.fail(err)
	}
	if err := c.dec.status(); err != nil {
		return nil, nil, c.fail(err)
	}
	deleted, err := c.dec.strings()
	if err != nil {
		return nil, nil, c.fail(err)
	}
	errs, err := c.dec.pathErrors()
	if err != nil {
		return nil, nil, c.fail(err)
	}
	return deleted, errs, nil
}

// Itemize asks a receiver what restoring entries would change (push,
// --dry-run and --itemize-changes), deletions included with del, and which
// entries it could not change (per-entry errors). The receiver writes
// nothing; the error ends the run.
func (c *Conn) Itemize(ctx context.Context, entries []treewalk.Entry, del bool) (_ []string, _ []*treewalk.PathError, err error) {
	defer c.watch(ctx)(&err)
	c.pending.Add(1) // the idle timeout watches the wait for the reply
	defer c.pending.Add(-1)
	c.enc.byte(msgItemize)
	c.enc.bool(del)
	c.enc.entries(entries)
	if err := c.enc.flush(); err != nil {
		return nil, nil, c.fail(err)
	}
	if err := c.dec.status(); err != nil {
		return nil, nil, c.fail(err)
	}
	lines, err := c.dec.strings()
	if err != nil {
		return nil, nil, c.fail(err)
	}
	errs, err := c.dec.pathErrors()
	if err != nil {
		return nil, nil, c.fail(err)
	}
	return lines, errs, nil
}

// serveDelete answers msgDelete on the receiver.
func (s *server) serveDelete(ctx context.Context) error {
	if s.planned == nil {
		return errors.New("delete before a plan")
	}
	sink, err := s.openSink(ctx)
	var deleted []string
	var errs []*treewalk.PathError
	if err == nil {
		if d, ok := sink.(Deleter); ok {
			deleted, errs, err = d.Delete(ctx, s.planned)
		} else {
			err = errNoSelection
		}
	}
	s.enc.status(err)
	if err == nil {
		s.enc.strings(deleted)
		s.enc.pathErrors(errs)
	}
	return nil
}

// serveItemize answers msgItemize on the receiver.
func (s *server) serveItemize(ctx context.Context) error {
	del, err := s.dec.bool()
	if err != nil {
		return err
	}
	entries, err := s.dec.entries()
	if err != nil {
		return err
	}
	sink, err := s.openSink(ctx)
	var lines []string
	var errs []*treewalk.PathError
	if err == nil {
		if it, ok := sink.(Itemizer); ok {
			lines, errs, err = it.Itemize(ctx, entries, del)
		} else {
			err = errNoSelection
		}
	}
	s.enc.status(err)
	if err == nil {
		s.enc.strings(lines)
		s.enc.pathErrors(errs)
	}
	return nil
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
