package restore_test

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// deleteTree is a SRC of many chunks at 3 entries a chunk, and the
// extras a DST restored from it then gets in many of its directories
// (files, directories with contents, nested), so that --delete deletes
// in many chunks.
func deleteTree(t *testing.T) (src string, extras map[string]string) {
	t.Helper()
	src = filepath.Join(t.TempDir(), "S")
	files := map[string]string{"top.txt": "top"}
	extras = map[string]string{"zz-top": "z", "aa-old/x": "x", "aa-old/sub/y": "y", "aa-old/m": "m"}
	for _, d := range []string{"a", "b", "c", "d"} {
		for f := range 3 {
			files[fmt.Sprintf("%s/f%d", d, f)] = d
			files[fmt.Sprintf("%s/sub/g%d", d, f)] = d
		}
		extras[d+"/x1"] = "1"
		extras[d+"/x2"] = "2"
		extras[d+"/zdir/k"] = "k"
		extras[d+"/zdir/inner/q"] = "q"
		extras[d+"/sub/y"] = "y"
	}
	writeFiles(t, src, files)
	touchAll(t, src, time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	return src, extras
}

// deletionsByDir groups the "*deleting" lines of lines by the directory
// of src whose pass deletes them (the innermost one src has), keeping
// their order: the order rsync gives them within a directory, which does
// not depend on how its output interleaves with the other lines.
func deletionsByDir(lines []string, src string) map[string][]string {
	out := map[string][]string{}
	for _, l := range lines {
		name, ok := strings.CutPrefix(l, "*deleting   ")
		if !ok {
			continue
		}
		dir := path.Dir(strings.TrimSuffix(name, "/"))
		for dir != "." {
			if fi, err := os.Lstat(filepath.Join(src, dir)); err == nil && fi.IsDir() {
				break
			}
			dir = path.Dir(dir)
		}
		out[dir] = append(out[dir], name)
	}
	return out
}

// --delete on a list of many chunks deletes what rsync -aH --delete
// deletes, in each directory in rsync's order (the reverse of its
// sorted order, files before subdirectories, a directory after its
// contents): -n -i --delete says what rsync -aHni --delete says, the
// real run with -i says what rsync -aHi --delete says, and leaves the
// tree as rsync's.
func TestChunkedDeleteMatchesRsync(t *testing.T) {
	testenv.RequireTool(t, "rsync")
	smallChunks(t, 3)
	src, extras := deleteTree(t)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "D")
			rdst := filepath.Join(t.TempDir(), "R")
			o := options(mode, src, dst)
			run(t, o)
			rsyncCopy(t, dst, rdst)
			writeFiles(t, dst, extras)
			writeFiles(t, rdst, extras)
			touchDirs(t, dst, rdst)

			o.DryRun, o.ItemizeChanges, o.Delete = true, true, true
			ours := run(t, o).Changes
			want, code := rsyncItemize(t, mode, "C.UTF-8", []string{"-aHni", "--delete"}, src, rdst)
			if code != 0 || !slices.Equal(groupLines(ours, nil), groupLines(want, nil)) {
				t.Errorf("-n -i --delete:\n  %q\nrsync -aHni --delete (exit %d):\n  %q", ours, code, want)
			}
			if o, w := deletionsByDir(ours, src), deletionsByDir(want, src); fmt.Sprint(o) != fmt.Sprint(w) {
				t.Errorf("-n -i --delete, each directory's deletions:\n  %q\nrsync's:\n  %q", o, w)
			}

			o.DryRun = false
			rep := run(t, o)
			want, code = rsyncItemize(t, mode, "C.UTF-8", []string{"-aHi", "--delete"}, src, rdst)
			if code != 0 || !slices.Equal(groupLines(rep.Changes, nil), groupLines(want, nil)) {
				t.Errorf("-i --delete:\n  %q\nrsync -aHi --delete (exit %d):\n  %q", rep.Changes, code, want)
			}
			if o, w := deletionsByDir(rep.Changes, src), deletionsByDir(want, src); fmt.Sprint(o) != fmt.Sprint(w) {
				t.Errorf("-i --delete, each directory's deletions:\n  %q\nrsync's:\n  %q", o, w)
			}
			if d, _ := countDeleting(want); rep.Deleted != d {
				t.Errorf("--delete removed %d, rsync %d", rep.Deleted, d)
			}
			assertSameTree(t, src, dst)
			assertSameTree(t, rdst, dst)
			rsyncItemizeNothing(t, src, dst)
		})
	}
}

// A push's -n -i --delete and -i --delete give a pull's lines in a
// pull's order, line for line (but '<' for the data a push sends where a
// pull says '>'), on a list of many chunks: the far receiver deletes and
// itemizes each chunk as the pull's writer does.
func TestChunkedPushLinesArePulls(t *testing.T) {
	smallChunks(t, 3)
	src, extras := deleteTree(t)
	lines := map[string][2][]string{}
	for _, mode := range []string{"pull", "push"} {
		dst := filepath.Join(t.TempDir(), "D")
		o := options(mode, src, dst)
		run(t, o)
		writeFiles(t, dst, extras)
		touchDirs(t, dst)
		o.DryRun, o.ItemizeChanges, o.Delete = true, true, true
		dry := run(t, o).Changes
		o.DryRun = false
		real := run(t, o).Changes
		for _, l := range [][]string{dry, real} {
			for i := range l {
				if strings.HasPrefix(l[i], "<") {
					l[i] = ">" + l[i][1:]
				}
			}
		}
		lines[mode] = [2][]string{dry, real}
	}
	for i, what := range []string{"-n -i --delete", "-i --delete"} {
		pull, push := lines["pull"][i], lines["push"][i]
		if len(pull) == 0 || !slices.Equal(push, pull) {
			t.Errorf("%s, pushed:\n  %q\npulled:\n  %q", what, push, pull)
		}
	}
}

// countDeleting counts the "*deleting" lines of lines.
func countDeleting(lines []string) (int, int) {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "*deleting") {
			n++
		}
	}
	return n, len(lines) - n
}

// --delete deletes in a directory once its listing is complete, not at
// the end of the walk: while the sender's walk is held after its first
// chunk, which completes a/, a's extras are gone and b's are still
// there. Local, pulled with one stream (the list and the data share
// it), and pushed (the far receiver deletes as it plans each chunk), with
// one stream and two.
func TestChunkedDeleteBeforeWalkEnds(t *testing.T) {
	smallChunks(t, 4)
	src := filepath.Join(t.TempDir(), "S")
	// The first chunk: ".", "a", "a/1", "a/2", which completes "a".
	files := map[string]string{"a/1": "one", "a/2": "two"}
	for i := range 20 {
		files[fmt.Sprintf("b/%02d", i)] = fmt.Sprint(i)
	}
	writeFiles(t, src, files)
	for _, c := range []struct {
		mode string
		jobs int
	}{{"local", 2}, {"pull", 1}, {"push", 1}, {"push", 2}} {
		t.Run(fmt.Sprintf("%s-%d", c.mode, c.jobs), func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "D")
			writeFiles(t, dst, map[string]string{"a/extra": "x", "b/extra": "y"})
			gone := func(p string) bool {
				_, err := os.Lstat(filepath.Join(dst, p))
				return os.IsNotExist(err)
			}
			aGone, bKept := false, false
			treewalk.AfterChunk = func(n int) {
				if n != 1 {
					return
				}
				// A restore that waited for the walk's end would never
				// delete a/extra here, and the wait ends unmet.
				for end := time.Now().Add(30 * time.Second); !gone("a/extra") && time.Now().Before(end); {
					time.Sleep(5 * time.Millisecond)
				}
				aGone, bKept = gone("a/extra"), !gone("b/extra")
			}
			t.Cleanup(func() { treewalk.AfterChunk = nil })
			o := options(c.mode, src, dst)
			o.Jobs, o.Delete = c.jobs, true
			rep := run(t, o)
			treewalk.AfterChunk = nil
			if !aGone {
				t.Error("with the walk held after its first chunk, which completes a/, a/extra was not deleted")
			}
			if !bKept {
				t.Error("b/extra was deleted while b/ was still being listed")
			}
			if rep.Deleted != 2 {
				t.Errorf("deleted %d, want 2", rep.Deleted)
			}
			assertSameTree(t, src, dst)
		})
	}
}

// Once the sender reports a list error, --delete deletes nothing more,
// local, pulled and pushed alike (a push's far receiver stops at the
// chunk the client says has one): with the walk's first chunk completing
// a/ and b/ then vanishing from SRC before the walk reaches it, a/ loses
// its extra, c/ and ./, complete after the error, keep theirs, DST's b/
// is kept, the run reports b/'s error and warns once; with -i too, whose
// lines say the one deletion.
func TestChunkedDeleteStopsAtVanishedDir(t *testing.T) {
	smallChunks(t, 4)
	for _, c := range []struct {
		mode    string
		itemize bool
	}{{"local", false}, {"pull", false}, {"push", false}, {"local", true}, {"pull", true}, {"push", true}} {
		t.Run(fmt.Sprintf("%s-i=%v", c.mode, c.itemize), func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "S")
			// The first chunk: ".", "a", "a/1", "a/2", which completes "a".
			files := map[string]string{"a/1": "one", "a/2": "two"}
			for i := range 6 {
				files[fmt.Sprintf("b/%02d", i)] = "b"
				files[fmt.Sprintf("c/%02d", i)] = "c"
			}
			writeFiles(t, src, files)
			dst := filepath.Join(t.TempDir(), "D")
			writeFiles(t, dst, map[string]string{"a/extra": "x", "b/extra": "x", "c/extra": "x", "extra": "x"})
			treewalk.AfterChunk = func(n int) {
				if n == 1 {
					must(t, os.RemoveAll(filepath.Join(src, "b")))
				}
			}
			t.Cleanup(func() { treewalk.AfterChunk = nil })
			o := options(c.mode, src, dst)
			o.Jobs, o.Delete, o.ItemizeChanges = 1, true, c.itemize
			var warned []string
			o.Warnf = func(f string, a ...any) { warned = append(warned, fmt.Sprintf(f, a...)) }
			rep, err := restore.Run(context.Background(), o)
			treewalk.AfterChunk = nil
			if err != nil {
				t.Fatal(err)
			}
			for p, want := range map[string]bool{"a/extra": false, "b/extra": true, "c/extra": true, "extra": true, "c/05": true} {
				if _, err := os.Lstat(filepath.Join(dst, p)); (err == nil) != want {
					t.Errorf("%s: exists %v, want %v", p, err == nil, want)
				}
			}
			if rep.Deleted != 1 || len(rep.Errors) != 1 || !strings.HasPrefix(rep.Errors[0].Path, "b") {
				t.Errorf("deleted %d, errors %+v; want 1 deleted, b's one error", rep.Deleted, rep.Errors)
			}
			if n := len(slices.DeleteFunc(slices.Clone(warned), func(w string) bool { return !strings.Contains(w, "nothing deleted") })); n != 1 {
				t.Errorf("warnings %q, want one that nothing more is deleted", warned)
			}
			if d, _ := countDeleting(rep.Changes); c.itemize && (d != 1 || !slices.Contains(rep.Changes, "*deleting   a/extra")) {
				t.Errorf("-i said %q, want a/extra's deletion only", rep.Changes)
			}
		})
	}
}

// --delete's memory does not grow with the tree: a restore with --delete
// of 50,000 and 200,000 files into a DST with extras in every directory,
// then -n -i --delete on the result, each keep the heap under the bound
// of TestChunkedRestoreMemoryBounded, which a list held whole passes
// already at 50,000 files.
func TestChunkedDeleteMemoryBounded(t *testing.T) {
	deleteHeapBounded(t, "local", 24<<20, nil)
}

// A push's --delete, -n and -i do not hold the list either: the far
// receiver deletes and itemizes each chunk as it plans it. Pushing 50,000
// and 200,000 files with --delete, then -n -i --delete, keeps the heap
// of both ends together under TestChunkedPushMemoryBounded's bound,
// 48 MiB (about 30 MiB is used at either size, 7 MiB with -n), which the
// list read whole for them went over already at 50,000 files (about
// 65 MiB with --delete; 240 MiB at 200,000).
func TestChunkedPushDeleteMemoryBounded(t *testing.T) {
	deleteHeapBounded(t, "push", 48<<20, func(o *restore.Options) {
		o.Compression = transfer.Compression{} // none: the heap measured is the list's and the streams', not a codec's
	})
}

// deleteHeapBounded restores flat trees of 50,000 and 200,000 files in
// mode with --delete into a DST with an extra in every directory, then
// runs -n -i --delete on the result with one more extra, with set
// applied to the options if not nil, and fails the test if the counts
// or lines are not right or if a peak heap went over bound bytes.
func deleteHeapBounded(t *testing.T, mode string, bound uint64, set func(*restore.Options)) {
	t.Helper()
	if testing.Short() {
		t.Skip("restores 250,000 files twice")
	}
	skipHeapBoundUnderRace(t)
	for _, n := range []int{50_000, 200_000} {
		src := flatTree(t, n)
		dst := filepath.Join(memDir(t), "D")
		extras := map[string]string{}
		for d := range (n + 499) / 500 {
			extras[fmt.Sprintf("d%04d/extra", d)] = "x"
		}
		writeFiles(t, dst, extras)
		o := options(mode, src, dst)
		if set != nil {
			set(&o)
		}
		o.Delete = true
		var rep *restore.Report
		peak := peakHeapBytes(func() { rep = run(t, o) })
		t.Logf("%s, %d files, --delete: peak heap %.1f MiB", mode, n, float64(peak)/(1<<20))
		if rep.Files != n || rep.Deleted != len(extras) {
			t.Errorf("%d files restored of %d, %d deleted of %d", rep.Files, n, rep.Deleted, len(extras))
		}
		if peak > bound {
			t.Errorf("%s, %d files, --delete: peak heap %.1f MiB, over the %d MiB that bounds it whatever the tree", mode, n, float64(peak)/(1<<20), bound>>20)
		}
		writeFiles(t, dst, map[string]string{"d0000/again": "x"})
		o.DryRun, o.ItemizeChanges = true, true
		peak = peakHeapBytes(func() { rep = run(t, o) })
		t.Logf("%s, %d files, -n -i --delete: peak heap %.1f MiB", mode, n, float64(peak)/(1<<20))
		if want := []string{".d..t...... d0000/", "*deleting   d0000/again"}; !slices.Equal(groupLines(rep.Changes, nil), groupLines(want, nil)) {
			t.Errorf("-n -i --delete said %q, want %q", rep.Changes, want)
		}
		if peak > bound {
			t.Errorf("%s, %d files, -n -i --delete: peak heap %.1f MiB, over the %d MiB that bounds it whatever the tree", mode, n, float64(peak)/(1<<20), bound>>20)
		}
		os.RemoveAll(src)
		os.RemoveAll(dst)
	}
}

// A push's memory does not grow with the tree either: pushing 50,000 and
// 200,000 files (the client's walk and the receiver, an agent in this
// process, planning and finishing chunk by chunk) keeps the heap of both
// ends together under one bound, 48 MiB (20–37 MiB is used at either
// size, the two ends' streams and garbage not yet collected on a loaded
// machine), which a list held whole passes already at 50,000 files
// (about 70 MiB; 285 MiB at 200,000). Without
// compression: a codec's encoders and buffers are not the list's.
func TestChunkedPushMemoryBounded(t *testing.T) {
	restoreHeapBounded(t, "pushed", 48<<20, "push", func(o *restore.Options) {
		o.Compression = transfer.Compression{} // none: the heap measured is the list's and the streams', not a codec's
	})
}
