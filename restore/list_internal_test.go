package restore

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/restoresync/restoresync/treewalk"
)

// A pattern with a trailing slash lists each match's contents, as the
// same path written out would.
func TestListPatternWithTrailingSlash(t *testing.T) {
	root := t.TempDir()
	for _, s := range []string{"daily.0", "daily.1"} {
		if err := os.MkdirAll(filepath.Join(root, s, "h"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, s, "h", "w.php"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ls, err := List(context.Background(), ListOptions{Paths: []string{filepath.Join(root, "daily.*", "h") + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 {
		t.Fatalf("%d listings, want one a snapshot: %+v", len(ls), ls)
	}
	for _, l := range ls {
		if l.Err != nil || len(l.Entries) != 2 || l.Entries[0].Path != "." || l.Entries[1].Path != "w.php" || l.Entries[1].Size != 7 {
			t.Errorf("listing %s: %+v, err %v; want . and w.php (7 bytes)", l.Path, l.Entries, l.Err)
		}
	}
}

// change_entries pair each itemized line with its entry, by the exact
// names Report.Changes holds (a newline included), hardlinks of any kind
// by their "=> LEADER", deletions with their path only.
func TestChangeEntriesMatchLines(t *testing.T) {
	entries := []treewalk.Entry{
		{Path: ".", Kind: treewalk.KindDir, MtimeNs: 1},
		{Path: "a\nb", Kind: treewalk.KindFile, Size: 5, MtimeNs: 2},
		{Path: "d", Kind: treewalk.KindDir, MtimeNs: 3},
		{Path: "d/l", Kind: treewalk.KindSymlink, LinkTarget: "../a", MtimeNs: 4},
		{Path: "d/h", Kind: treewalk.KindFile, Size: 5, LinkTo: "a\nb", MtimeNs: 2},
		{Path: "d/hl", Kind: treewalk.KindSymlink, LinkTarget: "../a", LinkTo: "d/l", MtimeNs: 4},
	}
	lines := []string{"*deleting   old\nx", ".d..t...... ./", ">f+++++++++ a\nb", "cd+++++++++ d/", "cL+++++++++ d/l -> ../a", "hf+++++++++ d/h => a\nb", "hL+++++++++ d/hl => d/l"}
	got := changeEntries(lines, entries)
	want := []Change{
		{Path: "old\nx", Itemize: "*deleting"},
		{Path: ".", Itemize: ".d..t......", Kind: "dir", Size: size(0), MtimeNs: 1},
		{Path: "a\nb", Itemize: ">f+++++++++", Kind: "file", Size: size(5), MtimeNs: 2},
		{Path: "d", Itemize: "cd+++++++++", Kind: "dir", Size: size(0), MtimeNs: 3},
		{Path: "d/l", Itemize: "cL+++++++++", Kind: "symlink", Size: size(0), MtimeNs: 4, LinkTarget: "../a"},
		{Path: "d/h", Itemize: "hf+++++++++", Kind: "file", Size: size(5), MtimeNs: 2, LinkTo: "a\nb"},
		{Path: "d/hl", Itemize: "hL+++++++++", Kind: "symlink", Size: size(0), MtimeNs: 4, LinkTarget: "../a", LinkTo: "d/l"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d entries for %d lines: %+v", len(got), len(lines), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		g.Mtime = ""
		if (g.Size == nil) != (w.Size == nil) || g.Size != nil && *g.Size != *w.Size {
			t.Errorf("line %q: size %v, want %v", lines[i], g.Size, w.Size)
		}
		g.Size, w.Size = nil, nil
		if g != w {
			t.Errorf("line %q: %+v, want %+v", lines[i], g, w)
		}
	}
}

// size is a Change's Size of n bytes.
func size(n int64) *int64 { return &n }
