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
type treeSummary struct {
	files, dirs, symlinks, links int // regular inodes, dirs (root included), symlinks, extra names
	bytes                        int64
}

func (s treeSummary) String() string {
	return fmt.Sprintf("%d files, %d hardlinks, %d dirs, %d symlinks, %d bytes", s.files, s.links, s.dirs, s.symlinks, s.bytes)
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
			s.dirs++
		case d.Type()&fs.ModeSymlink != 0:
			s.symlinks++
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
				k := [2]uint64{sys.Dev, sys.Ino}
				if seen[k] {
					s.links++
					return nil
				}
				seen[k] = true
			}
			s.files++
			s.bytes += fi.Size()
		}
		return nil
	})
	if err != nil {
		return s, fmt.Errorf("summarize %s: %w", root, err)
	}
	return s, nil
}

// verifyLocal compares dst with src entry by entry (treewalk.Compare:
// kinds, contents, modes, owners when root, mtimes, links) and returns
// "ok" or what differed.
func verifyLocal(ctx context.Context, src, dst string) (string, error) {
	diffs, err := treewalk.Compare(ctx, src, dst, treewalk.CompareOptions{
		IgnoreOwner: os.Geteuid() != 0, // only root can give files away
		MaxDiffs:    verifyMaxDiffs,
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
