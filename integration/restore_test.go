package integration

import (
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/internal/testsshd"
	"github.com/restoresync/restoresync/transfer"
)

// Pull over a real sshd with the built-in client, ssh:// form.
func TestE2EPullSSHD(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := account.get(t)
	srv := testsshd.Start(t)
	dst := filepath.Join(t.TempDir(), "restored", "alice")

	args := append([]string{"restore", "--json", "-j", "3"}, sshdArgs(srv)...)
	r := mustRun(t, append(args, sshdURL(srv, src), dst)...)
	checkFreshReport(t, parseReport(t, r), statTree(t, src), 3, transfer.DefaultCompression.String())
	assertSameTree(t, src, dst)
	assertNoTempFiles(t, dst)
}

// Push over a real sshd: the local tree goes to the remote path, written by
// 'serve --stdio' there.
func TestE2EPushSSHD(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := account.get(t)
	srv := testsshd.Start(t)
	dst := filepath.Join(t.TempDir(), "pushed", "alice")

	args := append([]string{"restore", "--json", "-j", "4", "--compress", "lz4"}, sshdArgs(srv)...)
	args = append(args, src, sshdURL(srv, dst))
	first := parseReport(t, mustRun(t, args...))
	checkFreshReport(t, first, statTree(t, src), 4, "lz4")
	assertSameTree(t, src, dst)
	assertNoTempFiles(t, dst)

	// The remote writer's quick check finds everything up to date.
	second := parseReport(t, mustRun(t, args...))
	if second.Files != 0 || second.Bytes != 0 || second.Skipped != first.Files {
		t.Errorf("second push: %d files, %d bytes, %d skipped; want 0, 0, %d", second.Files, second.Bytes, second.Skipped, first.Files)
	}
}

// Pull through the system OpenSSH client (-e), with the test sshd's
// ssh_config and a host alias.
func TestE2EPullRsh(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := account.get(t)
	srv := testsshd.Start(t)
	cfg := srv.Config(t)
	dst := filepath.Join(t.TempDir(), "alice")

	r := mustRun(t, "restore", "--json", "-j", "2", "-e", "ssh -F "+cfg, "--remote-path", binPath, "testhost:"+src, dst)
	checkFreshReport(t, parseReport(t, r), statTree(t, src), 2, transfer.DefaultCompression.String())
	assertSameTree(t, src, dst)
	assertNoTempFiles(t, dst)
}

// Pull from the built-in 'serve --listen' endpoint; it confines clients to
// its root and refuses to receive.
func TestE2EListen(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := account.get(t)
	root := filepath.Dir(src) // the account is ROOT/alice
	srv := startListen(t, root, newListenKeys(t))

	t.Run("pull", func(t *testing.T) {
		t.Parallel()
		dst := filepath.Join(t.TempDir(), "alice")
		args := append([]string{"restore", "--json", "-j", "4", "--compress", "zstd"}, srv.args()...)
		r := mustRun(t, append(args, srv.url("alice"), dst)...)
		checkFreshReport(t, parseReport(t, r), statTree(t, src), 4, "zstd")
		assertSameTree(t, src, dst)
		assertNoTempFiles(t, dst)
	})

	t.Run("escape", func(t *testing.T) {
		t.Parallel()
		dst := filepath.Join(t.TempDir(), "etc")
		r := runBin(t, append(append([]string{"restore"}, srv.args()...), srv.url("../etc"), dst)...)
		assertCleanFailure(t, r)
		if !strings.Contains(r.stderr, "root") {
			t.Errorf("the message does not say the path leaves the served root:\n%s", r)
		}
		if names, _ := os.ReadDir(dst); len(names) > 0 {
			t.Errorf("%s got %d entries from outside the served root", dst, len(names))
		}
	})

	t.Run("push refused", func(t *testing.T) {
		t.Parallel()
		local := t.TempDir()
		if err := os.WriteFile(filepath.Join(local, "index.php"), []byte("<?php echo 1;\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runBin(t, append(append([]string{"restore"}, srv.args()...), local, srv.url("pushed"))...)
		assertCleanFailure(t, r)
		if !strings.Contains(r.stderr, "read-only") {
			t.Errorf("the message does not say the endpoint is read-only:\n%s", r)
		}
		if _, err := os.Lstat(filepath.Join(root, "pushed")); err == nil {
			t.Errorf("the read-only endpoint created %s", filepath.Join(root, "pushed"))
		}
	})
}

// Every codec over sshd, each with one stream or eight (the other tests
// cover more pairs); the account's media files are larger than
// --block-size and travel split.
func TestE2ECodecsAndJobs(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := account.get(t)
	srcStats := statTree(t, src)
	const blockSize = 1 << 20
	if srcStats.largest <= blockSize {
		t.Fatalf("the account's largest file has %d bytes; the test needs one above --block-size %d", srcStats.largest, blockSize)
	}
	srv := testsshd.Start(t)
	for _, tc := range []struct {
		codec string
		jobs  int
	}{
		{"none", 1}, {"lz4", 8}, {"zstd", 8}, {"gzip", 1},
	} {
		t.Run(tc.codec+"/j"+strconv.Itoa(tc.jobs), func(t *testing.T) {
			t.Parallel()
			dst := filepath.Join(t.TempDir(), "alice")
			args := append([]string{"restore", "--json", "--compress", tc.codec, "--jobs", strconv.Itoa(tc.jobs), "--block-size", "1MiB"}, sshdArgs(srv)...)
			r := mustRun(t, append(args, sshdURL(srv, src), dst)...)
			rep := parseReport(t, r)
			checkFreshReport(t, rep, srcStats, tc.jobs, tc.codec)
			// The account's text (PHP, SQL, logs, mail) compresses; its
			// media does not.
			if tc.codec == "none" && rep.WireBytes < rep.Bytes {
				t.Errorf("none: %d wire bytes for %d payload bytes", rep.WireBytes, rep.Bytes)
			}
			if tc.codec != "none" && rep.WireBytes >= rep.Bytes {
				t.Errorf("%s: %d wire bytes for %d payload bytes: nothing was compressed", tc.codec, rep.WireBytes, rep.Bytes)
			}
			assertSameTree(t, src, dst)
			assertNoTempFiles(t, dst)
		})
	}
}

// A second restore into the restored tree finds every file up to date and
// sends no file data, though it corrects the owner and mode of files whose
// contents are up to date. Through -F CONFIG and a host alias.
func TestE2ERerunTransfersNothing(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := account.get(t)
	srv := testsshd.Start(t)
	cfg := srv.Config(t)
	dst := filepath.Join(t.TempDir(), "alice")
	args := []string{"restore", "--json", "-F", cfg, "--remote-path", binPath, "testhost:" + src, dst}

	first := parseReport(t, mustRun(t, args...))
	checkFreshReport(t, first, statTree(t, src), 0, transfer.DefaultCompression.String())
	// Same size and mtime, other mode or owner: not sent again, fixed.
	if err := os.Chmod(filepath.Join(dst, "public_html", "index.php"), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		lchown(t, filepath.Join(dst, ".bashrc"), 4242, 4242)
	}
	second := parseReport(t, mustRun(t, args...))
	if second.Files != 0 || second.Bytes != 0 || second.Skipped != first.Files {
		t.Errorf("rerun: %d files, %d bytes, %d skipped; want 0, 0, %d", second.Files, second.Bytes, second.Skipped, first.Files)
	}
	if second.WireBytes <= 0 || second.WireBytes >= first.WireBytes {
		t.Errorf("rerun: %d wire bytes, first run %d: want fewer (only the file list)", second.WireBytes, first.WireBytes)
	}
	if len(second.Errors) != 0 {
		t.Errorf("rerun: errors: %+v", second.Errors)
	}
	assertSameTree(t, src, dst)
	assertNoTempFiles(t, dst)
}

// A symlink planted on the destination where the source has a directory
// (or a file) is replaced, never followed: what it points to is untouched.
func TestE2EPlantedSymlinkNotFollowed(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := account.get(t)
	srv := testsshd.Start(t)

	outside := filepath.Join(t.TempDir(), "outside")
	for name, content := range map[string]string{"canary": "canary: must not change\n", "index.php": "<?php // outside\n"} {
		p := filepath.Join(outside, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshot(t, outside)

	dst := filepath.Join(t.TempDir(), "alice")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	// public_html is a directory in the source; .bashrc is a file.
	if err := os.Symlink(outside, filepath.Join(dst, "public_html")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "canary"), filepath.Join(dst, ".bashrc")); err != nil {
		t.Fatal(err)
	}

	mustRun(t, append(append([]string{"restore"}, sshdArgs(srv)...), sshdURL(srv, src), dst)...)

	if after := snapshot(t, outside); after != before {
		t.Errorf("the directory the planted symlink pointed to changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	for _, name := range []string{"public_html", ".bashrc"} {
		fi, err := os.Lstat(filepath.Join(dst, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			t.Errorf("%s is still a symlink", name)
		}
	}
	assertSameTree(t, src, dst)
	assertNoTempFiles(t, dst)
}

// snapshot describes every entry under root: name, type, mode, size, mtime
// and contents.
func snapshot(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	walkRel(t, root, func(rel string, d fs.DirEntry) {
		fi, err := d.Info()
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(rel + " " + fi.Mode().String() + " " + strconv.FormatInt(fi.Size(), 10) + " " + fi.ModTime().String())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(filepath.Join(root, rel))
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(" " + strconv.Quote(string(data)))
		}
		b.WriteString("\n")
	})
	return b.String()
}

// --chown gives every restored entry, the destination itself included, the
// one owner, and drops the set-id bits of programs whose owner changed.
func TestE2EChown(t *testing.T) {
	e2e(t)
	requireRoot(t)
	t.Parallel()
	src := account.get(t)
	uid, gid := lookupIDs(t, "daemon", "daemon")
	srv := testsshd.Start(t)
	dst := filepath.Join(t.TempDir(), "alice")

	args := append([]string{"restore", "--chown", "daemon:daemon"}, sshdArgs(srv)...)
	mustRun(t, append(args, sshdURL(srv, src), dst)...)

	// Contents, times, links: as the source (owners and modes checked below).
	rsyncItemize(t, []string{"-rltDHni", "--checksum", "--delete"}, src, dst)
	bad := 0
	walkRel(t, dst, func(rel string, d fs.DirEntry) {
		du, dg := ownerOf(t, filepath.Join(dst, rel))
		if (du != uid || dg != gid) && bad < 10 {
			bad++
			t.Errorf("%s: owner %d:%d, want daemon:daemon (%d:%d)", rel, du, dg, uid, gid)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return
		}
		sfi, err := os.Lstat(filepath.Join(src, rel))
		if err != nil {
			t.Fatal(err)
		}
		dfi, err := os.Lstat(filepath.Join(dst, rel))
		if err != nil {
			t.Fatal(err)
		}
		want := sfi.Mode()
		if !want.IsDir() {
			su, sg := ownerOf(t, filepath.Join(src, rel))
			if su != uid {
				want &^= fs.ModeSetuid
			}
			if sg != gid {
				want &^= fs.ModeSetgid
			}
		}
		if dfi.Mode() != want {
			t.Errorf("%s: mode %v, want %v (source %v)", rel, dfi.Mode(), want, sfi.Mode())
		}
	})
}

// --numeric-ids keeps the source's raw ids, those with no name here too.
func TestE2ENumericIDs(t *testing.T) {
	e2e(t)
	requireRoot(t)
	t.Parallel()
	src := filepath.Join(t.TempDir(), "bob")
	mustRun(t, "bench", "gen", "--profile", "hosting", "--scale", "0.02", "--seed", "3", "--owners", src)
	// Ids no account here has, and nobody's, on a file, a directory and a
	// symlink.
	lchown(t, filepath.Join(src, "public_html", "index.php"), 4242, 4343)
	lchown(t, filepath.Join(src, "public_html", "wp-content"), 5001, 5002)
	lchown(t, filepath.Join(src, "www"), 6001, 65534)
	lchown(t, filepath.Join(src, ".bashrc"), 65534, 65534)
	srv := testsshd.Start(t)
	dst := filepath.Join(t.TempDir(), "bob")

	args := append([]string{"restore", "--numeric-ids"}, sshdArgs(srv)...)
	mustRun(t, append(args, sshdURL(srv, src), dst)...)

	bad := 0
	walkRel(t, src, func(rel string, d fs.DirEntry) {
		su, sg := ownerOf(t, filepath.Join(src, rel))
		du, dg := ownerOf(t, filepath.Join(dst, rel))
		if (su != du || sg != dg) && bad < 10 {
			bad++
			t.Errorf("%s: owner %d:%d, the source's is %d:%d", rel, du, dg, su, sg)
		}
	})
	assertSameTree(t, src, dst)
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("owners are set only when running as root")
	}
}

func lookupIDs(t *testing.T, userName, groupName string) (uid, gid uint32) {
	t.Helper()
	u, err := user.Lookup(userName)
	if err != nil {
		t.Fatalf("user %s: %v", userName, err)
	}
	g, err := user.LookupGroup(groupName)
	if err != nil {
		t.Fatalf("group %s: %v", groupName, err)
	}
	ui, _ := strconv.ParseUint(u.Uid, 10, 32)
	gi, _ := strconv.ParseUint(g.Gid, 10, 32)
	return uint32(ui), uint32(gi)
}
