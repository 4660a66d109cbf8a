package restore_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/treewalk"
)

// linkKindsGroups are the hardlink groups of linkKindsTree, by path.
var linkKindsGroups = [][]string{
	{"block3", "block3.5"},
	{"fifo1", "d/fifo2", "d/fifo3"},
	{"sym1", "sym2"},
	{"filelist", "d/filelist"},
}

// linkKindsTree is a SRC with a hardlink group of each kind but
// directories, as rsync's hardlinks.test makes them: two block devices
// sharing an inode (b 105,73), three hardlinked fifos in two directories,
// two hardlinked symlinks (ln -P), a file and a link to it; whole-second
// mtimes (rsync 3.2's quick check compares seconds).
func linkKindsTree(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "S")
	writeFiles(t, src, map[string]string{"filelist": "a list of files\n", "d/other": "x"})
	mk := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mk(unix.Mknod(filepath.Join(src, "block3"), unix.S_IFBLK|0o640, int(unix.Mkdev(105, 73))))
	mk(unix.Mkfifo(filepath.Join(src, "fifo1"), 0o644))
	mk(os.Symlink("filelist", filepath.Join(src, "sym1")))
	for _, l := range [][2]string{{"block3", "block3.5"}, {"fifo1", "d/fifo2"}, {"fifo1", "d/fifo3"}, {"filelist", "d/filelist"}} {
		mk(os.Link(filepath.Join(src, l[0]), filepath.Join(src, l[1])))
	}
	// link(2) without AT_SYMLINK_FOLLOW, as ln -P: the symlink itself.
	mk(unix.Linkat(unix.AT_FDCWD, filepath.Join(src, "sym1"), unix.AT_FDCWD, filepath.Join(src, "sym2"), 0))
	mt := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	touchAll(t, src, mt)
	mk(unix.Lutimes(filepath.Join(src, "sym1"), []unix.Timeval{unix.NsecToTimeval(mt.UnixNano()), unix.NsecToTimeval(mt.UnixNano())}))
	return src
}

// kindsLines makes itemize lines comparable between rsync and us: the
// name of a member of a hardlink group becomes its group's number and
// the name after " => " becomes "<leader>", since rsync and we choose
// different leaders (README: "Itemized changes"); the update type, the
// file type, the attribute flags, a symlink's " -> TARGET" and whether
// the line names a leader are kept. Lines that are not itemize lines
// are dropped. The result is sorted.
func kindsLines(lines []string, groups [][]string) []string {
	var out []string
	for _, l := range lines {
		if len(l) < 12 || l[11] != ' ' || !strings.ContainsRune("<>ch.*", rune(l[0])) || !strings.ContainsRune("fdLDS", rune(l[1])) {
			continue // not an itemize line: rsync's --stats
		}
		rest, _, arrow := strings.Cut(l[12:], " => ")
		name, target, symlink := strings.Cut(rest, " -> ")
		for _, g := range groups {
			if slices.Contains(g, name) {
				l = l[:12] + "<group " + g[0] + ">"
				if symlink {
					l += " -> " + target
				}
				if arrow {
					l += " => <leader>"
				}
				break
			}
		}
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

// linkedGroups returns, for each group of paths, whether its members
// share one inode in root.
func linkedGroups(t *testing.T, root string, groups [][]string) []bool {
	t.Helper()
	var out []bool
	for _, g := range groups {
		same := true
		var first uint64
		for i, p := range g {
			fi, err := os.Lstat(filepath.Join(root, p))
			if err != nil {
				t.Fatal(err)
			}
			ino := fi.Sys().(*syscall.Stat_t).Ino
			if i == 0 {
				first = ino
			} else if ino != first {
				same = false
			}
		}
		out = append(out, same)
	}
	return out
}

// Hardlinked devices, fifos and symlinks come out as rsync -aH makes
// them: the same tree with the same inode groups (treewalk.Compare checks
// link groups of every kind), and the same itemized lines (hD, hS, hL
// with " => LEADER"), on a dry run and a real run, for a new DST, a DST
// where one member of each group is missing, one where the members are
// separate inodes (made without -H), and a rerun that has nothing to do; with --delete
// too, which must delete nothing of the groups.
func TestHardlinkKindsMatchRsync(t *testing.T) {
	testenv.RequireTool(t, "rsync")
	if os.Geteuid() != 0 {
		t.Skip("device nodes need root")
	}
	cases := []struct {
		name     string
		dstMut   func(t *testing.T, dst string)
		noDst    bool
		unlinked bool // DST made by rsync -a without -H: separate inodes
		del      bool
		nothing  bool // neither run has anything to say
	}{
		{name: "new", noDst: true},
		{name: "follower-missing", dstMut: func(t *testing.T, dst string) {
			for _, p := range []string{"block3.5", "d/fifo2", "sym2"} {
				if err := os.Remove(filepath.Join(dst, p)); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{name: "follower-missing-delete", del: true, dstMut: func(t *testing.T, dst string) {
			os.Remove(filepath.Join(dst, "sym2"))
			writeFiles(t, dst, map[string]string{"d/extra": "gone"})
		}},
		{name: "separate-inodes", unlinked: true},
		{name: "unchanged", nothing: true},
		{name: "unchanged-delete", del: true, nothing: true},
	}
	for _, mode := range modes {
		for _, c := range cases {
			t.Run(mode+"/"+c.name, func(t *testing.T) {
				src := linkKindsTree(t)
				tmp := t.TempDir()
				rdst, odst := filepath.Join(tmp, "rsync"), filepath.Join(tmp, "ours")
				if !c.noDst {
					flags := "-aH"
					if c.unlinked {
						flags = "-a"
					}
					for _, d := range []string{rdst, odst} {
						if out, err := exec.Command("rsync", flags, src+"/", d+"/").CombinedOutput(); err != nil {
							t.Fatalf("rsync: %v\n%s", err, out)
						}
					}
				}
				if c.dstMut != nil {
					c.dstMut(t, rdst)
					c.dstMut(t, odst)
					touchDirs(t, rdst, odst)
				}
				rsyncRun := func(flags ...string) []string {
					if c.del {
						flags = append(flags, "--delete")
					}
					// rsync itself pulls or pushes, so that its first
					// letter says the direction as ours does.
					out, code := rsyncItemize(t, mode, "C.UTF-8", flags, src, rdst)
					if code != 0 {
						t.Fatalf("rsync %s: exit %d", flags, code)
					}
					return kindsLines(out, linkKindsGroups)
				}
				o := options(mode, src, odst)
				o.Delete = c.del
				o.DryRun = true
				dry := kindsLines(run(t, o).Changes, linkKindsGroups)
				if want := rsyncRun("-aHni"); !slices.Equal(dry, want) {
					t.Errorf("dry run:\n  %q\nrsync -aHni:\n  %q", dry, want)
				}
				o.DryRun, o.ItemizeChanges = false, true
				real := kindsLines(run(t, o).Changes, linkKindsGroups)
				if want := rsyncRun("-aHi"); !slices.Equal(real, want) {
					t.Errorf("real run:\n  %q\nrsync -aHi:\n  %q", real, want)
				}
				if (len(dry) == 0) != c.nothing {
					t.Errorf("dry run said %q: a weak case", dry)
				}
				if got, want := linkedGroups(t, odst, linkKindsGroups), linkedGroups(t, rdst, linkKindsGroups); !slices.Equal(got, want) || slices.Contains(got, false) {
					t.Errorf("groups sharing an inode: ours %v, rsync's %v; want all", got, want)
				}
				diffs, err := treewalk.Compare(context.Background(), rdst, odst, treewalk.CompareOptions{IgnoreDirTimes: c.dstMut != nil})
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range diffs {
					t.Errorf("ours differs from rsync's: %s", d)
				}
				rsyncItemizeNothing(t, src, odst)
				if again := run(t, o).Changes; len(again) > 0 {
					t.Errorf("a rerun still changes %q", again)
				}
			})
		}
	}
}

// A new name linked to a file DST already holds up to date (size and
// mtime) is linked to it on DST, and no data is sent, as rsync -aH sends
// no literal data: whether the new name comes before the old one in the
// file list (it is then the group's leader) or after. The report counts
// no bytes and the wire carries far less than the file; both names share
// one inode on DST; the itemized lines are rsync's; a rerun has nothing
// to do.
func TestNewHardlinkToFileDstHasSendsNoData(t *testing.T) {
	testenv.RequireTool(t, "rsync")
	const size = 5 << 20
	for _, newName := range []string{"dir/filelist", "zdir/filelist"} {
		for _, mode := range modes {
			t.Run(mode+"/"+strings.Split(newName, "/")[0], func(t *testing.T) {
				src := filepath.Join(t.TempDir(), "S")
				writeFiles(t, src, map[string]string{"filelist": string(patternedBytes(size)), "other": "x"})
				touchAll(t, src, time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
				tmp := t.TempDir()
				rdst, odst := filepath.Join(tmp, "rsync"), filepath.Join(tmp, "ours")
				for _, d := range []string{rdst, odst} {
					if out, err := exec.Command("rsync", "-aH", src+"/", d+"/").CombinedOutput(); err != nil {
						t.Fatalf("rsync: %v\n%s", err, out)
					}
				}
				os.MkdirAll(filepath.Join(src, filepath.Dir(newName)), 0o755)
				if err := os.Link(filepath.Join(src, "filelist"), filepath.Join(src, newName)); err != nil {
					t.Fatal(err)
				}
				groups := [][]string{{"filelist", newName}}
				out, err := exec.Command("rsync", "-aHi", "--stats", src+"/", rdst+"/").CombinedOutput()
				if err != nil {
					t.Fatalf("rsync: %v\n%s", err, out)
				}
				if !strings.Contains(string(out), "Literal data: 0 bytes") {
					t.Fatalf("rsync sent literal data:\n%s", out)
				}
				o := options(mode, src, odst)
				o.DryRun = true
				dry := kindsLines(run(t, o).Changes, groups)
				o.DryRun, o.ItemizeChanges = false, true
				rep := run(t, o)
				want := kindsLines(strings.Split(strings.TrimSpace(string(out)), "\n"), groups)
				if got := kindsLines(rep.Changes, groups); !slices.Equal(got, want) {
					t.Errorf("real run:\n  %q\nrsync -aHi:\n  %q", got, want)
				}
				if !slices.Equal(dry, want) {
					t.Errorf("dry run:\n  %q\nrsync -aHi:\n  %q", dry, want)
				}
				if rep.Bytes != 0 || rep.WireBytes > size/10 {
					t.Errorf("report: %d bytes of data, %d on the wire; want none of the %d-byte file", rep.Bytes, rep.WireBytes, size)
				}
				if got := linkedGroups(t, odst, groups); !got[0] {
					t.Errorf("filelist and %s are separate inodes on DST", newName)
				}
				assertSameTree(t, src, odst)
				if again := run(t, o); len(again.Changes) > 0 || again.Bytes != 0 {
					t.Errorf("a rerun changes %q, %d bytes", again.Changes, again.Bytes)
				}
			})
		}
	}
}

// The rsync method (through the agent's file list) links hardlinked
// devices, fifos and symlinks as rsync -aH does; the tar method restores
// the same tree with those (not files) as separate inodes, as the README
// says.
func TestHardlinkKindsOtherMethods(t *testing.T) {
	testenv.RequireTool(t, "rsync")
	if os.Geteuid() != 0 {
		t.Skip("device nodes need root")
	}
	src := linkKindsTree(t)
	ref := filepath.Join(t.TempDir(), "rsync")
	if out, err := exec.Command("rsync", "-aH", "--devices", "--specials", src+"/", ref+"/").CombinedOutput(); err != nil {
		t.Fatalf("rsync: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		name   string
		mode   string
		method restore.Method
		linked []bool // per linkKindsGroups
	}{
		{"rsync/pull", "pull", restore.MethodRsync, []bool{true, true, true, true}},
		{"tar/pull", "pull", restore.MethodTar, []bool{false, false, false, true}},
		{"tar/local", "local", restore.MethodTar, []bool{false, false, false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "ours")
			o := options(tc.mode, src, dst)
			o.Method = tc.method
			run(t, o)
			if got := linkedGroups(t, dst, linkKindsGroups); !slices.Equal(got, tc.linked) {
				t.Errorf("groups sharing an inode: %v; want %v", got, tc.linked)
			}
			diffs, err := treewalk.Compare(context.Background(), ref, dst, treewalk.CompareOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range diffs {
				// rsync 3.2.7 does not give device nodes their mtimes.
				if d.What == treewalk.DiffMtime && strings.HasPrefix(d.Path, "block3") ||
					d.What == treewalk.DiffHardlink && !tc.linked[0] {
					continue
				}
				t.Errorf("ours differs from rsync's: %s", d)
			}
			run(t, o)
			if got := linkedGroups(t, dst, linkKindsGroups); !slices.Equal(got, tc.linked) {
				t.Errorf("after a rerun, groups sharing an inode: %v; want %v", got, tc.linked)
			}
		})
	}
}
