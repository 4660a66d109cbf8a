package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/internal/testsshd"
)

// An exact restore over a real sshd: xattrs (user, trusted, security, a
// file capability, on a symlink), access and default ACLs, a sparse file
// and a device node, pulled with the defaults (raw; rsync's -aHAXSD are
// accepted as the defaults they are), then pushed back with
// --no-xattrs --no-acls --no-sparse, which leave them out. Checked by
// 'bench compare' and by the real rsync -AX.
func TestE2EExactMetadata(t *testing.T) {
	e2e(t)
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root (trusted.* xattrs, capabilities, device nodes)")
	}
	src := filepath.Join(t.TempDir(), "alice")
	doc := filepath.Join(src, "shared", "doc.txt")
	if err := os.MkdirAll(filepath.Dir(doc), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{doc, filepath.Join(src, "ping")} {
		if err := os.WriteFile(f, []byte("contents of "+f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("ping", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(src, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	img, err := os.Create(filepath.Join(src, "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	img.Truncate(256 << 20)
	img.WriteAt([]byte("boot sector"), 0)
	img.WriteAt([]byte("data"), 100<<20)
	img.Close()
	for _, c := range [][]string{
		{"setfattr", "-n", "user.origin", "-v", "backup", doc},
		{"setfattr", "-n", "trusted.md5", "-v", "0x0badc0de", doc},
		{"setfattr", "-h", "-n", "trusted.link", "-v", "yes", filepath.Join(src, "link")},
		{"setcap", "cap_net_raw+ep", filepath.Join(src, "ping")},
		{"setfacl", "-m", "u:nobody:rw,g:daemon:r", doc},
		{"setfacl", "-d", "-m", "u:nobody:rwx", filepath.Join(src, "shared")},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	srv := testsshd.Start(t)
	dst := filepath.Join(t.TempDir(), "alice")
	mustRun(t, append(append([]string{"restore", "-aHAXSD"}, sshdArgs(srv)...), sshdURL(srv, src), dst)...) // rsync's habit, accepted
	assertSameTree(t, src, dst)
	rsyncItemize(t, []string{"-aHAXni", "--checksum", "--devices", "--delete"}, src, dst)
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dst, "disk.img"), &st); err != nil || st.Blocks*512 > 1<<20 {
		t.Errorf("disk.img: %d bytes allocated (%v): the holes were filled", st.Blocks*512, err)
	}

	// Push back with every part turned off.
	back := filepath.Join(t.TempDir(), "back")
	mustRun(t, append(append([]string{"restore", "--no-xattrs", "--no-acls", "--no-sparse"}, sshdArgs(srv)...), dst, sshdURL(srv, back))...)
	if r := runBin(t, "bench", "compare", "--ignore-xattrs", "--ignore-sparse", src, back); r.code != 0 {
		t.Errorf("bench compare --ignore-xattrs --ignore-sparse: %s", r)
	}
	if r := runBin(t, "bench", "compare", src, back); r.code != 1 || !strings.Contains(r.stdout, "xattr") || !strings.Contains(r.stdout, "sparse") {
		t.Errorf("bench compare sees no xattr or sparse difference after --no-xattrs --no-sparse: %s", r)
	}
}
