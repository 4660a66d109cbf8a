package restore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/restoresync/restoresync/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

// dirACLMode describes directory p as rsync and getfacl see it: its mode
// with the setuid, setgid and sticky bits, and its access and default
// ACLs (getfacl -c, numeric ids).
func dirACLMode(t *testing.T, p string) string {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("getfacl", "-c", "-n", "-p", p).CombinedOutput()
	if err != nil {
		t.Fatalf("getfacl %s: %v\n%s", p, err, out)
	}
	return fmt.Sprintf("%v\n%s", fi.Mode(), out)
}

// A DST that the restore creates, when the list gives it no mode of its
// own (several SRCs, a file SRC), comes out as the real rsync makes it:
// mkdir(2) with 0777, so that the parent's default ACL (with or without a
// mask or named entries) replaces the umask and the parent's setgid bit
// is inherited; the same mode bits, access ACL and default ACL. It runs
// with this process's umask, then with umask 077 in a child test process
// (the umask is the whole process's), where a default ACL makes a DST
// far more open than the umask alone.
func TestNewDstModeMatchesRsync(t *testing.T) {
	testenv.RequireTool(t, "rsync", "setfacl", "getfacl")
	if u := os.Getenv("RESTORESYNC_TEST_UMASK"); u != "" {
		n, err := strconv.ParseUint(u, 8, 32)
		if err != nil {
			t.Fatal(err)
		}
		syscall.Umask(int(n))
	} else {
		t.Run("umask-077", func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestNewDstModeMatchesRsync$", "-test.count=1")
			cmd.Env = append(os.Environ(), "RESTORESYNC_TEST_UMASK=077")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("with umask 077: %v\n%s", err, out)
			}
		})
	}
	src := filepath.Join(t.TempDir(), "alice")
	writeFiles(t, src, map[string]string{"index.php": "<?php", "mail/new/1": "hi"})
	parents := []struct {
		name  string
		setup func(t *testing.T, p string)
	}{
		{"plain", func(t *testing.T, p string) {}},
		{"setgid", func(t *testing.T, p string) {
			if err := os.Chmod(p, os.ModeSetgid|0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"default-acl-777", func(t *testing.T, p string) { sh(t, "setfacl", "-d", "-m", "u::rwx,g::rwx,o::rwx", p) }},
		{"default-acl-775", func(t *testing.T, p string) { sh(t, "setfacl", "-d", "-m", "u::rwx,g::rwx,o::r-x", p) }},
		{"default-acl-750", func(t *testing.T, p string) { sh(t, "setfacl", "-d", "-m", "u::rwx,g::r-x,o::---", p) }},
		{"default-acl-mask", func(t *testing.T, p string) {
			sh(t, "setfacl", "-d", "-m", "u::rwx,u:nobody:rwx,g::r-x,m::rwx,o::---", p)
		}},
		{"default-acl-setgid", func(t *testing.T, p string) {
			sh(t, "setfacl", "-d", "-m", "u::rwx,g::rwx,g:daemon:r-x,m::rwx,o::---", p)
			if err := os.Chmod(p, os.ModeSetgid|0o750); err != nil {
				t.Fatal(err)
			}
		}},
	}
	srcSets := map[string][]string{"several-srcs": {"index.php", "mail"}, "file-src": {"index.php"}}
	for _, pc := range parents {
		for sname, srcs := range srcSets {
			for _, mode := range []string{"local", "pull", "push"} {
				t.Run(pc.name+"/"+sname+"/"+mode, func(t *testing.T) {
					tmp := t.TempDir()
					rp, op := filepath.Join(tmp, "rsync"), filepath.Join(tmp, "ours")
					for _, p := range []string{rp, op} {
						if err := os.Mkdir(p, 0o755); err != nil {
							t.Fatal(err)
						}
						pc.setup(t, p)
					}
					args := []string{"-aAX"}
					for _, s := range srcs {
						args = append(args, filepath.Join(src, s))
					}
					args = append(args, filepath.Join(rp, "new", "to")+"/")
					args = append(args[:1], append([]string{"--mkpath"}, args[1:]...)...)
					if out, err := exec.Command("rsync", args...).CombinedOutput(); err != nil {
						t.Fatalf("rsync %q: %v\n%s", args, err, out)
					}
					o := options(mode, filepath.Join(src, srcs[0]), filepath.Join(op, "new", "to"))
					for _, s := range srcs[1:] {
						o.MoreSrc = append(o.MoreSrc, strings.TrimSuffix(o.Src, srcs[0])+s)
					}
					run(t, o)
					for _, p := range []string{"new", "new/to"} {
						want, got := dirACLMode(t, filepath.Join(rp, p)), dirACLMode(t, filepath.Join(op, p))
						want = strings.ReplaceAll(want, rp, op)
						if want != got {
							t.Errorf("%s: rsync made\n%s\nrestoresync made\n%s", p, want, got)
						}
					}
				})
			}
		}
	}
}
