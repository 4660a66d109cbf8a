package restore_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// smallChunks makes the walks of the test cut their lists into chunks of
// n entries, so that small trees span many chunks.
func smallChunks(t *testing.T, n int) {
	old := treewalk.ChunkEntries
	treewalk.ChunkEntries = n
	t.Cleanup(func() { treewalk.ChunkEntries = old })
}

// chunkedTree is a SRC of many chunks at 3 entries a chunk: nested
// directories with their own modes and mtimes, hardlink groups whose
// members lie chunks apart (a file group, a symlink group), symlinks, a
// fifo, an empty directory.
func chunkedTree(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "S")
	files := map[string]string{}
	for d := range 4 {
		for f := range 3 {
			files[fmt.Sprintf("d%d/sub/f%d.txt", d, f)] = fmt.Sprintf("data %d %d", d, f)
		}
		files[fmt.Sprintf("d%d/top.php", d)] = "<?php " + fmt.Sprint(d)
	}
	writeFiles(t, src, files)
	must(t, os.Link(filepath.Join(src, "d0/sub/f0.txt"), filepath.Join(src, "d3/link-f0")))
	must(t, os.Link(filepath.Join(src, "d0/sub/f0.txt"), filepath.Join(src, "d2/sub/link-f0")))
	must(t, os.Symlink("../d0/top.php", filepath.Join(src, "d1/sym")))
	must(t, os.Link(filepath.Join(src, "d1/sym"), filepath.Join(src, "d3/sub/sym-link")))
	must(t, os.Symlink("nowhere", filepath.Join(src, "d2/dangling")))
	must(t, os.Mkdir(filepath.Join(src, "d2/empty"), 0o755))
	must(t, unix.Mkfifo(filepath.Join(src, "d1/sub/queue"), 0o640))
	touchAll(t, src, time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	for i, d := range []string{"d0", "d1/sub", "d2/empty", "d3"} {
		must(t, os.Chmod(filepath.Join(src, d), os.FileMode(0o700+i*0o10)))
		mt := time.Date(2021, 1, i+1, 0, 0, 0, 0, time.UTC)
		must(t, os.Chtimes(filepath.Join(src, d), mt, mt))
	}
	return src
}

// A list of many chunks restores as rsync -aH restores it, in every
// mode: the tree (hardlink groups whose members are chunks apart,
// directories' modes and mtimes set once all beneath them is placed)
// leaves rsync -aHni nothing to say; a rerun sends nothing; and -n -i
// --delete on a DST with extras and changes says what rsync -aHni
// --delete says, then the real --delete run leaves the tree as rsync's.
func TestChunkedRestoreMatchesRsync(t *testing.T) {
	testenv.RequireTool(t, "rsync")
	smallChunks(t, 3)
	src := chunkedTree(t)
	members := []string{"d0/sub/f0.txt", "d2/sub/link-f0", "d3/link-f0", "d1/sym", "d3/sub/sym-link"}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "D")
			o := options(mode, src, dst)
			rep := run(t, o)
			assertSameTree(t, src, dst)
			rsyncItemizeNothing(t, src, dst)
			assertNoTempFiles(t, dst)
			if rep.Files != 16 || rep.Hardlinks != 3 || rep.Symlinks != 2 || rep.Dirs != 9 {
				t.Errorf("report: %d files, %d hardlinks, %d symlinks, %d dirs; want 16, 3, 2, 9", rep.Files, rep.Hardlinks, rep.Symlinks, rep.Dirs)
			}
			again := run(t, o)
			if again.Files != 0 || again.Bytes != 0 || again.Skipped != rep.Files {
				t.Errorf("rerun: %d files, %d bytes, %d skipped; want 0, 0, %d", again.Files, again.Bytes, again.Skipped, rep.Files)
			}

			// DST drifts: extras to delete, a changed file, a
			// follower unlinked, a directory's mode.
			rdst := filepath.Join(t.TempDir(), "R")
			for _, d := range []string{dst, rdst} {
				if d == rdst {
					rsyncCopy(t, dst, rdst)
				}
				writeFiles(t, d, map[string]string{"d1/extra.txt": "x", "d2/sub/old/a": "y", "zz-extra": "z"})
				must(t, os.WriteFile(filepath.Join(d, "d0/top.php"), []byte("changed!"), 0o644))
				relinkCopy(t, d, "d3/link-f0", time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
				must(t, os.Chmod(filepath.Join(d, "d3"), 0o755))
			}
			touchDirs(t, dst, rdst)
			o.DryRun, o.ItemizeChanges, o.Delete = true, true, true
			ours := groupLines(run(t, o).Changes, members)
			lines, code := rsyncItemize(t, mode, "C.UTF-8", []string{"-aHni", "--delete"}, src, rdst)
			if want := groupLines(lines, members); code != 0 || !slices.Equal(ours, want) {
				t.Errorf("-n -i --delete:\n  %q\nrsync -aHni --delete (exit %d):\n  %q", ours, code, want)
			}
			o.DryRun, o.ItemizeChanges = false, false
			if rep := run(t, o); rep.Deleted != 4 {
				t.Errorf("--delete removed %d, want 4 (d1/extra.txt, d2/sub/old/a, d2/sub/old/, zz-extra)", rep.Deleted)
			}
			rsyncItemizeNothing(t, src, dst)
			assertSameTree(t, src, dst)
		})
	}
}

// rsyncCopy makes dst a copy of src by rsync -aH.
func rsyncCopy(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := execOutput("rsync", "-aH", src+"/", dst+"/"); err != nil {
		t.Fatalf("rsync: %v\n%s", err, out)
	}
}

// While the sender's walk is held after its first chunk, the restore
// has already placed that chunk's files and finished the directory the
// chunk completes (its final mode and mtime), and has nothing of the
// rest: files land and directories finish before the walk ends. Local,
// pulled with one stream (the list and the data share it) and with
// three, pushed with one (the plans, the data and the finishes share it)
// and with three.
func TestChunkedRestoreFinishesBeforeWalkEnds(t *testing.T) {
	smallChunks(t, 4)
	src := filepath.Join(t.TempDir(), "S")
	// The first chunk: ".", "a", "a/1", "a/2", which completes "a".
	files := map[string]string{"a/1": "one", "a/2": "two"}
	for i := range 20 {
		files[fmt.Sprintf("b/%02d", i)] = fmt.Sprint(i)
	}
	writeFiles(t, src, files)
	mt := time.Date(2022, 2, 2, 2, 2, 2, 0, time.UTC)
	must(t, os.Chmod(filepath.Join(src, "a"), 0o750))
	must(t, os.Chtimes(filepath.Join(src, "a"), mt, mt))
	for _, c := range []struct {
		mode string
		jobs int
	}{{"local", 2}, {"pull", 1}, {"pull", 3}, {"push", 1}, {"push", 3}} {
		t.Run(fmt.Sprintf("%s-%d", c.mode, c.jobs), func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "D")
			placed := func() bool {
				one, _ := os.ReadFile(filepath.Join(dst, "a/1"))
				two, _ := os.ReadFile(filepath.Join(dst, "a/2"))
				fi, err := os.Stat(filepath.Join(dst, "a"))
				return err == nil && bytes.Equal(one, []byte("one")) && bytes.Equal(two, []byte("two")) &&
					fi.Mode().Perm() == 0o750 && fi.ModTime().Equal(mt)
			}
			held, rest := false, true
			treewalk.AfterChunk = func(n int) {
				if n != 1 {
					return
				}
				// The walk waits here for the restore to get on with
				// the first chunk; a restore that waited for the walk
				// would never get there, and the wait ends unmet.
				for end := time.Now().Add(30 * time.Second); !placed() && time.Now().Before(end); {
					time.Sleep(5 * time.Millisecond)
				}
				held = placed()
				_, err := os.Lstat(filepath.Join(dst, "b"))
				rest = err == nil
			}
			t.Cleanup(func() { treewalk.AfterChunk = nil })
			o := options(c.mode, src, dst)
			o.Jobs = c.jobs
			run(t, o)
			treewalk.AfterChunk = nil
			if !held {
				t.Error("with the walk held after its first chunk, a/1, a/2 and a's mode and mtime were not in place")
			}
			if rest {
				t.Error("b, which the walk had not reached, was in DST while the walk was held")
			}
			assertSameTree(t, src, dst)
		})
	}
}

// memDir is a temporary directory on /dev/shm when it is a tmpfs (the
// memory test's trees cost no disk time there), else t.TempDir().
func memDir(t *testing.T) string {
	t.Helper()
	var fs unix.Statfs_t
	if unix.Statfs("/dev/shm", &fs) != nil || fs.Type != unix.TMPFS_MAGIC {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp("/dev/shm", "restoresync-test-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// flatTree makes a SRC of n empty files in directories of 500.
func flatTree(t *testing.T, n int) string {
	t.Helper()
	src := filepath.Join(memDir(t), "S")
	for i := range n {
		dir := filepath.Join(src, fmt.Sprintf("d%04d", i/500))
		if i%500 == 0 {
			must(t, os.MkdirAll(dir, 0o755))
		}
		fd, err := unix.Open(filepath.Join(dir, fmt.Sprintf("f%03d", i%500)), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		must(t, err)
		unix.Close(fd)
	}
	return src
}

// skipHeapBoundUnderRace skips a test of a peak-heap bound under the race
// detector, whose garbage goes over it (testenv.Race).
func skipHeapBoundUnderRace(t *testing.T) {
	t.Helper()
	if testenv.Race {
		t.Skip("a peak-heap bound, which the race detector's garbage goes over")
	}
}

// peakHeapBytes runs fn and returns the most heap its objects took
// meanwhile (live and not yet collected), sampled as it runs, above what
// the process held before it: what earlier tests left alive, such as the
// process-wide zstd encoders a compressing test made, is not fn's.
func peakHeapBytes(fn func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	var peak atomic.Uint64
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	fn()
	close(stop)
	<-stopped
	return peak.Load() - min(base, peak.Load())
}

// A pull with --compress auto keeps both ends' heap under one bound at
// 50,000 and 200,000 files, 48 MiB (about 19 and 36 MiB are used): the
// codecs a long run's controller moves through hold their encoders for
// the rest of the run, and zstd's best levels alone (36 MiB of state) took
// the 200,000-file pull to 92 MiB.
func TestChunkedPullAutoMemoryBounded(t *testing.T) {
	restoreHeapBounded(t, "pulled with --compress auto", 48<<20, "pull", func(o *restore.Options) {
		o.Compression = transfer.Compression{Codec: transfer.CodecAuto}
	})
}

// A restore's memory does not grow with the tree: restoring 50,000 and
// 200,000 files (local → local: the walk and the writer in this
// process), the heap stays under the same bound, 24 MiB (about 10 MiB is
// used at either size), which a list held whole (about 200 bytes an
// entry, two or three times over) passes already at 50,000 files.
func TestChunkedRestoreMemoryBounded(t *testing.T) {
	restoreHeapBounded(t, "restored", 24<<20, "local", nil)
}

// restoreHeapBounded restores flat trees of 50,000 and 200,000 files in
// mode (options' modes), with set applied to the options if not nil, and
// fails the test if all of them were not restored or if a peak heap went
// over bound bytes; what says how they were restored, in the messages.
func restoreHeapBounded(t *testing.T, what string, bound uint64, mode string, set func(*restore.Options)) {
	t.Helper()
	if testing.Short() {
		t.Skipf("%s 250,000 files", what)
	}
	skipHeapBoundUnderRace(t)
	for _, n := range []int{50_000, 200_000} {
		src := flatTree(t, n)
		dst := filepath.Join(memDir(t), "D")
		o := options(mode, src, dst)
		if set != nil {
			set(&o)
		}
		var rep *restore.Report
		peak := peakHeapBytes(func() { rep = run(t, o) })
		t.Logf("%d files %s: peak heap %.1f MiB", n, what, float64(peak)/(1<<20))
		if rep.Files != n {
			t.Errorf("%d files restored of %d", rep.Files, n)
		}
		if peak > bound {
			t.Errorf("%d files %s: peak heap %.1f MiB, over the %d MiB that bounds it whatever the tree", n, what, float64(peak)/(1<<20), bound>>20)
		}
		os.RemoveAll(src)
		os.RemoveAll(dst)
	}
}

// Several SRCs are merged as they are walked: restoring two SRCs of
// 25,000 and then of 100,000 files each (local → local, the walks, the
// merge and the writer in this process) keeps the heap under the bound
// of TestChunkedRestoreMemoryBounded, 24 MiB (about 12 MiB is used at
// either size), which the merge of the whole walks went over already at
// 25,000 files a SRC (about 46 MiB; 168 MiB at 100,000).
func TestChunkedMergeMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("restores 250,000 files")
	}
	skipHeapBoundUnderRace(t)
	const bound = 24 << 20
	for _, n := range []int{25_000, 100_000} {
		var srcs []string
		for _, name := range []string{"one", "two"} {
			src := flatTree(t, n)
			named := filepath.Join(filepath.Dir(src), name)
			must(t, os.Rename(src, named))
			srcs = append(srcs, named)
		}
		dst := filepath.Join(memDir(t), "D")
		o := options("local", srcs[0], dst)
		o.MoreSrc = srcs[1:]
		var rep *restore.Report
		peak := peakHeapBytes(func() { rep = run(t, o) })
		t.Logf("2 SRCs of %d files: peak heap %.1f MiB", n, float64(peak)/(1<<20))
		if rep.Files != 2*n {
			t.Errorf("%d files restored of %d", rep.Files, 2*n)
		}
		if peak > bound {
			t.Errorf("2 SRCs of %d files: peak heap %.1f MiB, over the %d MiB that bounds it whatever the tree", n, float64(peak)/(1<<20), bound>>20)
		}
		for _, src := range srcs {
			assertSameTree(t, src, filepath.Join(dst, filepath.Base(src)))
			os.RemoveAll(src)
		}
		os.RemoveAll(dst)
	}
}
