package restore_test

import (
	"os"
	"path/filepath"
	"testing"
)

// A dry run's report counts what --delete would remove (Deleted, its
// "*deleting" lines), and a deletion's change entry has no size or kind:
// it concerns an entry of DST only.
func TestDryRunReportCountsDeletions(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			src, dst := t.TempDir(), t.TempDir()
			must(t, os.WriteFile(filepath.Join(src, "kept"), []byte("same"), 0o644))
			o := options(mode, src, dst)
			run(t, o)
			must(t, os.WriteFile(filepath.Join(dst, "stale.txt"), []byte("old"), 0o644))
			o.DryRun, o.Delete = true, true
			rep := run(t, o)
			if rep.Deleted != 1 {
				t.Errorf("dry run deleted %d, want 1 (stale.txt); changes %q", rep.Deleted, rep.Changes)
			}
			var del int
			for _, c := range rep.ChangeEntries {
				if c.Itemize == "*deleting" {
					del++
					if c.Path != "stale.txt" || c.Size != nil || c.Kind != "" {
						t.Errorf("deletion entry %+v: want path stale.txt, no size, no kind", c)
					}
				}
			}
			if del != 1 {
				t.Errorf("%d deletion entries in %+v, want 1", del, rep.ChangeEntries)
			}
			if _, err := os.Stat(filepath.Join(dst, "stale.txt")); err != nil {
				t.Errorf("the dry run removed stale.txt: %v", err)
			}
		})
	}
}
