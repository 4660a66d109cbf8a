package restore

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
	"github.com/restoresync/restoresync/treewalk"
)

// Choosing what to restore. The client turns the SRCs and the selection
// options into a transfer.Selection, which the sender walks:
//
//   - one SRC, no -R, no --files-from: its contents become DST (a file
//     lands at DST/<name>), as always;
//   - several SRCs: each lands at DST/<its name>, a trailing slash making
//     no difference (unlike rsync, where it means "the contents"); two
//     with the same name are a usage error (use -R);
//   - -R: each SRC's path is kept under DST (absolute paths without their
//     leading "/"), or only the part after a "/./" in it; the directories
//     on the way are created with their source metadata, and so is DST
//     itself when the kept part starts with "./" (rsync's implied ".");
//     SRCs that land on the same paths merge as with rsync: directories
//     combine, and for any other path the first SRC given wins (but a
//     directory wins over a non-directory);
//   - --files-from: the listed paths, relative to the one SRC, placed as
//     with -R (a "/./" in a line included); a listed directory comes with
//     everything below it.
//
// The filters apply to every path in its place under DST (an anchored
// "/x" is DST/x), SRCs themselves included, implied directories not.

// selection is what a restore sends and where --delete may delete.
type selection struct {
	// sel goes to the sender; Roots is empty for one SRC (Hello.Path).
	sel transfer.Selection
	// scope holds the file-list paths of the SRCs: Writer.Delete deletes
	// only below those that are directories.
	scope []string
}

// selective reports whether any selection option is set.
func (o *Options) selective() bool {
	return len(o.MoreSrc) > 0 || o.Relative || o.FilesFrom != nil || len(o.Filters) > 0 || o.Delete || o.DryRun || o.ItemizeChanges
}

// selectionFlags names the selection options set, for messages.
func (o *Options) selectionFlags() string {
	var f []string
	if len(o.MoreSrc) > 0 {
		f = append(f, "several SRCs")
	}
	if o.Relative {
		f = append(f, "--relative")
	}
	if o.FilesFrom != nil {
		f = append(f, "--files-from")
	}
	if len(o.Filters) > 0 {
		f = append(f, "--include/--exclude")
	}
	if o.Delete {
		f = append(f, "--delete")
	}
	if o.DryRun {
		f = append(f, "--dry-run")
	}
	if o.ItemizeChanges {
		f = append(f, "--itemize-changes")
	}
	return strings.Join(f, ", ")
}

// sameHost checks that every SRC is on src's host (or all local).
func (o *Options) sameHost(src transport.Location) error {
	for _, s := range o.MoreSrc {
		l, err := transport.ParseLocation(s)
		if err != nil {
			return fmt.Errorf("%w: SRC %s: %w", ErrUsage, s, err)
		}
		if l.Host != src.Host || l.User != src.User || l.Port != src.Port {
			return fmt.Errorf("%w: all SRCs must be on the same host (or all local): %s and %s are not", ErrUsage, o.Src, s)
		}
	}
	return nil
}

// planSelection works out the selection of a restore from src (o.Src,
// parsed) and the options. Errors wrap ErrUsage.
func planSelection(o Options, src transport.Location) (selection, error) {
	var s selection
	for _, r := range o.Filters {
		s.sel.Filters = append(s.sel.Filters, r.String())
	}
	if _, err := treewalk.ParseFilter(s.sel.Filters); err != nil {
		return s, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	paths := []string{src.Path}
	for _, m := range o.MoreSrc {
		l, err := transport.ParseLocation(m)
		if err != nil {
			return s, fmt.Errorf("%w: SRC %s: %w", ErrUsage, m, err)
		}
		paths = append(paths, l.Path)
	}
	var roots []transfer.SourceRoot
	switch {
	case o.FilesFrom != nil:
		if len(paths) > 1 {
			return s, fmt.Errorf("%w: --files-from takes one SRC, the directory its paths are relative to", ErrUsage)
		}
		for n, line := range o.FilesFrom {
			if treewalk.IsComment(line) {
				continue
			}
			r, err := filesFromRoot(src.Path, line)
			if err != nil {
				return s, fmt.Errorf("%w: --files-from item %d %q: %w", ErrUsage, n+1, line, err)
			}
			roots = append(roots, r)
		}
		if len(roots) == 0 {
			return s, fmt.Errorf("%w: --files-from lists no path", ErrUsage)
		}
	case o.Relative:
		for _, p := range paths {
			r, err := relativeRoot(p)
			if err != nil {
				return s, err
			}
			roots = append(roots, r)
		}
	case len(paths) > 1:
		for _, p := range paths {
			clean := path.Clean(p)
			name := path.Base(clean)
			if p == "" || name == "." || name == ".." || name == "/" {
				return s, fmt.Errorf("%w: SRC %q has no name to restore it under with several SRCs (name it, or use -R)", ErrUsage, p)
			}
			roots = append(roots, transfer.SourceRoot{Base: path.Dir(clean), Rel: name})
		}
	default:
		s.scope = []string{"."}
		return s, nil
	}
	if !o.Relative && o.FilesFrom == nil {
		var err error
		if roots, err = disjointRoots(roots); err != nil {
			return s, err
		}
	}
	// With -R and --files-from the roots stay in the order given: the
	// sender merges them in that order (treewalk.WalkParts).
	s.sel.Roots = roots
	for _, r := range roots {
		s.scope = append(s.scope, r.Rel)
	}
	slices.Sort(s.scope)
	s.scope = slices.Compact(s.scope)
	return s, nil
}

// cleanRel cleans a relative path given by the user: no "..", not
// absolute, valid for treewalk.ValidPath ("." allowed).
func cleanRel(p string) (string, error) {
	if strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("%w: absolute path", treewalk.ErrBadPath)
	}
	rel := path.Clean(p)
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%w: it leaves the SRC directory", treewalk.ErrBadPath)
	}
	if err := treewalk.ValidPath(rel); err != nil {
		return "", err
	}
	return rel, nil
}

// relativeRoot places SRC p as rsync's -R does: the part after the first
// "/./" if there is one, else the whole path without its leading "/";
// a kept part that starts with "./" implies DST itself ("."), which then
// gets the metadata of the directory before it.
func relativeRoot(p string) (transfer.SourceRoot, error) {
	var base, rest string
	switch i := strings.Index(p, "/./"); {
	case i >= 0:
		base, rest = p[:i], p[i+3:]
		if base == "" {
			base = "/"
		}
	case strings.HasPrefix(p, "/"):
		base, rest = "/", strings.TrimLeft(p, "/")
	default:
		base, rest = "", p
	}
	r, err := keptRoot(base, rest)
	if err != nil {
		return r, fmt.Errorf("%w: SRC %q with -R: %w", ErrUsage, p, err)
	}
	return r, nil
}

// filesFromRoot places a --files-from line as rsync does (it implies -R):
// relative to the SRC directory src, the part after the first "/./" is
// kept (the part before names its directory beneath src), and a kept part
// that starts with "./" implies DST itself, as with relativeRoot. Errors
// wrap treewalk.ErrBadPath.
func filesFromRoot(src, line string) (transfer.SourceRoot, error) {
	base, rest := src, line
	if i := strings.Index(line, "/./"); i >= 0 {
		dir, err := cleanRel(line[:i])
		if err != nil {
			return transfer.SourceRoot{}, err
		}
		base, rest = path.Join(src, dir), line[i+3:]
		if src == "" {
			base = dir
		}
	}
	return keptRoot(base, rest)
}

// keptRoot is the root of the kept part rest of a -R or --files-from path
// beneath base: rest cleaned (cleanRel; "" is "."), implying "." when it
// starts with "./".
func keptRoot(base, rest string) (transfer.SourceRoot, error) {
	if rest == "" {
		rest = "."
	}
	rel, err := cleanRel(rest)
	if err != nil {
		return transfer.SourceRoot{}, err
	}
	return transfer.SourceRoot{Base: base, Rel: rel, ImpliesRoot: rel != "." && strings.HasPrefix(rest, "./")}, nil
}

// disjointRoots, for several SRCs without -R, drops the roots that
// another one covers (at or below it, from the same base) and refuses two
// from different bases that would land on each other (with -R, the sender
// merges them as rsync does).
func disjointRoots(roots []transfer.SourceRoot) ([]transfer.SourceRoot, error) {
	slices.SortStableFunc(roots, func(a, b transfer.SourceRoot) int { return strings.Compare(a.Rel, b.Rel) })
	var out []transfer.SourceRoot
	for _, r := range roots {
		covered := false
		for i, q := range out {
			if !treewalk.IsUnder(r.Rel, q.Rel) {
				continue
			}
			if q.Base != r.Base {
				return nil, fmt.Errorf("%w: %s (from %s) and %s (from %s) would both restore to DST/%s: use -R to merge them, or name them apart",
					ErrUsage, r.Rel, r.Base, q.Rel, q.Base, r.Rel)
			}
			covered = true
			out[i].ImpliesRoot = q.ImpliesRoot || r.ImpliesRoot // "." is still implied
		}
		if !covered {
			out = append(out, r)
		}
	}
	return out, nil
}

// statFollow is os.Stat (following symlinks, as a lone SRC is followed),
// for transfer.SingleRoot.
func statFollow(p string) (fs.FileInfo, error) { return os.Stat(p) }

// openLocalSource opens the local side of a push or local restore.
func openLocalSource(s selection, srcPath string) (*transfer.LocalSource, error) {
	sel := s.sel
	if len(sel.Roots) == 0 {
		sel.Roots = []transfer.SourceRoot{transfer.SingleRoot(srcPath, statFollow)}
	}
	return transfer.OpenSelection(sel, transfer.OpenBase)
}

// writerOptions are o.Writer with the selection's parts: the scope and
// filters for Delete and Itemize, DryRun, and rsync's rule that --delete
// implies --force.
func (o *Options) writerOptions(s selection) dest.WriterOptions {
	wo := o.Writer
	wo.Roots = s.scope
	wo.Filters = s.sel.Filters
	wo.DryRun = o.DryRun
	if o.Delete {
		wo.Force = true
	}
	return wo
}
