package restore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/treewalk"
)

// Report is the outcome of a restore, printed as the summary line or, with
// --json, as one JSON object.
type Report struct {
	// Method is the restore method that ran ("raw", "tar", "rsync"; with
	// --method auto, the one auto chose).
	Method string `json:"method"`
	// MethodReason says why auto chose Method; empty for a method the user
	// named.
	MethodReason string `json:"method_reason,omitempty"`
	// Compression is the codec and level, in --compress form ("zstd:1").
	Compression string `json:"compression"`
	// Jobs is the number of parallel streams: -j's, or with --jobs auto
	// the streams the raw method opened.
	Jobs int `json:"jobs"`
	// JobsReason says why --jobs auto opened no more streams than Jobs
	// ("max-jobs reached", "throughput stopped growing", "the remote
	// refused more sessions"); absent when the data was done first, or
	// with a fixed -j.
	JobsReason string `json:"jobs_reason,omitempty"`
	// Codecs is what each codec's frames carried from the sending side
	// (raw method over a network; one object per codec, in the order
	// first used): with --compress auto, what it chose.
	Codecs []CodecReport `json:"codecs,omitempty"`
	// LinkMiBPerSec is the link's throughput over all streams (MiB/s):
	// in a pull, the rate the client received at while the link was the
	// bottleneck (data waited for it); otherwise, and in a push, the
	// sending side's wire bytes per second spent writing them. Far above
	// the wire rate, it says the link was never the bottleneck. Absent
	// when not measured.
	LinkMiBPerSec float64 `json:"link_mib_per_s,omitempty"`
	// Files is the number of regular files whose data was written (hardlink
	// followers and up-to-date files not included).
	Files int `json:"files"`
	// Dirs, Symlinks and Hardlinks count those entries of the restored set
	// (the root directory not included in Dirs; Hardlinks counts the
	// followers of every kind, a hardlinked symlink's follower there and
	// not in Symlinks).
	Dirs      int `json:"dirs"`
	Symlinks  int `json:"symlinks"`
	Hardlinks int `json:"hardlinks"`
	// Bytes is the payload of the Files, in bytes: the data of the regular
	// files put in place under their final names (a delta file counts its
	// whole size). Data written for a file that did not complete (a split
	// file with blocks missing, an interrupted run) is not counted.
	Bytes int64 `json:"bytes"`
	// WireBytes is what crossed the network in both directions, in bytes
	// (handshakes, file list and frame headers included; 0 when local).
	WireBytes int64 `json:"wire_bytes"`
	// Skipped is the number of regular files the quick check found up to
	// date.
	Skipped int `json:"skipped"`
	// DeltaFiles is the number of the Files whose data was sent as a delta
	// against the copy DST already held (raw method over a network).
	DeltaFiles int `json:"delta_files"`
	// Seconds is the wall time of the whole restore.
	Seconds float64 `json:"seconds"`
	// Errors lists the entries that could not be restored.
	Errors []FileError `json:"errors"`

	// Selection (--delete, --dry-run, --itemize-changes).
	//
	// Deleted is the number of entries --delete removed from DST (on a
	// dry run, would remove: its "*deleting" lines).
	Deleted int `json:"deleted"`
	// DryRun says that nothing was written (--dry-run): Changes is what
	// a restore would do, and the counts above are of the file list.
	DryRun bool `json:"dry_run,omitempty"`
	// Changes are the itemized changes (--dry-run, --itemize-changes), in
	// rsync's --itemize-changes format; nil when not asked for.
	Changes []string `json:"changes,omitempty"`
	// ChangeEntries are the same changes as objects, one per line of
	// Changes in its order, with the source entry's size and mtime: what
	// a dry run needs to choose between versions. nil when Changes is.
	ChangeEntries []Change `json:"change_entries,omitempty"`
}

// Change is one itemized change with the entry it concerns.
type Change struct {
	// Path is the entry's path under DST, exact (not escaped), without
	// the "/" a directory's line ends with; "." is DST itself.
	Path string `json:"path"`
	// Itemize is the line's update letters ("<f+++++++++", ">f.st......",
	// "*deleting").
	Itemize string `json:"itemize"`
	// Kind is the source entry's kind ("file", "dir", "symlink"...); ""
	// for a deletion, whose entry is on DST only.
	Kind string `json:"kind,omitempty"`
	// Size is the source entry's size in bytes (a regular file's; 0 for
	// other kinds), nil for a deletion; MtimeNs its mtime in nanoseconds
	// since the epoch and Mtime the same in RFC 3339 form (UTC), both
	// zero for a deletion.
	Size    *int64 `json:"size,omitempty"`
	MtimeNs int64  `json:"mtime_ns,omitempty"`
	Mtime   string `json:"mtime,omitempty"`
	// LinkTarget is a symlink's target, LinkTo a hardlink's leader.
	LinkTarget string `json:"link_target,omitempty"`
	LinkTo     string `json:"hardlink_to,omitempty"`
}

// changeEntries pairs each itemized line with the entry of the file list
// it names, by the name in the line (Report.Changes holds names exact;
// the command escapes them only when it prints them):
// "./" for the root, a directory's with "/", a symlink's " -> TARGET", a
// hardlink's " => LEADER" or none. A deletion, or a line whose name
// matches no entry, has only its path and letters.
func changeEntries(lines []string, entries []treewalk.Entry) []Change {
	byName := make(map[string]int, len(entries))
	for i := range entries {
		e := &entries[i]
		switch {
		case e.Path == ".":
			byName["./"] = i
		case e.IsHardlink(): // of any kind: its line names the leader
			byName[e.Path+" => "+e.LinkTo] = i
			byName[e.Path] = i
		case e.Kind == treewalk.KindDir:
			byName[e.Path+"/"] = i
		case e.Kind == treewalk.KindSymlink:
			byName[e.Path+" -> "+e.LinkTarget] = i
		default:
			byName[e.Path] = i
		}
	}
	out := make([]Change, 0, len(lines))
	for _, l := range lines {
		letters, name, _ := strings.Cut(l, " ")
		name = strings.TrimLeft(name, " ") // "*deleting   NAME"
		i, ok := byName[name]
		if !ok || letters == "*deleting" {
			out = append(out, Change{Path: strings.TrimSuffix(name, "/"), Itemize: letters})
			continue
		}
		e := &entries[i]
		size := e.Size
		out = append(out, Change{Path: e.Path, Itemize: letters, Kind: e.Kind.String(), Size: &size,
			MtimeNs: e.MtimeNs, Mtime: time.Unix(0, e.MtimeNs).UTC().Format(time.RFC3339Nano),
			LinkTarget: e.LinkTarget, LinkTo: e.LinkTo})
	}
	return out
}

// FileError is one entry that failed.
type FileError struct {
	// Path is relative to the restore's root, slash-separated.
	Path string `json:"path"`
	// Error says what went wrong.
	Error string `json:"error"`
}

// addList books a file list: its walk errors, and its directories (the
// root not included), symlinks and hardlinks. Not safe for concurrent use.
func (r *Report) addList(list treewalk.List) {
	for _, pe := range list.Errors {
		r.addError(pe.Path, pe.Err)
	}
	for i := range list.Entries {
		switch e := &list.Entries[i]; {
		case e.Kind == treewalk.KindDir && e.Path != ".":
			r.Dirs++
		case e.IsHardlink(): // of any kind, a hardlinked symlink too
			r.Hardlinks++
		case e.Kind == treewalk.KindSymlink:
			r.Symlinks++
		}
	}
}

// addError records a failed entry, unless err is context.Canceled: a
// cancelled item failed because the run ended, which Run's error says, not
// because of the file. Not safe for concurrent use (the streams go through
// tracker, which holds its lock).
func (r *Report) addError(path string, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	r.Errors = append(r.Errors, FileError{Path: path, Error: err.Error()})
}

// Summary returns the one-line human summary: counts, payload and wire
// bytes in MB (10^6 bytes), seconds, and the MB/s of the payload and of
// the wire (what --bwlimit limits).
func (r *Report) Summary() string {
	if r.DryRun {
		del, other := dest.ItemizedChanges(r.Changes)
		entries := func(n int) string { return strings.Replace(count(n, "entry"), "entrys", "entries", 1) }
		s := fmt.Sprintf("dry run, nothing written: %s to create or update, %s to delete [%s]", entries(other), entries(del), r.Method)
		if n := len(r.Errors); n > 0 {
			s += "; " + count(n, "error")
		}
		return s
	}
	rate, wireRate := 0.0, 0.0
	if r.Seconds > 0 {
		rate = float64(r.Bytes) / 1e6 / r.Seconds
		wireRate = float64(r.WireBytes) / 1e6 / r.Seconds
	}
	s := fmt.Sprintf("restored %s (%d up to date), %s, %s, %s: %.1f MB payload, %.1f MB on the wire, %.2f s, %.1f MB/s payload, %.1f MB/s on the wire [%s, %s, %s]",
		count(r.Files, "file"), r.Skipped, count(r.Dirs, "dir"), count(r.Symlinks, "symlink"), count(r.Hardlinks, "hardlink"),
		float64(r.Bytes)/1e6, float64(r.WireBytes)/1e6, r.Seconds, rate, wireRate, r.Method, r.Compression, count(r.Jobs, "job"))
	if c := r.codecsSummary(); c != "" {
		s += "; " + c
	}
	if r.Deleted > 0 {
		s += fmt.Sprintf("; %d deleted", r.Deleted)
	}
	if n := len(r.Errors); n > 0 {
		s += "; " + count(n, "error")
	}
	return s
}

// count formats n with noun, plural when n != 1 ("1 file", "2 files").
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
