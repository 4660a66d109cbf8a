package restore

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// Entries the rsync method holds back: gokrazy/rsync's receiver ends its
// whole run at the first entry it cannot write, and a stock rsync sender's
// error message about one entry ends it too, so what would fail is found
// in the file list before the run, kept out of the transfer (the sender is
// sent an exclude rule for it) and reported as one error each; the rest of
// the tree is restored. With the agent, the files held for their name's
// length are then restored through the safe writer from its raw sender
// (fetchHeld).

// rsyncMaxPathBytes is the longest path, relative to SRC, that an rsync
// sender puts in its file list: rsync's MAXPATHLEN (4,096) less its NUL. A
// longer one makes stock rsync's sender say "filename overflows max-path
// len" and skip it, and gokrazy's receiver refuses it.
const rsyncMaxPathBytes = 4095

// gokrazyMaxNameBytes is the longest name of a regular file that
// gokrazy/rsync's receiver can write: it writes each file as ".NAME"
// followed by a random number of up to 19 digits in the same directory,
// and a name has at most 255 bytes (NAME_MAX).
const gokrazyMaxNameBytes = 255 - 1 - 19

// errRsyncPathTooLong and errRsyncNameTooLong are the errors of the
// entries held back for their length; both say which method restores them.
var (
	errRsyncPathTooLong = errors.New("path longer than rsync's limit of 4,095 bytes (MAXPATHLEN): not restored by --method rsync; --method raw or tar restores it")
	errRsyncNameTooLong = errors.New("name longer than 235 bytes, too long for gokrazy/rsync's temporary name (a dot, the name and up to 19 digits, at most 255 bytes): not restored by --method rsync; --method raw or tar restores it")
)

// rsyncLongName reports whether e is a regular file whose name is too
// long for gokrazy's temporary names. gokrazy gets no -H, so a hardlink's
// every name comes to it as a file.
func rsyncLongName(e *treewalk.Entry) bool {
	return e.Kind == treewalk.KindFile && len(path.Base(e.Path)) > gokrazyMaxNameBytes
}

// rsyncHeldByLength returns the entries of list that gokrazy cannot
// restore for the length of their path or name, each with its error, by
// path. Hardlink followers with a long name are not held: Finish links
// them, and the safe writer's temporary names are short.
func rsyncHeldByLength(entries []treewalk.Entry) map[string]error {
	held := map[string]error{}
	for i := range entries {
		e := &entries[i]
		switch {
		case len(e.Path) > rsyncMaxPathBytes:
			held[e.Path] = fmt.Errorf("%w (%d bytes)", errRsyncPathTooLong, len(e.Path))
		case rsyncLongName(e) && e.HasData():
			held[e.Path] = fmt.Errorf("%w (%d bytes)", errRsyncNameTooLong, len(path.Base(e.Path)))
		}
	}
	return held
}

// rsyncExcludeArgs returns the client options that keep out of the
// sender's file list the regular files held and those with a long name:
// one --exclude rule each, anchored at the transfer's root, its wildcards
// escaped (rsync reads a backslash as an escape only in a pattern that has
// a wildcard). Paths over rsyncMaxPathBytes need none (the sender skips
// them itself).
func rsyncExcludeArgs(entries []treewalk.Entry, held map[string]error) []string {
	var args []string
	for i := range entries {
		e := &entries[i]
		if e.Kind != treewalk.KindFile || len(e.Path) > rsyncMaxPathBytes || held[e.Path] == nil && !rsyncLongName(e) {
			continue
		}
		args = append(args, "--exclude=/"+rsyncLiteralPattern(e.Path))
	}
	return args
}

// fetchHeld restores through w, from the agent's raw sender (open), the
// held files that only their name's length kept from gokrazy, and takes
// from held those it restored; the others keep their error. Without the
// agent (open is nil) it does nothing. Each file is written as the raw
// method writes it: complete, with its metadata, under its final name.
// The error is run-fatal (the stream broke, ctx ended).
func fetchHeld(ctx context.Context, open func(context.Context) (*transfer.Conn, error), w *dest.Writer, entries []treewalk.Entry, held map[string]error) (files int, bytes int64, err error) {
	if open == nil {
		return 0, 0, nil
	}
	var items []transfer.Item
	for i := range entries {
		if e := &entries[i]; errors.Is(held[e.Path], errRsyncNameTooLong) {
			items = append(items, transfer.Item{Entry: *e, Length: e.Size})
		}
	}
	if len(items) == 0 {
		return 0, 0, nil
	}
	c, err := open(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("the files with long names, from the agent: %w", err)
	}
	defer c.Close()
	var batches [][]transfer.Item
	for len(items) > 0 {
		n := min(len(items), fetchBatch)
		batches, items = append(batches, items[:n]), items[n:]
	}
	// Two requests in flight: the agent reads the next batch while this
	// side writes the current one.
	sent := 0
	for ; sent < min(2, len(batches)); sent++ {
		if err := c.SendRead(batches[sent]); err != nil {
			return files, bytes, err
		}
	}
	for k, batch := range batches {
		errs, err := c.RecvRead(ctx, batch, w)
		if err != nil {
			return files, bytes, err
		}
		if sent < len(batches) && sent == k+2 {
			if err := c.SendRead(batches[sent]); err != nil {
				return files, bytes, err
			}
			sent++
		}
		for i, ierr := range errs {
			e := &batch[i].Entry
			if ierr != nil {
				held[e.Path] = ierr
				continue
			}
			delete(held, e.Path)
			files++
			bytes += e.Size
		}
	}
	return files, bytes, nil
}

// fetchBatch is how many files fetchHeld asks for at once.
const fetchBatch = 256

// rsyncLiteralPattern is an rsync filter pattern that matches p and
// nothing else.
func rsyncLiteralPattern(p string) string {
	if !strings.ContainsAny(p, "*?[") {
		return p
	}
	var b strings.Builder
	for _, c := range []byte(p) {
		if c == '*' || c == '?' || c == '[' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

// withoutHeld returns the entries not in held (entries itself when held is
// empty).
func withoutHeld(entries []treewalk.Entry, held map[string]error) []treewalk.Entry {
	if len(held) == 0 {
		return entries
	}
	kept := make([]treewalk.Entry, 0, len(entries)-len(held))
	for i := range entries {
		if held[entries[i].Path] == nil {
			kept = append(kept, entries[i])
		}
	}
	return kept
}
