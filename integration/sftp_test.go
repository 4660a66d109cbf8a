package integration

import (
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/internal/testsshd"
)

// sftpCopy copies the tree src to dst as SFTP version 3 can carry it:
// hardlinks broken into separate files (rsync -a without -H), mtimes cut
// to the second. The restore of dst over SFTP must then equal it exactly.
func sftpCopy(t *testing.T, src, dst string) {
	t.Helper()
	testenv.RequireTool(t, "rsync")
	if out, err := exec.Command("rsync", "-a", "--numeric-ids", src+"/", dst+"/").CombinedOutput(); err != nil {
		t.Fatalf("rsync -a: %v\n%s", err, out)
	}
	var dirs []string
	err := filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
			return nil
		}
		return truncateMtime(p)
	})
	for i := len(dirs) - 1; err == nil && i >= 0; i-- {
		err = truncateMtime(dirs[i])
	}
	if err != nil {
		t.Fatal(err)
	}
}

// truncateMtime cuts p's mtime to the second, not following a symlink.
func truncateMtime(p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	out, err := exec.Command("touch", "-h", "-d", "@"+strconv.FormatInt(fi.ModTime().Unix(), 10), p).CombinedOutput()
	if err != nil {
		return &os.PathError{Op: "touch", Path: p, Err: errString(strings.TrimSpace(string(out)))}
	}
	return nil
}

// currentUserName is the login name testsshd authorizes.
func currentUserName(t *testing.T) string {
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return u.Username
}

type errString string

func (e errString) Error() string { return string(e) }

// The generated account through a real OpenSSH sshd whose account allows
// SFTP only (ForceCommand internal-sftp -R, ChrootDirectory): --method
// sftp restores it equal to the source by 'bench compare' and rsync
// (numeric owners, modes, mtimes to the second, symlinks), a rerun sends
// nothing, and --method auto finds out that the server allows SFTP only.
func TestE2ESFTPOnlyAccount(t *testing.T) {
	e2e(t)
	t.Parallel()
	chroot := testsshd.ChrootDir(t)
	src := filepath.Join(chroot, "alice")
	sftpCopy(t, account.get(t), src)
	srv := testsshd.StartConfig(t, testsshd.SFTPSubsystem+"\nMatch User "+currentUserName(t)+
		"\n\tForceCommand internal-sftp -R\n\tChrootDirectory "+chroot+"\n")
	base := []string{"--json", "-F", "none", "-i", srv.IdentityFile, "--known-hosts", srv.KnownHostsFile}
	dst := filepath.Join(t.TempDir(), "alice")
	rep := parseReport(t, mustRun(t, append(append([]string{"restore", "--method", "sftp"}, base...), sshdURL(srv, "/alice"), dst)...))
	if rep.Method != "sftp" || len(rep.Errors) != 0 || rep.Files < 100 {
		t.Errorf("report: %s, %d files, errors %+v", rep.Method, rep.Files, rep.Errors)
	}
	assertSameTree(t, src, dst)
	again := parseReport(t, mustRun(t, append(append([]string{"restore", "--method", "sftp"}, base...), sshdURL(srv, "/alice"), dst)...))
	if again.Files != 0 || again.Skipped != rep.Files {
		t.Errorf("rerun restored %d files, %d up to date; want 0, %d", again.Files, again.Skipped, rep.Files)
	}
	auto := filepath.Join(t.TempDir(), "alice")
	r := mustRun(t, append(append([]string{"restore"}, base...), sshdURL(srv, "/alice"), auto)...)
	if rep := parseReport(t, r); rep.Method != "sftp" || !strings.Contains(rep.MethodReason, "allows SFTP only") {
		t.Errorf("auto chose %q (%q); want sftp", rep.Method, rep.MethodReason)
	}
	assertSameTree(t, src, auto)
}

// serve --listen's SFTP subsystem: --method sftp restores the account
// from it, equal to the source, and OpenSSH's sftp client fetches a file
// from it and cannot write.
func TestE2ESFTPFromServeListen(t *testing.T) {
	e2e(t)
	t.Parallel()
	root := t.TempDir()
	src := filepath.Join(root, "alice")
	sftpCopy(t, account.get(t), src)
	srv := startListen(t, root, newListenKeys(t))
	dst := filepath.Join(t.TempDir(), "alice")
	args := append(append([]string{"restore", "--json", "--method", "sftp"}, srv.args()...), srv.url("alice"), dst)
	rep := parseReport(t, mustRun(t, args...))
	if rep.Method != "sftp" || len(rep.Errors) != 0 || rep.Files < 100 {
		t.Errorf("report: %s, %d files, errors %+v", rep.Method, rep.Files, rep.Errors)
	}
	assertSameTree(t, src, dst)

	testenv.RequireTool(t, "sftp")
	local := t.TempDir()
	batch := filepath.Join(local, "batch")
	if err := os.WriteFile(batch, []byte("get /alice/public_html/index.php "+local+"/index.php\n-mkdir /alice/new\n-rm /alice/public_html/index.php\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "sftp", "-b", batch, "-F", "/dev/null", "-i", srv.keys.identityFile, "-P", strconv.Itoa(srv.port),
		"-o", "UserKnownHostsFile="+srv.knownHosts, "-o", "GlobalKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "restore@127.0.0.1")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sftp -b (%v): %v\n%s", time.Since(start), err, out)
	}
	want, _ := os.ReadFile(filepath.Join(src, "public_html/index.php"))
	if got, err := os.ReadFile(filepath.Join(local, "index.php")); err != nil || string(got) != string(want) {
		t.Errorf("sftp get: %v; want public_html/index.php", err)
	}
	if _, err := os.Stat(filepath.Join(src, "public_html/index.php")); err != nil {
		t.Errorf("sftp rm through serve --listen: %v", err)
	}
	if _, err := os.Stat(filepath.Join(src, "new")); err == nil {
		t.Errorf("sftp mkdir through serve --listen made a directory")
	}
}
