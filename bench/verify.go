package bench

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/restoresync/restoresync/treewalk"
)

// verifyMaxDiffs bounds how many differences a verification collects.
const verifyMaxDiffs = 20

// treeSummary counts a tree: what a remote source can be checked against
// when it cannot be compared entry by entry.
// It goes as JSON from the source host's agent (bench delta-copy) to bench
// run, so its fields are exported.
type treeSummary struct {
	Files    int   `json:"files"`    // regular inodes
	Links    int   `json:"links"`    // names beyond the first of a regular inode
	Dirs     int   `json:"dirs"`     // the root included
	Symlinks int   `json:"symlinks"` // symbolic links
	Bytes    int64 `json:"bytes"`    // of the regular inodes, each once
}

func (s treeSummary) String() string {
	return fmt.Sprintf("%d files, %d hardlinks, %d dirs, %d symlinks, %d bytes", s.Files, s.Links, s.Dirs, s.Symlinks, s.Bytes)
}

// summarize walks root without following symlinks.
func summarize(root string) (treeSummary, error) {
	var s treeSummary
	seen := map[[2]uint64]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			s.Dirs++
		case d.Type()&fs.ModeSymlink != 0:
			s.Symlinks++
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
				k := [2]uint64{sys.Dev, sys.Ino}
				if seen[k] {
					s.Links++
					return nil
				}
				seen[k] = true
			}
			s.Files++
			s.Bytes += fi.Size()
		}
		return nil
	})
	if err != nil {
		return s, fmt.Errorf("summarize %s: %w", root, err)
	}
	return s, nil
}

// verifyLocal compares dst with src entry by entry (treewalk.Compare:
// kinds, contents, modes, owners when root, mtimes, links, and unless
// baseline is set, xattrs, ACLs and sparseness) and returns "ok" or what
// differed. baseline is for the rsync -aH and tar baselines, which keep
// neither xattrs, ACLs nor holes (see baselineVerifyNote).
func verifyLocal(ctx context.Context, src, dst string, baseline bool) (string, error) {
	diffs, err := treewalk.Compare(ctx, src, dst, treewalk.CompareOptions{
		IgnoreOwner:  os.Geteuid() != 0, // only root can give files away
		IgnoreXattrs: baseline,
		IgnoreSparse: baseline,
		MaxDiffs:     verifyMaxDiffs,
	})
	if err != nil {
		return "", fmt.Errorf("verify %s: %w", dst, err)
	}
	if len(diffs) == 0 {
		return "ok", nil
	}
	n := fmt.Sprint(len(diffs))
	if len(diffs) >= verifyMaxDiffs {
		n += "+"
	}
	return fmt.Sprintf("%s differences (%s)", n, diffs[0]), nil
}

// baselineVerifyNote says what a local source's baseline results are
// compared without.
const baselineVerifyNote = "baselines preserve less than restoresync: rsync -aH (not -aHAXS) and tar without --xattrs --acls --sparse keep no extended attributes (file capabilities included), ACLs or holes, so their results are compared with the source ignoring xattrs, ACLs and sparseness; restoresync's rows are compared on all of them"

// warmLocal reads every regular file under root once, so that the first
// timed row does not pay for a cold page cache alone.
func warmLocal(ctx context.Context, root string) error {
	buf := make([]byte, 1<<20)
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return nil // unreadable: the rows will say so
		}
		defer f.Close()
		_, err = io.CopyBuffer(io.Discard, f, buf)
		return err
	})
}
