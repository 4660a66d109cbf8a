package bench

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// deltaAppend is what MakeDeltaCopy appends to a file it grows.
var deltaAppend = bytes.Repeat([]byte("restoresync bench delta: appended line\n"), 26) // ~1 KiB

// deltaEditBytes is how many bytes MakeDeltaCopy rewrites in the middle of
// a file it edits in place.
const deltaEditBytes = 256

// DeltaStats says what MakeDeltaCopy changed.
type DeltaStats struct {
	// Files is the number of regular files changed.
	Files int
	// Appended and Edited split Files: grown at the end, or rewritten in
	// the middle at the same size.
	Appended, Edited int
	// Bytes is the total size of the changed files after the change, in
	// bytes: what a tool that resends whole files sends.
	Bytes int64
}

// ParsePercent parses a share such as "1%", "0.5%" or "5" (percent either
// way) into a number of percent in [0, 100].
func ParsePercent(s string) (float64, error) {
	var v float64
	if _, err := fmt.Sscanf(strings.TrimSuffix(strings.TrimSpace(s), "%"), "%g", &v); err != nil {
		return 0, fmt.Errorf("percentage %q: %w", s, err)
	}
	if math.IsNaN(v) || v < 0 || v > 100 {
		return 0, fmt.Errorf("percentage %q: must be between 0%% and 100%%", s)
	}
	return v, nil
}

// MakeDeltaCopy copies the tree src to dst (which must not exist) with
// `cp -a --reflink=never`, so that src is never modified and the copy
// shares no extents with it, then changes percent of its regular files
// (at least one when percent > 0): half get about 1 KiB appended, the
// others 256 bytes rewritten in the middle, keeping their size. Changed
// files get the current time as mtime, so every quick check sees them.
// Which files change depends only on the tree's names and seed. Files with
// several links are left alone (so that each change is made once), and so
// are files that cannot be opened for writing.
//
// An interrupted MakeDeltaCopy leaves a partial copy in dst for the caller
// to remove.
func MakeDeltaCopy(ctx context.Context, src, dst string, percent float64, seed int64) (DeltaStats, error) {
	var st DeltaStats
	if _, err := os.Lstat(dst); err == nil {
		return st, fmt.Errorf("delta copy %s: %w", dst, fs.ErrExist)
	}
	if out, err := exec.CommandContext(ctx, "cp", "-a", "--reflink=never", "--", src, dst).CombinedOutput(); err != nil {
		return st, fmt.Errorf("copy %s to %s: %w: %s", src, dst, err, bytes.TrimSpace(out))
	}
	var files []string
	err := filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok && sys.Nlink == 1 && fi.Size() > 0 {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("delta copy %s: %w", dst, err)
	}
	if percent <= 0 || len(files) == 0 {
		return st, nil
	}
	k := max(1, int(math.Round(float64(len(files))*percent/100)))
	r := rand.New(rand.NewPCG(uint64(seed), 0x64656c7461)) // "delta"
	pick := r.Perm(len(files))[:min(k, len(files))]
	slices.Sort(pick)
	for i, idx := range pick {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		size, err := changeFile(files[idx], i%2 == 0)
		if err != nil {
			continue // not writable here: leave it
		}
		st.Files++
		st.Bytes += size
		if i%2 == 0 {
			st.Appended++
		} else {
			st.Edited++
		}
	}
	return st, nil
}

// changeFile appends to the file at p, or rewrites bytes in its middle,
// and returns its new size.
func changeFile(p string, appendIt bool) (int64, error) {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if appendIt {
		if _, err := f.WriteAt(deltaAppend, fi.Size()); err != nil {
			return 0, err
		}
		return fi.Size() + int64(len(deltaAppend)), f.Close()
	}
	off := fi.Size() / 2
	n := min(int64(deltaEditBytes), fi.Size()-off)
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil {
		return 0, err
	}
	for i := range buf {
		buf[i] ^= 0x5a // differs from what was there, byte for byte
	}
	if _, err := f.WriteAt(buf, off); err != nil {
		return 0, err
	}
	return fi.Size(), f.Close()
}
