package restore_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/treewalk"
)

// mergeTree builds under root the trees of rsync's merge.test (from1,
// from2 and from3 sharing names, a directory in one where another has a
// file, deep/arg-test, shallow), relative.test's down/3/deep with
// extra/down/3/deep/extra.added.value, and b1 and b2: the same file name
// with other contents, a file in one where the other has a directory
// (both ways), the same directory with other modes and mtimes, and
// hardlinks (b2/x with b2/y, b1/q with b2/p). Mtimes are whole seconds
// (rsync 3.2's quick check compares seconds).
func mergeTree(t *testing.T, root string) {
	t.Helper()
	writeFiles(t, root, map[string]string{
		"from1/one": "one\n", "from2/one": "one\n", "from3/one": "one\n",
		"from1/two": "two\n", "from2/three": "three\n", "from3/four": "four\n",
		"from1/five": "five\n", "from3/six": "six\n",
		"from2/sub1/uno": "sub1\n", "from3/sub1/uno": "sub1\n", "from3/sub1/dos": "sub2\n",
		"from2/sub1/tres": "sub3\n", "from3/sub2/subby": "subby\n",
		"from1/dir-and-not-dir/inside": "extra\n", "from3/dir-and-not-dir": "not-dir\n",
		"deep/arg-test": "arg-test\n", "shallow": "shallow\n",
		"down/3/deep/a": "a\n", "down/3/deep/sub/b": "b\n", "down/top": "top\n",
		"extra/down/3/deep/extra.added.value": "wowza\n",
		"b1/x":                                "plain\n", "b2/x": "linked\n", "b2/p": "p and q\n",
		"b1/a": "a file\n", "b2/a/in": "in a dir\n", "b1/b/in": "in b dir\n", "b2/b": "b file\n",
		"b1/d/f": "one\n", "b2/d/f": "two two\n", "b2/d/g": "only in b2\n",
	})
	for _, l := range [][2]string{{"b2/x", "b2/y"}, {"b2/p", "b1/q"}} {
		if err := os.Link(filepath.Join(root, l[0]), filepath.Join(root, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	for p, mode := range map[string]os.FileMode{"b1": 0o701, "b2": 0o705, "b1/d": 0o700, "b2/d": 0o751, "from2/sub1": 0o750} {
		os.Chmod(filepath.Join(root, p), mode)
	}
	touchAll(t, root, time.Date(2024, 2, 3, 4, 5, 6, 0, time.UTC))
	for p, mt := range map[string]time.Time{"b2": time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC), "b2/d": time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)} {
		os.Chtimes(filepath.Join(root, p), mt, mt)
	}
}

// assertSameAsRsync fails the test unless dst (ours) is the tree that
// rsync made at rdst: names, kinds, contents, modes, owners, mtimes,
// symlink targets, hardlink groups, xattrs and ACLs; DST's own mode, and
// its mtime when rsync gave it a source directory's (older than since).
func assertSameAsRsync(t *testing.T, rdst, dst string, since time.Time) {
	t.Helper()
	diffs, err := treewalk.Compare(context.Background(), rdst, dst, treewalk.CompareOptions{IgnoreRootDir: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Errorf("rsync's tree and ours differ: %s", d)
	}
	rfi, err := os.Stat(rdst)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if rfi.Mode() != fi.Mode() {
		t.Errorf("DST: rsync made it %v, restoresync %v", rfi.Mode(), fi.Mode())
	}
	// A file system dates an entry by the kernel's coarse clock, which
	// can be a tick behind time.Now: a DST that rsync made just after
	// since may be dated a few ms before it. The sources are dated 2021
	// and 2024 (mergeTree), so a second apart tells a source's mtime from
	// the time rsync wrote DST.
	if rfi.ModTime().Before(since.Add(-time.Second)) && !rfi.ModTime().Equal(fi.ModTime()) {
		t.Errorf("DST: rsync gave it mtime %v, restoresync %v", rfi.ModTime(), fi.ModTime())
	}
}

// -R with SRCs from different bases that give the same paths merges them
// as the real rsync -aHAX -R does, pull, push and local (and a pull by
// the tar method): directories
// combine, for another path the first SRC given wins (a directory wins
// over a file), a directory's metadata and DST's own (".", given or
// implied) come from the first SRC that gives it, hardlink groups follow
// the names kept; rsync's merge.test and relative.test's --delete with an
// extra file from another base, which deletes only what no SRC gives.
func TestRelativeMergeMatchesRsync(t *testing.T) {
	testenv.RequireTool(t, "rsync")
	T := filepath.Join(t.TempDir(), "src")
	mergeTree(t, T)
	cases := []struct {
		name   string
		before []string // SRCs of a first run into DST, if any
		srcs   []string // "T" is the tree
		delete bool
	}{
		{name: "merge-test", srcs: []string{"T/deep/./arg-test", "T/././shallow", "T/from1/./", "T/from2/./", "T/from3/./"}},
		{name: "merge-test-reversed", srcs: []string{"T/from3/./", "T/from2/./", "T/from1/./", "T/deep/./arg-test"}},
		{name: "conflicts", srcs: []string{"T/b1/./", "T/b2/./"}},
		{name: "conflicts-reversed", srcs: []string{"T/b2/./", "T/b1/./"}},
		{name: "implied-root-first", srcs: []string{"T/b1/././x", "T/b2/./"}},
		{name: "root-from-second", srcs: []string{"T/b1/./x", "T/b2/./d", "T/b2/./"}},
		{name: "same-dir-below", srcs: []string{"T/b1/./d/f", "T/b2/./d"}},
		{name: "relative-extra", srcs: []string{"T/./down/3/deep", "T/extra/./down/3/deep/extra.added.value"}},
		{name: "relative-extra-delete", before: []string{"T/./down/3/deep"}, srcs: []string{"T/./down/3/deep", "T/extra/./down/3/deep/extra.added.value"}, delete: true},
	}
	for _, c := range cases {
		for _, mode := range append(modes, "tar-pull") {
			if mode == "tar-pull" && c.delete {
				continue // the tar method does not delete
			}
			t.Run(c.name+"/"+mode, func(t *testing.T) {
				since := time.Now()
				tmp := t.TempDir()
				rdst, dst := filepath.Join(tmp, "rsync"), filepath.Join(tmp, "ours")
				runs := [][]string{c.srcs}
				if c.before != nil {
					runs = [][]string{c.before, c.srcs}
				}
				for n, srcs := range runs {
					if n == 1 { // between the runs, DST gains a file no SRC has
						writeFiles(t, rdst, map[string]string{"down/3/deep/sub/stale": "stale"})
						writeFiles(t, dst, map[string]string{"down/3/deep/sub/stale": "stale"})
					}
					args := []string{"-aHAXR"}
					if c.delete {
						args = append(args, "--delete")
					}
					for _, s := range srcs {
						args = append(args, strings.Replace(s, "T", T, 1))
					}
					args = append(args, rdst+"/")
					out, err := exec.Command("rsync", args...).CombinedOutput()
					if err != nil {
						t.Fatalf("rsync %q: %v\n%s", args, err, out)
					}
					o := options(strings.TrimPrefix(mode, "tar-"), strings.Replace(srcs[0], "T", T, 1), dst)
					if mode == "tar-pull" {
						o.Method = restore.MethodTar
					}
					for _, s := range srcs[1:] {
						p := strings.Replace(s, "T", T, 1)
						if strings.HasSuffix(mode, "pull") {
							p = "backup:" + p
						}
						o.MoreSrc = append(o.MoreSrc, p)
					}
					o.Relative, o.Delete = true, c.delete
					run(t, o)
				}
				assertSameAsRsync(t, rdst, dst, since)
				if c.delete {
					if _, err := os.Stat(filepath.Join(dst, "down/3/deep/a")); err != nil {
						t.Errorf("--delete deleted a file of the first SRC: %v", err)
					}
					if _, err := os.Lstat(filepath.Join(dst, "down/3/deep/sub/stale")); err == nil {
						t.Errorf("--delete kept a file that no SRC gives")
					}
				}
			})
		}
	}
}
