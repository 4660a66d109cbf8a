package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// ErrUnknownProfile is wrapped by Generate's error when GenOptions.Profile
// names no profile; the message lists the valid names.
var ErrUnknownProfile = errors.New("unknown profile")

// ErrNotEmpty is wrapped by Generate's error when the target directory
// already has entries.
var ErrNotEmpty = errors.New("directory not empty")

// maxScale bounds GenOptions.Scale: scale 1000 of "bigfile" is already
// 2 TiB, so anything beyond is a typo.
const maxScale = 1000

// GenOptions says which tree Generate makes.
type GenOptions struct {
	// Profile names the kind of tree; Profiles lists them. Empty means
	// "hosting".
	Profile string
	// Scale multiplies the profile's file counts and sizes, roughly
	// linearly: 1 is the documented full size, 0.02 a quick test tree.
	// Counts and sizes never fall below small minimums, so every kind of
	// entry a profile promises is there at any scale. Zero means 1;
	// negative, NaN or above 1000 is an error.
	Scale float64
	// Seed selects the tree: the same profile, scale and seed give the same
	// tree, byte for byte, on any machine and Go release.
	Seed int64
	// Owners, when true and the process runs as root, gives parts of the
	// tree to system accounts (www-data or daemon, bin, group mail) to
	// exercise ownership mapping. Accounts missing on this host are skipped.
	// Otherwise everything belongs to the running user.
	Owners bool
}

// GenStats counts what Generate made.
type GenStats struct {
	// Files is the number of regular files (inodes), Hardlinks the number of
	// extra names given to some of them.
	Files, Hardlinks int
	// Dirs is the number of directories, not counting the root.
	Dirs int
	// Symlinks is the number of symbolic links.
	Symlinks int
	// Bytes is the total size of the regular files, each inode counted once.
	Bytes int64
	// Chowned is the number of entries given to another owner (GenOptions.Owners).
	Chowned int
}

// applyDefaults fills in the documented zero values and checks the rest.
func (o *GenOptions) applyDefaults() error {
	if o.Profile == "" {
		o.Profile = "hosting" // the tree this project exists for
	}
	if o.Scale == 0 {
		o.Scale = 1 // the documented full size
	}
	if math.IsNaN(o.Scale) || o.Scale < 0 || o.Scale > maxScale {
		return fmt.Errorf("generate: scale %v out of range (0, %d]", o.Scale, maxScale)
	}
	return nil
}

// Generate writes the tree described by o into dir, creating dir if it does
// not exist; an existing dir must be empty (ErrNotEmpty otherwise). Every
// entry's name, contents, mode (the root's included) and mtime (to the
// nanosecond, directories' set after their contents) depend only on o, so
// two calls with the same options make trees that treewalk.Compare finds
// equal. Ownership is the running user's unless o.Owners applies.
//
// Files are written max(8, GOMAXPROCS) at a time; memory stays near
// 320 KiB per writer plus ~200 bytes per planned entry. An unknown profile
// wraps ErrUnknownProfile; errors name the path concerned. When ctx is
// cancelled, or on any error, Generate stops and returns the
// error, leaving a partial tree in dir (with files of wrong sizes, modes and
// times) for the caller to remove.
//
// Generate is safe to call concurrently for different directories.
func Generate(ctx context.Context, dir string, o GenOptions) (GenStats, error) {
	if err := o.applyDefaults(); err != nil {
		return GenStats{}, err
	}
	prof, err := lookupProfile(o.Profile)
	if err != nil {
		return GenStats{}, fmt.Errorf("generate: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return GenStats{}, fmt.Errorf("generate: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return GenStats{}, fmt.Errorf("generate: %w", err)
	}
	defer root.Close()
	if err := checkEmpty(root); err != nil {
		return GenStats{}, fmt.Errorf("generate %s: %w", dir, err)
	}

	p := newPlan(o.Seed)
	rootMode := prof.build(p, o.Scale)
	rootMtime := p.finish()

	w := &writer{dir: dir, root: root, p: p}
	if o.Owners && os.Geteuid() == 0 {
		w.owners = resolveOwners()
	}
	if err := w.write(ctx, rootMode, rootMtime); err != nil {
		return w.stats, err
	}
	return w.stats, nil
}

// checkEmpty returns ErrNotEmpty if root has any entry.
func checkEmpty(root *os.Root) error {
	f, err := root.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		return ErrNotEmpty
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}
