package restore_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/treewalk"
)

// rawAndTar are the methods and directions that take selections (the
// rsync method refuses them).
var rawAndTar = []struct {
	name   string
	mode   string
	method restore.Method
}{
	{"raw/local", "local", restore.MethodRaw},
	{"raw/pull", "pull", restore.MethodRaw},
	{"raw/push", "push", restore.MethodRaw},
	{"tar/local", "local", restore.MethodTar},
	{"tar/pull", "pull", restore.MethodTar},
}

// inodeGroups returns the regular files under root grouped by inode (each
// group sorted, groups sorted by first member), and each file's link count.
func inodeGroups(t *testing.T, root string) ([][]string, map[string]uint64) {
	t.Helper()
	byIno := map[uint64][]string{}
	nlink := map[string]uint64{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		rel, _ := filepath.Rel(root, p)
		byIno[st.Ino] = append(byIno[st.Ino], rel)
		nlink[rel] = uint64(st.Nlink)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var groups [][]string
	for _, g := range byIno {
		slices.Sort(g)
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return groups, nlink
}

// A hardlink group split by the selection (its first member excluded, its
// last ones, the middle one; a pair of which one is left; a group whose
// members are several SRCs with -R): what is selected comes back as one
// file plus links to it, linked to nothing outside the restored set (each
// file's link count is its group's size in DST), exactly as the real rsync
// -aH with the same rules restores it; for the raw method in every
// direction and for tar.
func TestHardlinkGroupSplitBySelection(t *testing.T) {
	testenv.RequireTool(t, "rsync")
	src := filepath.Join(t.TempDir(), "alice")
	TestDir{
		"a":    TestDir{"leader.txt": TestFile{Content: "group of three"}},
		"b":    TestDir{"follower1.txt": TestHardlink{To: "a/leader.txt"}},
		"c":    TestDir{"follower2.txt": TestHardlink{To: "a/leader.txt"}},
		"x":    TestDir{"one.txt": TestFile{Content: "pair"}},
		"y":    TestDir{"two.txt": TestHardlink{To: "x/one.txt"}},
		"keep": TestDir{"plain.txt": TestFile{Content: "plain"}},
	}.build(t, src)
	ex := func(p string) treewalk.Rule { return treewalk.Rule{Pattern: p} }
	cases := []struct {
		name    string
		rules   []treewalk.Rule
		parts   []string // several SRCs with -R when set
		want    [][]string
		rsyncOK bool // compare with rsync -aH's copy
	}{
		{"leader excluded", []treewalk.Rule{ex("/a/")}, nil,
			[][]string{{"b/follower1.txt", "c/follower2.txt"}, {"keep/plain.txt"}, {"x/one.txt", "y/two.txt"}}, true},
		{"followers excluded", []treewalk.Rule{ex("/b/"), ex("/c/"), ex("two.txt")}, nil,
			[][]string{{"a/leader.txt"}, {"keep/plain.txt"}, {"x/one.txt"}}, true},
		{"middle excluded", []treewalk.Rule{ex("follower1.txt"), ex("one.txt")}, nil,
			[][]string{{"a/leader.txt", "c/follower2.txt"}, {"keep/plain.txt"}, {"y/two.txt"}}, true},
		{"followers as SRCs", nil, []string{"b", "c", "y"},
			[][]string{{"b/follower1.txt", "c/follower2.txt"}, {"y/two.txt"}}, false},
	}
	for _, tc := range cases {
		var ref string
		if tc.rsyncOK {
			ref = filepath.Join(t.TempDir(), "ref")
			args := []string{"-aH"}
			for _, r := range tc.rules {
				args = append(args, "--exclude="+r.Pattern)
			}
			if out, err := exec.Command("rsync", append(args, src+"/", ref+"/")...).CombinedOutput(); err != nil {
				t.Fatalf("rsync: %v\n%s", err, out)
			}
		}
		for _, m := range rawAndTar {
			t.Run(tc.name+"/"+m.name, func(t *testing.T) {
				t.Parallel()
				dst := filepath.Join(t.TempDir(), "alice")
				o := options(m.mode, src, dst)
				if tc.parts != nil {
					o = options(m.mode, src+"/./"+tc.parts[0], dst)
					for _, p := range tc.parts[1:] {
						o.MoreSrc = append(o.MoreSrc, strings.Replace(o.Src, "/./"+tc.parts[0], "/./"+p, 1))
					}
					o.Relative = true
				}
				o.Method, o.Filters = m.method, tc.rules
				rep := run(t, o)
				groups, nlink := inodeGroups(t, dst)
				if !slices.EqualFunc(groups, tc.want, slices.Equal) {
					t.Errorf("hardlink groups in DST: %q; want %q", groups, tc.want)
				}
				for _, g := range groups {
					for _, p := range g {
						if nlink[p] != uint64(len(g)) {
							t.Errorf("%s has %d links; its group in DST has %d members (a link outside the restored set?)", p, nlink[p], len(g))
						}
						want, _ := os.ReadFile(filepath.Join(src, p))
						if got, err := os.ReadFile(filepath.Join(dst, p)); err != nil || string(got) != string(want) {
							t.Errorf("%s: %q, %v; want %q", p, got, err, want)
						}
					}
				}
				links := 0
				for _, g := range tc.want {
					links += len(g) - 1
				}
				if rep.Hardlinks != links {
					t.Errorf("report counts %d hardlinks; want %d", rep.Hardlinks, links)
				}
				if ref != "" {
					assertSameTree(t, ref, dst)
				}
				// The source's groups are untouched.
				if _, srcLinks := inodeGroups(t, src); srcLinks["a/leader.txt"] != 3 || srcLinks["x/one.txt"] != 2 {
					t.Errorf("source link counts changed: %v", srcLinks)
				}
			})
		}
	}
}

// swapper plants symlinks in a destination while a restore writes it, as
// an account's owner could on a live server: each directory named in dirs
// is moved aside (within DST) and replaced by a symlink to outside, and
// each file named in files by a symlink to outside's canary.
type swapper struct {
	dst, outside string
	dirs, files  []string

	mu    sync.Mutex
	swaps int
}

// swapOnce plants every symlink it can once; what does not exist yet is
// skipped.
func (s *swapper) swapOnce() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.dirs {
		p := filepath.Join(s.dst, d)
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			continue
		}
		aside := filepath.Join(s.dst, fmt.Sprintf(".aside-%d", s.swaps))
		if os.Rename(p, aside) == nil && os.Symlink(s.outside, p) == nil {
			s.swaps++
		}
	}
	for _, f := range s.files {
		p := filepath.Join(s.dst, f)
		if fi, err := os.Lstat(filepath.Dir(p)); err != nil || !fi.IsDir() {
			continue // the swapper's own symlink: planting through it would write outside
		}
		tmp := p + ".planted"
		if os.Symlink(filepath.Join(s.outside, "canary"), tmp) == nil {
			if os.Rename(tmp, p) == nil {
				s.swaps++
			} else {
				os.Remove(tmp)
			}
		}
	}
}

// Symlinks planted in DST while the restore runs, by every method: a
// directory of the account replaced by a symlink to a directory outside
// DST (as to /etc), a file by a symlink to an outside file (as to
// /root/.bashrc). They are planted at a third of the transfer (the stream
// held until they are in place) and again and again by a goroutine until
// the run ends. Nothing outside DST is written or created: the outside
// directory keeps only its canary, unchanged. The entries concerned are
// restored in place of the links or fail with a clear error; a rerun
// (after removing what the "attacker" moved aside) completes the tree.
func TestPlantedSymlinkDuringRestore(t *testing.T) {
	src := filepath.Join(t.TempDir(), "alice")
	faultTree(t, src)
	// rsync cannot restore 255-byte names (its temporary name is longer).
	must(t, os.Remove(filepath.Join(src, "public_html", strings.Repeat("n", 255))))
	cases := append(slices.Clone(methodCases), methodCases[0])
	cases[len(cases)-1].name, cases[len(cases)-1].mode = "raw/local", "local"
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			outside := filepath.Join(base, "etc")
			must(t, os.Mkdir(outside, 0o755))
			canary := filepath.Join(outside, "canary")
			must(t, os.WriteFile(canary, []byte("root's file"), 0o644))
			dst := filepath.Join(base, "alice")
			s := &swapper{dst: dst, outside: outside,
				dirs:  []string{"posts", "media", "public_html/uploads/2024", "mail/example.com", "logs", "backups"},
				files: []string{"public_html/index.php", "posts/post-30.html", "logs/access.log"}}
			f := &faults{}
			f.hookAt, f.hook = 1<<20, s.swapOnce
			o := options(tc.mode, src, dst) // local: only the goroutine plants
			if tc.mode != "local" {
				o = faultOptions(tc.mode, src, dst, f)
			}
			o.Method, o.Jobs = tc.method, 2
			o.Writer.BlockSizeBytes = 1 << 20
			done := make(chan struct{})
			stopped := make(chan struct{})
			go func() {
				defer close(stopped)
				for {
					select {
					case <-done:
						return
					default:
						s.swapOnce()
					}
				}
			}()
			rep, err := restore.Run(context.Background(), o)
			close(done)
			<-stopped
			if ents, _ := os.ReadDir(outside); len(ents) != 1 {
				names := []string{}
				for _, e := range ents {
					names = append(names, e.Name())
				}
				t.Errorf("written outside DST: %s holds %q", outside, names)
			}
			if b, err := os.ReadFile(canary); err != nil || string(b) != "root's file" {
				t.Errorf("the outside canary: %q, %v", b, err)
			}
			if s.swaps == 0 {
				t.Fatal("no symlink was planted")
			}
			if rep == nil {
				rep = &restore.Report{}
			}
			if err == nil {
				for _, fe := range rep.Errors {
					if !strings.Contains(fe.Error, "symbolic link") && !strings.Contains(fe.Error, "symlink") &&
						!strings.Contains(fe.Error, "no such file") && !strings.Contains(fe.Error, "not a directory") &&
						!strings.Contains(fe.Error, "could not be restored") {
						t.Errorf("%s: %q does not say what was in the way", fe.Path, fe.Error)
					}
				}
			}
			t.Logf("%d symlinks planted; run error %v; %d per-entry errors", s.swaps, err, len(rep.Errors))
			for _, fe := range rep.Errors[:min(len(rep.Errors), 8)] {
				t.Logf("  %s: %s", fe.Path, fe.Error)
			}
			// The attacker's leftovers go; a rerun completes the tree.
			asides, _ := filepath.Glob(filepath.Join(dst, ".aside-*"))
			for _, p := range asides {
				must(t, os.RemoveAll(p))
			}
			if tc.method == restore.MethodRsync {
				removeGokrazyTemps(t, src, dst)
			}
			o = options(tc.mode, src, dst)
			o.Method = tc.method
			run(t, o)
			assertSameTreeQuick(t, src, dst)
		})
	}
}

// gokrazyTemp matches the temporary files gokrazy/rsync's receiver makes
// (renameio's "." + name + a decimal number) at the top of DST.
var gokrazyTemp = regexp.MustCompile(`^\..+[0-9]+$`)

// removeGokrazyTemps removes what an interrupted gokrazy/rsync receiver
// left at the top of dst (README: "gokrazy's stale temporary files from an
// interrupted run are not swept") and returns how many there were.
func removeGokrazyTemps(t testing.TB, src, dst string) int {
	t.Helper()
	ents, _ := os.ReadDir(dst)
	n := 0
	for _, e := range ents {
		if _, err := os.Lstat(filepath.Join(src, e.Name())); err == nil || !gokrazyTemp.MatchString(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		must(t, os.Remove(filepath.Join(dst, e.Name())))
		n++
	}
	return n
}
