package restore

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/restoresync/restoresync/treewalk"
)

// Entries the rsync method holds back: gokrazy/rsync's receiver ends its
// whole run at the first entry it cannot write, and a stock rsync sender's
// error message about one entry ends it too, so what would fail is found
// in the file list before the run, kept out of the transfer (the sender is
// sent an exclude rule for it) and reported as one error each; the rest of
// the tree is restored.

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

// rsyncHeldByLength returns the entries of list that the rsync method
// cannot restore for the length of their path or name, each with its
// error, by path.
func rsyncHeldByLength(entries []treewalk.Entry) map[string]error {
	held := map[string]error{}
	for i := range entries {
		e := &entries[i]
		switch {
		case len(e.Path) > rsyncMaxPathBytes:
			held[e.Path] = fmt.Errorf("%w (%d bytes)", errRsyncPathTooLong, len(e.Path))
		case e.Kind == treewalk.KindFile && len(path.Base(e.Path)) > gokrazyMaxNameBytes:
			held[e.Path] = fmt.Errorf("%w (%d bytes)", errRsyncNameTooLong, len(path.Base(e.Path)))
		}
	}
	return held
}

// rsyncExcludeArgs returns the client options that keep the held regular
// files out of the sender's file list: one --exclude rule each, anchored
// at the transfer's root, its wildcards escaped (rsync reads a backslash
// as an escape only in a pattern that has a wildcard). Paths over
// rsyncMaxPathBytes need none (the sender skips them itself).
func rsyncExcludeArgs(entries []treewalk.Entry, held map[string]error) []string {
	var args []string
	for i := range entries {
		e := &entries[i]
		if held[e.Path] == nil || e.Kind != treewalk.KindFile || len(e.Path) > rsyncMaxPathBytes {
			continue
		}
		args = append(args, "--exclude=/"+rsyncLiteralPattern(e.Path))
	}
	return args
}

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
