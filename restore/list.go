package restore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
	"github.com/restoresync/restoresync/treewalk"
)

// Listing a source without restoring it ('restoresync ls'). Each PATH is
// listed as rsync --list-only lists a single source:
//
//   - PATH names a directory's contents (a trailing slash, ".", "/"): the
//     directory as "." and its entries; with Recursive, everything below;
//   - otherwise PATH is the entry itself, under its base name, and with
//     Recursive everything below it as NAME/...;
//   - Directory lists the entry PATH names and nothing below it (ls -d);
//   - a PATH with a pattern character ('*', '?', '[') is expanded on the
//     sender (the agent's RoleGlob, beneath the tree it serves; locally
//     filepath.Glob), component by component with path.Match, and each
//     match is listed as a PATH of its own; a pattern that matches nothing
//     is listed as the name it is.
//
// The sender applies the depth as a filter rule before the user's Filters,
// so a directory below the depth is not walked at all.

// ListOptions configure List. Paths is required; every other zero value is
// the documented default.
type ListOptions struct {
	// Paths are the locations to list (PATH or [user@]host:PATH, as
	// restore's SRC), all on one host or all local.
	Paths []string
	// Recursive lists everything below each path (rsync's -r).
	Recursive bool
	// Directory lists each path's own entry only, as ls -d.
	Directory bool
	// Filters are rsync's include/exclude rules, as restore's Filters.
	Filters []treewalk.Rule
	// Checksums computes the xxh3-64 of each regular file's contents
	// (ListEntry.Checksum), for --versions, where the file is: the agent
	// hashes it (transfer.RoleSums, at most 1000 files a path), agent-less
	// the remote's cat sends it to be hashed here, locally it is read.
	Checksums bool
	// SSH says how to reach the remote side; RemotePath NoAgent lists with
	// the remote's GNU find, and without an agent on the remote the
	// listing falls back to find too.
	SSH transport.SSHOptions
	// IdleTimeout is restore's --timeout; 0 means none.
	IdleTimeout time.Duration
	// Version is announced to the remote agent.
	Version string
	// Dialer, when not nil, reaches the remote side instead of SSH (tests).
	Dialer transport.Dialer
}

// ListEntry is one listed entry: the file-list entry, its Path relative to
// the listed path's parent (rsync --list-only's name), and, with
// ListOptions.Checksums, the hex xxh3-64 of a regular file's contents.
type ListEntry struct {
	treewalk.Entry
	// Checksum is the content hash (16 hex digits); "" for other kinds,
	// without Checksums, or when the file could not be read.
	Checksum string
}

// Listing is one path's listing.
type Listing struct {
	// Path is the location as given.
	Path string
	// Entries are in the sender's order (rsync's: a directory before
	// what it holds, names sorted bytewise).
	Entries []ListEntry
	// Missing says that the path does not exist on the sender (Err says
	// why); Entries is then empty.
	Missing bool
	// Err is what prevented this path's listing (a missing path, a
	// directory that could not be read); nil when it was listed.
	Err error
	// Errors are the entries below the path that could not be listed.
	Errors []FileError
}

// List lists each of o.Paths, in their order (a pattern's matches sorted
// in its place), over up to listJobs connections at once. A path that
// cannot be listed (missing, not readable) has its Listing.Err and does
// not stop the others; the error returned is run-fatal (usage,
// connection, protocol, cancellation). Safe to call concurrently.
func List(ctx context.Context, o ListOptions) ([]Listing, error) {
	if len(o.Paths) == 0 {
		return nil, fmt.Errorf("%w: ls needs a PATH", ErrUsage)
	}
	var locs []transport.Location
	for _, p := range o.Paths {
		l, err := transport.ParseLocation(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrUsage, p, err)
		}
		if len(locs) > 0 && (l.Remote() != locs[0].Remote() || l.Host != locs[0].Host || l.User != locs[0].User || l.Port != locs[0].Port) {
			return nil, fmt.Errorf("%w: all paths must be on the same host (or all local): %s and %s are not", ErrUsage, o.Paths[0], p)
		}
		locs = append(locs, l)
	}
	var filters []string
	for _, r := range o.Filters {
		filters = append(filters, r.String())
	}
	if _, err := treewalk.ParseFilter(filters); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	var lister pathLister = localLister{}
	if locs[0].Remote() {
		rl, err := newRemoteLister(o, locs[0])
		if err != nil {
			return nil, err
		}
		lister = rl
	}
	type target struct {
		name string // as the Listing names it
		path string
	}
	var targets []target
	for i, l := range locs {
		matches := []string{l.Path}
		if transfer.HasGlob(l.Path) {
			m, err := lister.glob(ctx, l.Path)
			if err != nil {
				return nil, err
			}
			if len(m) > 0 { // else the path as written: it may be a name
				matches = m
			}
		}
		for _, m := range matches {
			name := o.Paths[i]
			if m != l.Path {
				ml := l
				ml.Path = m
				name = ml.String()
			}
			targets = append(targets, target{name, m})
		}
	}
	// The first path settles how the sender is reached (agent or find);
	// the others are listed over parallel connections, listJobs at most.
	out := make([]Listing, len(targets))
	one := func(ctx context.Context, i int) error {
		tg := targets[i]
		root, contents := listRoot(tg.path)
		depth := depthRules(contents, o.Recursive, o.Directory)
		ls := Listing{Path: tg.name}
		list, sums, err := lister.list(ctx, root, depth, filters, o.Checksums)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !errors.Is(err, errPathFailed) {
			return err
		}
		if err != nil {
			ls.Err = err
			ls.Missing = isNotExist(err)
			out[i] = ls
			return nil
		}
		for _, pe := range list.Errors {
			ls.Errors = append(ls.Errors, FileError{Path: pe.Path, Error: pe.Err.Error()})
		}
		for _, e := range list.Entries {
			ls.Entries = append(ls.Entries, ListEntry{Entry: e, Checksum: sums[e.Path]})
		}
		out[i] = ls
		return nil
	}
	if err := one(ctx, 0); err != nil {
		return nil, err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(listJobs)
	for i := 1; i < len(targets); i++ {
		g.Go(func() error { return one(gctx, i) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// listJobs is how many paths List lists at once: as many connections as
// a restore's default streams.
const listJobs = 4

// errPathFailed marks a lister's error that concerns the one path being
// listed (missing, unreadable), not the connection; pathFailed wraps an
// error with it, its message unchanged.
var errPathFailed = errors.New("cannot list")

type pathFailedError struct{ err error }

func (e *pathFailedError) Error() string   { return e.err.Error() }
func (e *pathFailedError) Unwrap() []error { return []error{e.err, errPathFailed} }

func pathFailed(err error) error { return &pathFailedError{err} }

// isNotExist reports whether err says that the listed path does not
// exist, locally (fs.ErrNotExist) or in the peer's message.
func isNotExist(err error) bool {
	return errors.Is(err, errNotExist) || errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), "no such file or directory")
}

var errNotExist = errors.New("no such file or directory")

// listRoot is the part of the sender's tree p names: its contents (Rel
// ".") for a directory path as rsync reads it (a trailing slash, "." or
// "..", "/"), else the entry itself beneath its parent.
func listRoot(p string) (root transfer.SourceRoot, contents bool) {
	if p == "" || strings.HasSuffix(p, "/") || p == "." || p == ".." || strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/..") {
		return transfer.SourceRoot{Base: p, Rel: "."}, true
	}
	return transfer.SourceRoot{Base: path.Dir(p), Rel: path.Base(p)}, false
}

// depthRules are the filter rules that keep a listing to its depth: the
// root and its entries for a directory's contents, the entry alone for a
// named entry or Directory, nothing more with recursive.
func depthRules(contents, recursive, directory bool) []string {
	switch {
	case directory && contents:
		return []string{"- /*"}
	case directory, !recursive:
		return []string{"- /*/*"}
	}
	return nil
}

// pathLister lists one root of a sender, with the depth rule (depthRules)
// then the filters, and with sums the
// xxh3-64 of its regular files by Path. An error wrapping errPathFailed
// concerns that root only.
type pathLister interface {
	// glob expands pattern on the sender: the matching paths, in the
	// pattern's form; an error is run-fatal.
	glob(ctx context.Context, pattern string) ([]string, error)
	list(ctx context.Context, root transfer.SourceRoot, depth, filters []string, sums bool) (treewalk.List, map[string]string, error)
}

// localLister lists a local tree.
type localLister struct{}

// glob expands a local pattern as filepath.Glob does.
func (localLister) glob(_ context.Context, pattern string) ([]string, error) {
	m, err := filepath.Glob(filepath.Clean(pattern))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUsage, pattern, err)
	}
	if strings.HasSuffix(pattern, "/") {
		for i := range m {
			m[i] += "/"
		}
	}
	return m, nil
}

func (localLister) list(ctx context.Context, root transfer.SourceRoot, depth, filters []string, sums bool) (treewalk.List, map[string]string, error) {
	src, err := transfer.OpenSelection(transfer.Selection{Roots: []transfer.SourceRoot{root}, Filters: append(depth, filters...)}, transfer.OpenBase)
	if err != nil {
		return treewalk.List{}, nil, pathFailed(err)
	}
	defer src.Close()
	list, err := src.List(ctx)
	if err != nil {
		return list, nil, pathFailed(err)
	}
	if !sums {
		return list, nil, nil
	}
	m := map[string]string{}
	for _, fs := range transfer.SumFiles(ctx, src, list.Entries) {
		m[fs.Path] = fs.XXH3
	}
	return list, m, nil
}

// ModeString is the entry's type and mode as ls -l and rsync --list-only
// print them ("drwxr-xr-x", "-rwsr-xr-x", "lrwxrwxrwx").
func (e *ListEntry) ModeString() string {
	b := []byte("----------")
	switch e.Kind {
	case treewalk.KindDir:
		b[0] = 'd'
	case treewalk.KindSymlink:
		b[0] = 'l'
	case treewalk.KindFifo:
		b[0] = 'p'
	case treewalk.KindCharDev:
		b[0] = 'c'
	case treewalk.KindBlkDev:
		b[0] = 'b'
	}
	const rwx = "rwxrwxrwx"
	for i := range 9 {
		if e.Mode&(1<<(8-i)) != 0 {
			b[1+i] = rwx[i]
		}
	}
	special := func(bit uint32, pos int, set, unset byte) {
		if e.Mode&bit == 0 {
			return
		}
		if b[pos] == '-' {
			b[pos] = unset
		} else {
			b[pos] = set
		}
	}
	special(0o4000, 3, 's', 'S')
	special(0o2000, 6, 's', 'S')
	special(0o1000, 9, 't', 'T')
	return string(b)
}

// DisplaySize is the size ls -l and rsync --list-only print for the
// entry: a regular file's length, a symlink's target length, 0 otherwise
// (the file list does not carry a directory's own size).
func (e *ListEntry) DisplaySize() int64 {
	if e.Kind == treewalk.KindSymlink {
		return int64(len(e.LinkTarget))
	}
	return e.Size
}
