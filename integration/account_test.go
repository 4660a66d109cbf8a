package integration

// --account and the example post-restore hook, on real accounts of this
// host that each test creates (useradd): they need root.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// throwawayAccount creates a user with a group of the same name (useradd
// -U) for the test, and removes both when it ends. Tests run as root.
func throwawayAccount(t *testing.T) (name string, uid, gid uint32) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("account tests create a user: run them as root (CI does)")
	}
	name = fmt.Sprintf("rsops%06d", rand.IntN(1000000))
	var out []byte
	var err error
	for range 20 { // useradd fails while another process holds /etc/passwd's lock
		out, err = exec.Command("useradd", "-U", "-M", "-s", "/usr/sbin/nologin", "-d", "/nonexistent", name).CombinedOutput()
		if err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("useradd %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() {
		for range 20 {
			if exec.Command("userdel", name).Run() == nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		exec.Command("groupdel", name).Run() // gone with the user when USERGROUPS_ENAB
	})
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		t.Fatal(err)
	}
	u64, _ := strconv.ParseUint(u.Uid, 10, 32)
	g64, _ := strconv.ParseUint(g.Gid, 10, 32)
	return name, uint32(u64), uint32(g64)
}

// assertOwnedBy fails t unless every entry under root has uid and gid.
func assertOwnedBy(t *testing.T, root string, uid, gid uint32) {
	t.Helper()
	n := 0
	walkRel(t, root, func(rel string, _ os.DirEntry) {
		u, g := ownerOf(t, filepath.Join(root, rel))
		if u != uid || g != gid {
			if n++; n <= 5 {
				t.Errorf("%s is owned by %d:%d, want the account's %d:%d", rel, u, g, uid, gid)
			}
		}
	})
}

// --account NAME: every file owned by the account's user and group looked
// up here, whatever the source's owners; a DST owned by someone else is
// refused without --force, and nothing is written into it.
func TestAccountOwnership(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := account.get(t) // varied owners (bench gen --owners)
	name, uid, gid := throwawayAccount(t)
	dst := filepath.Join(t.TempDir(), "home", name)

	r := mustRun(t, "restore", "--config", "none", "--json", "--account", name, src, dst)
	if rep := parseReport(t, r); rep.Files != statTree(t, src).files {
		t.Errorf("report: %d files, the source has %d", rep.Files, statTree(t, src).files)
	}
	assertOwnedBy(t, dst, uid, gid)
	// A rerun into the account's own DST needs no --force.
	mustRun(t, "restore", "--config", "none", "--account", name, src, dst)

	// A non-empty DST owned by root: refused, untouched.
	other := filepath.Join(t.TempDir(), "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "root-file"), []byte("root's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runBin(t, "restore", "--config", "none", "--account", name, src, other)
	if r.code != exitUsage || !strings.Contains(r.stderr, "not by account "+name) || !strings.Contains(r.stderr, "--ignore-dst-owner") {
		t.Errorf("restore into a root-owned DST: want exit 1 naming the account and --ignore-dst-owner:\n%s", r)
	}
	if names, _ := os.ReadDir(other); len(names) != 1 {
		t.Errorf("a refused restore wrote %d entries into DST", len(names)-1)
	}
	// --ignore-dst-owner overrides; --chown overrides the owner.
	mustRun(t, "restore", "--config", "none", "--account", name, "--ignore-dst-owner", "--chown", "nobody:"+name, src, other)
	nobody, _ := user.Lookup("nobody")
	nuid, _ := strconv.ParseUint(nobody.Uid, 10, 32)
	assertOwnedBy(t, filepath.Join(other, "public_html"), uint32(nuid), gid)

	// An empty DST owned by root (mkdir'd by an admin, or by a run cut
	// short before its chown) is accepted, and becomes the account's.
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "restore", "--config", "none", "--account", name, src, empty)
	if u, g := ownerOf(t, empty); u != uid || g != gid {
		t.Errorf("the empty DST is owned by %d:%d after the restore, want the account's %d:%d", u, g, uid, gid)
	}
	assertOwnedBy(t, empty, uid, gid)

	// An account that does not exist here is a usage error.
	r = runBin(t, "restore", "--config", "none", "--account", name+"x", src, filepath.Join(t.TempDir(), "x"))
	if r.code != exitUsage || !strings.Contains(r.stderr, name+"x") {
		t.Errorf("unknown account: want exit 1 naming it:\n%s", r)
	}
}

// examples/hooks/post-restore.sh after an account restore: the config file
// belongs to the account and the web server's group, mode 0640, and the
// web server stand-in was reloaded.
func TestExamplePostRestoreHook(t *testing.T) {
	e2e(t)
	t.Parallel()
	script, err := filepath.Abs("../examples/hooks/post-restore.sh")
	if err != nil {
		t.Fatal(err)
	}
	src := smallTree(t)
	name, uid, gid := throwawayAccount(t)
	dir := t.TempDir()
	dst := filepath.Join(dir, "home", name)
	daemon, err := user.LookupGroup("daemon")
	if err != nil {
		t.Fatal(err)
	}
	hook := fmt.Sprintf("WEB_GROUP=daemon WEB_RELOAD='echo reload >> %s/reloads' %s", dir, script)
	r := mustRun(t, "restore", "--config", "none", "--account", name, "--post-hook", hook, src, dst)
	if !strings.Contains(r.stderr, "post-restore: "+name+": ok, 5 files") {
		t.Errorf("the script's report line is missing:\n%s", r)
	}
	cfg := filepath.Join(dst, "public_html", "wp-config.php")
	fi, err := os.Stat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dgid, _ := strconv.ParseUint(daemon.Gid, 10, 32)
	if u, g := ownerOf(t, cfg); u != uid || g != uint32(dgid) || fi.Mode().Perm() != 0o640 {
		t.Errorf("wp-config.php: %d:%d %v, want %d:%s 0640", u, g, fi.Mode().Perm(), uid, daemon.Gid)
	}
	if u, g := ownerOf(t, filepath.Join(dst, "public_html", "index.php")); u != uid || g != gid {
		t.Errorf("index.php: %d:%d, want the account's %d:%d", u, g, uid, gid)
	}
	if b, _ := os.ReadFile(dir + "/reloads"); string(b) != "reload\n" {
		t.Errorf("web server reloads: %q, want one", b)
	}
}
