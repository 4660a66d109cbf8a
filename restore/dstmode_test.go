package restore_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/transfer"
)

// newDirMode is the mode mkdir gives a new directory in this process:
// 0777 less the umask (read from /proc, without changing it).
func newDirMode(t testing.TB) os.FileMode {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Umask:"); ok {
			u, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			if err != nil {
				t.Fatal(err)
			}
			return os.FileMode(0o777 &^ u)
		}
	}
	t.Fatal("no Umask line in /proc/self/status")
	return 0
}

func assertDirMode(t testing.TB, p string, want os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Errorf("%s: %v", p, err)
	} else if !fi.IsDir() || fi.Mode().Perm() != want {
		t.Errorf("%s: %v; want a directory of mode %#o", p, fi.Mode(), want)
	}
}

// A restore of several SRCs into a DST it creates, interrupted after the
// file list (Ctrl-C here), leaves DST, and the parents it made, at the
// mode mkdir gives (0777 less the umask), not at the 0700 a directory has
// while its contents land: there is no "." entry whose mode a rerun would
// apply, and the rerun finds DST there. The rerun completes the job.
func TestInterruptedNewDstMode(t *testing.T) {
	want := newDirMode(t)
	for _, mode := range []string{"pull", "push"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			src := filepath.Join(t.TempDir(), "alice")
			faultTree(t, src)
			top := filepath.Join(t.TempDir(), "new")
			dst := filepath.Join(top, "parent", "restored")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := &faults{hookAt: 1 << 20, hook: cancel}
			o := faultOptions(mode, filepath.Join(src, "media"), dst, f)
			o.MoreSrc = []string{strings.TrimSuffix(o.Src, "media") + "posts"}
			o.Writer.BlockSizeBytes = 1 << 20
			o.Compression = transfer.Compression{}
			if _, err := restore.Run(ctx, o); !errors.Is(err, context.Canceled) {
				t.Fatalf("error %v; want the cancellation", err)
			}
			assertDirMode(t, top, want)
			assertDirMode(t, filepath.Join(top, "parent"), want)
			assertDirMode(t, dst, want)
			o.Dialer = options(mode, src, dst).Dialer
			run(t, o)
			assertDirMode(t, dst, want)
			for _, sub := range []string{"media", "posts"} {
				assertSameTreeQuick(t, filepath.Join(src, sub), filepath.Join(dst, sub))
			}
		})
	}
}
