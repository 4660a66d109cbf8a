package restore_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testenv"
)

// hardlinkTree is a SRC with a 3-member hardlink group spread over three
// directories, another file, and whole-second mtimes (rsync 3.2's quick
// check compares seconds, ours nanoseconds).
func hardlinkTree(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "S")
	writeFiles(t, src, map[string]string{"license.txt": "GPL", "a/other": "x"})
	os.MkdirAll(filepath.Join(src, "a/b"), 0o755)
	for _, p := range []string{"a/license.txt", "a/b/license.txt"} {
		if err := os.Link(filepath.Join(src, "license.txt"), filepath.Join(src, p)); err != nil {
			t.Fatal(err)
		}
	}
	touchAll(t, src, time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	return src
}

// touchAll sets the mtime of everything under root (root included).
func touchAll(t *testing.T, root string, mt time.Time) {
	t.Helper()
	filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		return os.Chtimes(p, mt, mt)
	})
}

// groupLines makes itemize lines comparable between rsync and us: a line
// naming a member of the hardlink group (members, by path) keeps its
// attribute flags and whether it names a leader (" =>"), but not which
// member it is nor its update type ('>', '.', 'h'), since rsync and we
// choose different leaders (README: "Itemized changes"); other lines are
// kept whole. Lines that are not itemize lines ("created directory")
// are dropped. The result is sorted.
func groupLines(lines []string, members []string) []string {
	var out []string
	for _, l := range lines {
		if len(l) < 12 || l[11] != ' ' {
			continue
		}
		name, _, arrow := strings.Cut(l[12:], " => ")
		if slices.Contains(members, name) {
			l = "=" + l[1:11] + " <group member>"
			if arrow {
				l += " => <leader>"
			}
		}
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

// -n and --itemize-changes list the members of a hardlink group as the
// real rsync -aH -i does on the same trees, dry run and real run: a new
// group, the group's data changed (followers "hf.st......", with
// " => LEADER" on the real run only), its mode changed (followers listed
// by the dry run only: the real run's chmod of the leader fixes them),
// a follower not linked (spaces, or its own changed flags, and the
// arrow), a follower missing, nothing changed. Then the tree is the
// same as rsync's.
func TestItemizeHardlinksMatchesRsync(t *testing.T) {
	testenv.RequireTool(t, "rsync")
	members := []string{"license.txt", "a/license.txt", "a/b/license.txt"}
	later := time.Date(2024, 5, 5, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		srcMut  func(t *testing.T, src string)
		dstMut  func(t *testing.T, dst string)
		noDst   bool
		nothing bool // neither run has anything to say
	}{
		{name: "new-group", noDst: true},
		{name: "data-changed", srcMut: func(t *testing.T, src string) {
			os.WriteFile(filepath.Join(src, "license.txt"), []byte("GPL v3"), 0o644)
			os.Chtimes(filepath.Join(src, "license.txt"), later, later)
		}},
		{name: "mode-changed", srcMut: func(t *testing.T, src string) {
			os.Chmod(filepath.Join(src, "a/license.txt"), 0o600)
		}},
		{name: "unchanged", nothing: true},
		{name: "follower-unlinked", dstMut: func(t *testing.T, dst string) {
			relinkCopy(t, dst, "a/license.txt", time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
		}},
		{name: "follower-unlinked-older", dstMut: func(t *testing.T, dst string) {
			relinkCopy(t, dst, "a/license.txt", time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
		}},
		{name: "follower-missing", dstMut: func(t *testing.T, dst string) {
			os.Remove(filepath.Join(dst, "a/license.txt"))
		}},
	}
	for _, mode := range []string{"local", "push"} {
		for _, c := range cases {
			t.Run(mode+"/"+c.name, func(t *testing.T) {
				src := hardlinkTree(t)
				tmp := t.TempDir()
				rdst, odst := filepath.Join(tmp, "rsync"), filepath.Join(tmp, "ours")
				if !c.noDst {
					for _, d := range []string{rdst, odst} {
						if out, err := exec.Command("rsync", "-aH", src+"/", d+"/").CombinedOutput(); err != nil {
							t.Fatalf("rsync: %v\n%s", err, out)
						}
					}
				}
				if c.srcMut != nil {
					c.srcMut(t, src)
				}
				if c.dstMut != nil {
					c.dstMut(t, rdst)
					c.dstMut(t, odst)
					// Both DSTs' directories touched by the change get
					// the same mtime.
					touchDirs(t, rdst, odst)
				}
				rsyncRun := func(flags string) []string {
					// rsync the same way (a push's lines start with '<').
					lines, code := rsyncItemize(t, mode, "C.UTF-8", []string{flags}, src, rdst)
					if code != 0 {
						t.Fatalf("rsync %s: exit %d", flags, code)
					}
					return groupLines(lines, members)
				}
				o := options(mode, src, odst)
				o.DryRun = true
				dry := groupLines(run(t, o).Changes, members)
				if want := rsyncRun("-aHni"); !slices.Equal(dry, want) {
					t.Errorf("dry run:\n  %q\nrsync -aHni:\n  %q", dry, want)
				}
				o.DryRun, o.ItemizeChanges = false, true
				real := groupLines(run(t, o).Changes, members)
				if want := rsyncRun("-aHi"); !slices.Equal(real, want) {
					t.Errorf("real run:\n  %q\nrsync -aHi:\n  %q", real, want)
				}
				if (len(dry) == 0) != c.nothing {
					t.Errorf("dry run said %q: a weak case", dry)
				}
				rsyncItemizeNothing(t, src, odst)
			})
		}
	}
}

// relinkCopy replaces DST's name p (a hardlink) with a copy of its own,
// with mtime mt.
func relinkCopy(t *testing.T, dst, p string, mt time.Time) {
	t.Helper()
	full := filepath.Join(dst, p)
	b, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(full)
	if err := os.WriteFile(full, b, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(full, mt, mt)
}

// touchDirs gives the directories of both trees the same mtime, one the
// source does not have.
func touchDirs(t *testing.T, roots ...string) {
	t.Helper()
	mt := time.Date(2025, 2, 2, 0, 0, 0, 0, time.UTC)
	for _, r := range roots {
		filepath.Walk(r, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.IsDir() {
				os.Chtimes(p, mt, mt)
			}
			return err
		})
	}
}

// rsyncItemizeNothing fails t unless the real rsync -aHni finds nothing
// to change from src to dst, hardlinks included.
func rsyncItemizeNothing(t *testing.T, src, dst string) {
	t.Helper()
	out, err := exec.Command("rsync", "-aHni", src+"/", dst+"/").CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("after the restore, rsync -aHni still sees: %v\n%s", err, out)
	}
}
