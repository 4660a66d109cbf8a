package restore_test

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testsshd"
	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/transport"
	"github.com/restoresync/restoresync/treewalk"
)

// sftpOnly starts a real OpenSSH sshd whose account allows SFTP only, as a
// locked-down backup account does: every session is internal-sftp,
// read-only (-R), and with chroot != "" confined to that directory.
func sftpOnly(t *testing.T, chroot string) *testsshd.Server {
	t.Helper()
	cfg := testsshd.SFTPSubsystem + "\nMatch User " + currentUser(t) + "\n\tForceCommand internal-sftp -R\n"
	if chroot != "" {
		cfg += "\tChrootDirectory " + chroot + "\n"
	}
	return testsshd.StartConfig(t, cfg)
}

func currentUser(t *testing.T) string {
	out, err := execOutput("id", "-un")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// sftpOptions restores the server path p of srv into dst with the sftp
// method and the built-in SSH client.
func sftpOptions(srv *testsshd.Server, p, dst string) restore.Options {
	return restore.Options{
		Src:    fmt.Sprintf("ssh://%s@%s%s", srv.User, net.JoinHostPort(srv.Host, strconv.Itoa(srv.Port)), p),
		Dst:    dst,
		Method: restore.MethodSFTP,
		Jobs:   2,
		SSH:    transport.SSHOptions{ConfigFile: "none", Identities: []string{srv.IdentityFile}, KnownHosts: []string{srv.KnownHostsFile}},
	}
}

// truncateTimes sets every mtime under root to its whole second, as SFTP
// version 3 carries it, so that a tree restored over SFTP can equal it.
func truncateTimes(t *testing.T, root string) {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p) // after their contents
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		return lutimes(p, fi.ModTime().Truncate(time.Second))
	})
	must(t, err)
	for i := len(dirs) - 1; i >= 0; i-- {
		fi, err := os.Lstat(dirs[i])
		must(t, err)
		must(t, lutimes(dirs[i], fi.ModTime().Truncate(time.Second)))
	}
}

// assertSFTPTree fails t unless dst equals src (content, kind, mode,
// numeric owner, mtime, symlink targets), but for what SFTP version 3
// cannot carry: hardlinks (each name is a file of its own) and extended
// attributes; src's mtimes must be whole seconds (truncateTimes).
func assertSFTPTree(t *testing.T, src, dst string) {
	t.Helper()
	diffs, err := treewalk.Compare(context.Background(), src, dst, treewalk.CompareOptions{IgnoreXattrs: true})
	must(t, err)
	n := 0
	for _, d := range diffs {
		if d.What == treewalk.DiffHardlink {
			continue
		}
		if n++; n > 20 {
			t.Errorf("... and more differences")
			break
		}
		t.Errorf("difference: %s", d)
	}
}

// sftpAccount builds the account fixture under dir/name with whole-second
// mtimes and some entries owned by ids that have no name here.
func sftpAccount(t *testing.T, dir, name string) string {
	t.Helper()
	src := filepath.Join(dir, name)
	accountFixture().build(t, src)
	for _, p := range []string{"public_html/index.php", "public_html/uploads", "mail"} {
		must(t, os.Lchown(filepath.Join(src, p), 123456, 654321))
	}
	must(t, os.Lchown(filepath.Join(src, "public_html/current"), 123457, 654322))
	truncateTimes(t, src)
	return src
}

// --method sftp against a real OpenSSH sshd whose account allows SFTP
// only, chrooted: the account restored equals the source (numeric owners,
// modes with set-id bits, mtimes, symlinks, a fifo, odd names), and a
// rerun finds everything up to date (the quick check to the second).
func TestSFTPPullSFTPOnlyAccount(t *testing.T) {
	chroot := testsshd.ChrootDir(t)
	src := sftpAccount(t, chroot, "alice")
	srv := sftpOnly(t, chroot)
	dst := filepath.Join(t.TempDir(), "alice")
	var warned []string
	o := sftpOptions(srv, "/alice", dst)
	o.Warnf = func(format string, args ...any) { warned = append(warned, fmt.Sprintf(format, args...)) }
	rep := run(t, o)
	assertSFTPTree(t, src, dst)
	assertNoTempFiles(t, dst)
	if rep.Method != "sftp" || rep.Jobs != 2 || rep.Symlinks != 3 || rep.Hardlinks != 0 || rep.WireBytes <= rep.Bytes {
		t.Errorf("report: method %q, %d jobs, %d symlinks, %d hardlinks, %d wire bytes for %d; want sftp, 2, 3, 0, more wire bytes than payload",
			rep.Method, rep.Jobs, rep.Symlinks, rep.Hardlinks, rep.WireBytes, rep.Bytes)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "SFTP version 3") || !strings.Contains(warned[0], "numeric ids") {
		t.Errorf("warnings %q; want one saying what SFTP version 3 cannot carry", warned)
	}
	// Each name of a hardlink group arrives as a file: 21 data files.
	if rep.Files != 21 {
		t.Errorf("restored %d files; want 21", rep.Files)
	}
	again := run(t, o)
	if again.Files != 0 || again.Skipped != 21 {
		t.Errorf("rerun restored %d files, %d up to date; want 0, 21", again.Files, again.Skipped)
	}
	assertSFTPTree(t, src, dst)
}
