package restore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/restore"
)

// The connection breaks at 6 points of a tar pull and 5 of an rsync pull (what
// the client reads, from the handshake to the end), and a seventh run is
// cancelled (Ctrl-C) a third of the way: each time the run fails, every
// file under its final name is complete (tar: content and metadata; rsync:
// content, as gokrazy renames complete files into place and the safe
// writer completes their metadata after it), no temporary file of ours is
// left, and a rerun completes the tree.
func TestFaultConnectionDropsTarRsync(t *testing.T) {
	src := filepath.Join(t.TempDir(), "alice")
	faultTree(t, src)
	// rsync cannot restore 255-byte names (its temporary name is longer).
	must(t, os.Remove(filepath.Join(src, "public_html", strings.Repeat("n", 255))))
	for _, tc := range methodCases {
		if tc.method == restore.MethodRaw {
			continue // TestFaultConnectionDrops
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			probe := &faults{}
			o := faultOptions(tc.mode, src, filepath.Join(t.TempDir(), "probe"), probe)
			o.Method, o.Jobs = tc.method, 2
			run(t, o)
			total := probe.moved.Load()
			moments := 6
			if tc.method == restore.MethodRsync {
				moments = 5 // slower: gokrazy, then the completion pass
			}
			var stale int
			for k := 1; k <= moments+1; k++ {
				at := total * int64(k) / int64(moments+1)
				dst := filepath.Join(t.TempDir(), "alice")
				f := &faults{breakAt: at}
				ctx, cancel := context.WithCancel(context.Background())
				if k == moments+1 { // Ctrl-C a third of the way
					at = total / 3
					f = &faults{hookAt: at, hook: cancel}
				}
				o := faultOptions(tc.mode, src, dst, f)
				o.Method, o.Jobs = tc.method, 2
				_, err := restore.Run(ctx, o)
				cancel()
				switch {
				case err == nil:
					t.Errorf("fault at %d of %d bytes: the restore succeeded", at, total)
				case k == moments+1 && !errors.Is(err, context.Canceled):
					t.Errorf("cancelled at %d of %d bytes: error %v; want the cancellation", at, total, err)
				}
				if tc.method == restore.MethodTar {
					assertPlacedComplete(t, src, dst)
				} else {
					assertPlacedContent(t, src, dst)
					stale += removeGokrazyTemps(t, src, dst)
				}
				assertNoTempFiles(t, dst)
				o.Dialer = options(tc.mode, src, dst).Dialer
				run(t, o)
				assertSameTreeQuick(t, src, dst)
			}
			if stale > 0 {
				t.Logf("%s: gokrazy left %d temporary files at the top of DST over %d interrupted runs (not swept; README)", tc.name, stale, moments+1)
			}
		})
	}
}

// assertPlacedContent fails t unless every regular file under its final
// name in dst has the source's content.
func assertPlacedContent(t testing.TB, src, dst string) {
	t.Helper()
	filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		rel, _ := filepath.Rel(dst, p)
		a, aerr := os.ReadFile(filepath.Join(src, rel))
		b, _ := os.ReadFile(p)
		if aerr != nil || string(a) != string(b) {
			t.Errorf("%s is under its final name with %d bytes; the source has %d (%v)", rel, len(b), len(a), aerr)
		}
		return nil
	})
}

// A destination that fills up, restored by the tar method (the agent's
// stream and a local archive walk): the files that do not fit are reported
// with ENOSPC, nothing is half-written under its final name, no temporary
// file is left, and what fits is restored.
func TestFaultDiskFullTar(t *testing.T) {
	requireRoot(t)
	src := filepath.Join(t.TempDir(), "alice")
	TestDir{
		"index.php": TestFile{Content: "<?php echo 1;\n"},
		"media": TestDir{
			"big.mov":   TestFile{Size: 5<<20 + 1},
			"whole.jpg": TestFile{Size: 3 << 20},
		},
		"notes": TestDir{"a.txt": TestFile{Content: "a\n"}, "b.txt": TestFile{Content: "b\n"}},
	}.build(t, src)
	for _, mode := range []string{"local", "pull"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			mnt := t.TempDir()
			mount(t, mnt, "-t", "tmpfs", "-o", "size=4m", "tmpfs")
			dst := filepath.Join(mnt, "alice")
			o := options(mode, src, dst)
			o.Method = restore.MethodTar
			rep, err := runAllowingErrors(t, o)
			if err != nil {
				t.Fatalf("the run failed instead of reporting the files: %v", err)
			}
			failed := map[string]bool{}
			for _, fe := range rep.Errors {
				failed[fe.Path] = true
				if !strings.Contains(fe.Error, "no space left on device") {
					t.Errorf("%s: %s; want the file system's ENOSPC", fe.Path, fe.Error)
				}
			}
			if !failed["media/big.mov"] {
				t.Errorf("errors %+v; want media/big.mov, which cannot fit", rep.Errors)
			}
			placed := assertPlacedComplete(t, src, dst)
			assertNoTempFiles(t, dst)
			if placed+len(failed) != 5 {
				t.Errorf("%d files placed, %d failed, of 5", placed, len(failed))
			}
		})
	}
}
