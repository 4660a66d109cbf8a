package integration

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/internal/testsshd"
	"github.com/restoresync/restoresync/treewalk"
)

// A pull over a real sshd, under umask 077, of -R SRCs from two bases
// that give the same paths (a full snapshot and a newer one of one
// directory) into a new DST below a directory with a default ACL and the
// setgid bit, as the real rsync -aHAXR makes it with the same umask: the
// trees merge (directories combine, the first SRC given wins a file), and
// DST, which the list gives no mode of its own, and its new parent are
// made by mkdir with the parent's default ACL and setgid bit instead of
// the umask (same mode bits, same getfacl).
func TestE2ERelativeMergeIntoNewDst(t *testing.T) {
	e2e(t)
	t.Parallel()
	testenv.RequireTool(t, "rsync", "setfacl", "getfacl")
	snap := t.TempDir()
	for p, data := range map[string]string{
		"full/home/alice/public_html/index.php": "old index", "full/home/alice/mail/cur/m1": "m1",
		"daily/home/alice/public_html/index.php": "new index", "daily/home/alice/public_html/new.php": "new",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(snap, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(snap, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Whole-second mtimes in the past: rsync 3.2.7 compares seconds, and
	// does not set a directory's mtime in the second it was made.
	mt := time.Date(2024, 3, 4, 5, 6, 7, 0, time.UTC)
	filepath.WalkDir(snap, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		return os.Chtimes(p, mt, mt)
	})
	tmp := t.TempDir()
	rp, op := filepath.Join(tmp, "rsync"), filepath.Join(tmp, "ours")
	for _, p := range []string{rp, op} {
		if err := os.Mkdir(p, 0o750); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("setfacl", "-d", "-m", "u::rwx,g::rwx,o::r-x", p).CombinedOutput(); err != nil {
			t.Fatalf("setfacl: %v\n%s", err, out)
		}
		if err := os.Chmod(p, os.ModeSetgid|0o750); err != nil {
			t.Fatal(err)
		}
	}
	srcs := []string{snap + "/daily/./home/alice/public_html", snap + "/full/./home/alice"}
	umask077 := func(name string, args ...string) *exec.Cmd {
		ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
		t.Cleanup(cancel)
		cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", `umask 077 && exec "$0" "$@"`, name}, args...)...)
		cmd.Env = binEnv()
		return cmd
	}
	args := append([]string{"-aHAXR", "--mkpath"}, srcs...)
	if out, err := umask077("rsync", append(args, rp+"/new/to/")...).CombinedOutput(); err != nil {
		t.Fatalf("rsync %q: %v\n%s", args, err, out)
	}
	srv := testsshd.Start(t)
	ours := append([]string{"restore"}, sshdArgs(srv)...)
	ours = append(ours, "-R", sshdURL(srv, srcs[0]), sshdURL(srv, srcs[1]), op+"/new/to")
	var stderr bytes.Buffer
	cmd := umask077(binPath, ours...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("restoresync %q: %v\n%s", ours, err, stderr.String())
	}
	diffs, err := treewalk.Compare(t.Context(), rp+"/new/to", op+"/new/to", treewalk.CompareOptions{IgnoreRootDir: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Errorf("rsync's tree and ours differ: %s", d)
	}
	if b, _ := os.ReadFile(op + "/new/to/home/alice/public_html/index.php"); string(b) != "new index" {
		t.Errorf("index.php: %q, want the first SRC's", b)
	}
	for _, p := range []string{"new", "new/to"} {
		if want, got := aclMode(t, filepath.Join(rp, p)), aclMode(t, filepath.Join(op, p)); want != got {
			t.Errorf("%s: rsync made\n%s\nrestoresync made\n%s", p, want, got)
		}
	}
}

// aclMode is a directory's mode (with setuid, setgid, sticky) and its
// ACLs as getfacl prints them (numeric ids, no header).
func aclMode(t *testing.T, p string) string {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("getfacl", "-c", "-n", p).CombinedOutput()
	if err != nil {
		t.Fatalf("getfacl %s: %v\n%s", p, err, out)
	}
	return fmt.Sprintf("%v\n%s", fi.Mode(), out)
}
