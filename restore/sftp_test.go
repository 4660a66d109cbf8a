package restore_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/internal/testsshd"
	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/transfer"
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
	o.Compression = transfer.DefaultCompression // auto: SFTP has no codecs to report
	rep := run(t, o)
	assertSFTPTree(t, src, dst)
	assertNoTempFiles(t, dst)
	if rep.Compression != "none" || len(rep.Codecs) != 0 || rep.LinkMiBPerSec != 0 {
		t.Errorf("--compress auto with sftp: compression %q, codecs %+v, link %.1f MiB/s; want none, no codecs, no link figure", rep.Compression, rep.Codecs, rep.LinkMiBPerSec)
	}
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

// The quick check of --method sftp compares mtimes to the second, all
// SFTP version 3 carries: a DST that a raw restore made (mtimes to the
// nanosecond) is up to date for it, not sent again.
func TestSFTPQuickCheckToTheSecond(t *testing.T) {
	src := filepath.Join(t.TempDir(), "alice")
	accountFixture().build(t, src) // mtimes with nanoseconds
	dst := filepath.Join(t.TempDir(), "alice")
	run(t, restore.Options{Src: src, Dst: dst, Method: restore.MethodRaw})
	srv := sftpOnly(t, "")
	rep := run(t, sftpOptions(srv, src, dst))
	if rep.Files != 0 || rep.Skipped != 21 {
		t.Errorf("sftp over a raw restore restored %d files, %d up to date; want 0, 21", rep.Files, rep.Skipped)
	}
}

// Go's own src/net (about 400 files no one here wrote), over an SFTP-only
// account without a chroot (the SRC is an absolute path), through OpenSSH's
// ssh program (-e) as well as the built-in client.
func TestSFTPPullGoNet(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	src := filepath.Join(t.TempDir(), "net")
	testenv.RequireTool(t, "cp")
	if out, err := exec.Command("cp", "-a", filepath.Join(runtimeGOROOT(t), "src", "net"), src).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	truncateTimes(t, src)
	srv := sftpOnly(t, "")
	for _, via := range []string{"built-in", "-e ssh"} {
		t.Run(via, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "net")
			o := sftpOptions(srv, src, dst)
			if via == "-e ssh" {
				testenv.RequireTool(t, "ssh")
				o.Src, o.SSH = "testhost:"+src, transport.SSHOptions{Rsh: "ssh -F " + srv.Config(t)}
			}
			o.Jobs = 3
			rep := run(t, o)
			assertSFTPTree(t, src, dst)
			rsyncSame(t, src, dst)
			if rep.Files < 400 || rep.Jobs != 3 {
				t.Errorf("restored %d files over %d connections; want more than 400 over 3", rep.Files, rep.Jobs)
			}
		})
	}
}

// cancelAfter is a Progress that cancels the run once n files are in
// place.
type cancelAfter struct {
	n      int64
	done   atomic.Int64
	cancel context.CancelFunc
}

func (c *cancelAfter) Start(int, int64) {}
func (c *cancelAfter) Streams(int)      {}
func (c *cancelAfter) Add(files int, _ int64) {
	if files > 0 && c.done.Add(int64(files)) >= c.n {
		c.cancel()
	}
}

// A run interrupted (cancelled after some files, at several points)
// leaves complete files under their final names and no temporary file;
// a rerun of the same restore completes it and sends only what is
// missing.
func TestSFTPInterruptedThenRerun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	src := filepath.Join(t.TempDir(), "net")
	if out, err := exec.Command("cp", "-a", filepath.Join(runtimeGOROOT(t), "src", "net"), src).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	truncateTimes(t, src)
	srv := sftpOnly(t, "")
	for _, after := range []int64{1, 40, 300} {
		t.Run(strconv.FormatInt(after, 10), func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "net")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			o := sftpOptions(srv, src, dst)
			o.Progress = &cancelAfter{n: after, cancel: cancel}
			rep, err := restore.Run(ctx, o)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("interrupted run: %v; want context.Canceled", err)
			}
			assertNoTempFiles(t, dst)
			if rep.Files < int(after) {
				t.Errorf("interrupted run restored %d files; want at least %d", rep.Files, after)
			}
			first := rep.Files
			o.Progress = nil
			again := run(t, o)
			assertSFTPTree(t, src, dst)
			if again.Skipped < first || again.Files == 0 {
				t.Errorf("rerun restored %d files, %d up to date; the interrupted run had placed %d", again.Files, again.Skipped, first)
			}
		})
	}
}

// A hostile tree on an SFTP-only, chrooted server: symlinks pointing out
// of the chroot (absolute, "..", to "/"), names with a newline, invalid
// UTF-8, glob characters, a leading dash, 255 bytes. Each symlink is
// restored as a symlink with its target as stored, nothing it points to
// is read or written, and every odd name arrives as it is.
func TestSFTPHostileTree(t *testing.T) {
	chroot := testsshd.ChrootDir(t)
	src := filepath.Join(chroot, "evil")
	TestDir{
		"passwd":                 TestSymlink{Target: "/etc/passwd"},
		"escape":                 TestSymlink{Target: "../../../../../etc"},
		"root":                   TestSymlink{Target: "/"},
		"up":                     TestSymlink{Target: ".."},
		"new\nline":              TestFile{Content: "newline"},
		"bad\xffutf8":            TestFile{Content: "utf-8"},
		"*?[glob]\\":             TestFile{Content: "glob"},
		"-rf":                    TestFile{Content: "dash"},
		" spaced ":               TestDir{"x": TestFile{Content: "x"}},
		strings.Repeat("l", 255): TestFile{Content: "long"},
		"dir":                    TestDir{"link-out": TestSymlink{Target: "../../../../.."}},
	}.build(t, src)
	truncateTimes(t, src)
	srv := sftpOnly(t, chroot)
	dst := filepath.Join(t.TempDir(), "evil")
	rep := run(t, sftpOptions(srv, "/evil", dst))
	assertSFTPTree(t, src, dst)
	if rep.Symlinks != 5 || rep.Files != 6 {
		t.Errorf("restored %d files, %d symlinks; want 6, 5", rep.Files, rep.Symlinks)
	}
	// A SRC through a symlink out of the chroot resolves in the chroot:
	// "escape" finds no /etc there (the run fails before DST is made),
	// "root" is the chroot itself.
	d := filepath.Join(t.TempDir(), "x")
	if _, err := restore.Run(context.Background(), sftpOptions(srv, "/evil/escape", d)); err == nil || !strings.Contains(err.Error(), "not exist") {
		t.Errorf("SRC /evil/escape (a symlink to ../../../../../etc): %v; want a SRC that does not exist in the chroot", err)
	}
	if _, err := os.Lstat(d); err == nil {
		t.Errorf("a restore that could not list SRC created DST")
	}
	run(t, sftpOptions(srv, "/evil/root", d))
	if _, err := os.Lstat(filepath.Join(d, "evil", "passwd")); err != nil {
		t.Errorf("SRC /evil/root (a symlink to /): %v; want the chroot's own tree", err)
	}
	if _, err := os.Lstat(filepath.Join(d, "etc")); err == nil {
		t.Errorf("SRC /evil/root reached the server's /etc")
	}
}

// Usage errors: --method sftp pulls only, from one SRC.
func TestSFTPUsage(t *testing.T) {
	dir := t.TempDir()
	for _, o := range []restore.Options{
		{Src: dir, Dst: "web:/srv/x"},
		{Src: dir, Dst: filepath.Join(dir, "d")},
		{Src: "backup:/a", MoreSrc: []string{"backup:/b"}, Dst: filepath.Join(dir, "d")},
		{Src: "backup:/a", Dst: filepath.Join(dir, "d"), Verify: true},
		{Src: "backup:/a", Dst: filepath.Join(dir, "d"), Compression: transfer.Compression{Codec: transfer.CodecZstd, Level: 3}},
		{Src: "backup:/a", Dst: filepath.Join(dir, "d"), Compression: transfer.Compression{Codec: transfer.CodecLZ4}},
	} {
		o.Method = restore.MethodSFTP
		_, err := restore.Run(context.Background(), o)
		if !errors.Is(err, restore.ErrUsage) {
			t.Errorf("%s → %s: %v; want a usage error", o.Src, o.Dst, err)
		}
		if o.Compression.Codec != transfer.CodecNone && (err == nil || !strings.Contains(err.Error(), "--compress "+o.Compression.String())) {
			t.Errorf("--compress %s with --method sftp: %v; want a usage error naming the flag", o.Compression, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "d")); err == nil {
		t.Errorf("a refused restore created DST")
	}
}

// Filters, --delete, --dry-run and --itemize-changes do with --method
// sftp what they do with the raw method: on the same source (no
// hardlinks, whole-second mtimes) and the same older DST, the same change
// lines, the same deletions and the same tree.
func TestSFTPSelectionMatchesRaw(t *testing.T) {
	src := filepath.Join(t.TempDir(), "alice")
	fixture := accountFixture()
	delete(fixture["public_html"].(TestDir), "copy-of-index.php")
	delete(fixture["backups"].(TestDir), "db-link.sql")
	fixture.build(t, src)
	truncateTimes(t, src)
	srv := sftpOnly(t, "")
	older := func(t *testing.T) string {
		dst := filepath.Join(t.TempDir(), "alice")
		run(t, restore.Options{Src: src, Dst: dst, Method: restore.MethodRaw})
		must(t, os.WriteFile(filepath.Join(dst, "public_html/index.php"), []byte("older"), 0o644))
		must(t, os.WriteFile(filepath.Join(dst, "public_html/stale.php"), []byte("gone from the backup"), 0o644))
		must(t, os.WriteFile(filepath.Join(dst, "logs/keep.log"), []byte("excluded: kept"), 0o644))
		must(t, os.RemoveAll(filepath.Join(dst, "mail")))
		for _, p := range []string{"public_html/index.php", "public_html/stale.php", "logs/keep.log", "public_html", "logs", "."} {
			must(t, lutimes(filepath.Join(dst, p), fixtureTime)) // both older DSTs alike
		}
		return dst
	}
	filters := []treewalk.Rule{ex("*.log"), ex("/sticky")}
	for _, dry := range []bool{true, false} {
		t.Run(fmt.Sprintf("dry-run=%v", dry), func(t *testing.T) {
			rawDst, sftpDst := older(t), older(t)
			ro := restore.Options{Src: src, Dst: rawDst, Method: restore.MethodRaw, Filters: filters, Delete: true, DryRun: dry, ItemizeChanges: true}
			so := sftpOptions(srv, src, sftpDst)
			so.Filters, so.Delete, so.DryRun, so.ItemizeChanges = filters, true, dry, true
			raw, sf := run(t, ro), run(t, so)
			if strings.Join(raw.Changes, "\n") != strings.Join(sf.Changes, "\n") || raw.Deleted != sf.Deleted {
				t.Errorf("sftp's changes (%d deleted):\n%s\nraw's (%d deleted):\n%s", sf.Deleted, strings.Join(sf.Changes, "\n"), raw.Deleted, strings.Join(raw.Changes, "\n"))
			}
			if len(sf.Changes) < 5 || sf.Deleted != 1 {
				t.Errorf("%d changes, %d deleted; want the older DST's changes and stale.php deleted", len(sf.Changes), sf.Deleted)
			}
			diffs, err := treewalk.Compare(context.Background(), rawDst, sftpDst, treewalk.CompareOptions{IgnoreRootDir: true})
			must(t, err)
			for _, d := range diffs {
				t.Errorf("raw's DST and sftp's differ: %s", d)
			}
		})
	}
}

// --method auto on an SFTP-only account (OpenSSH's ForceCommand
// internal-sftp): whether it looks for the agent first or goes agent-less
// (--remote-path none), through the built-in client or -e ssh, with
// selection options or without, it uses sftp and says why; on a server
// that runs commands, agent-less auto still uses the remote's tar though
// its sftp subsystem answers too.
func TestSFTPAutoDetectsSFTPOnly(t *testing.T) {
	chroot := testsshd.ChrootDir(t)
	src := sftpAccount(t, chroot, "alice")
	srv := sftpOnly(t, chroot)
	for _, tc := range []struct {
		name       string
		remotePath string
		rsh        bool
		del        bool
	}{
		{"agent", "", false, false},
		{"agent/-e", "", true, false},
		{"agent/--delete", "", false, true},
		{"no-agent", restore.NoAgent, false, false},
		{"no-agent/-e", restore.NoAgent, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "alice")
			o := sftpOptions(srv, "/alice", dst)
			o.Method, o.SSH.RemotePath, o.Delete = restore.MethodAuto, tc.remotePath, tc.del
			if tc.rsh {
				o.Src, o.SSH = "testhost:/alice", transport.SSHOptions{Rsh: "ssh -F " + srv.Config(t), RemotePath: tc.remotePath}
			}
			rep := run(t, o)
			if rep.Method != "sftp" || !strings.Contains(rep.MethodReason, "allows SFTP only") || !strings.Contains(rep.MethodReason, "sftp connections only") {
				t.Errorf("auto chose %q (%q); want sftp, because the remote allows SFTP only", rep.Method, rep.MethodReason)
			}
			assertSFTPTree(t, src, dst)
		})
	}
	t.Run("commands-run", func(t *testing.T) {
		testenv.RequireTool(t, "tar")
		srv := testsshd.StartConfig(t, testsshd.SFTPSubsystem)
		dst := filepath.Join(t.TempDir(), "alice")
		o := sftpOptions(srv, src, dst)
		o.Method, o.SSH.RemotePath = restore.MethodAuto, restore.NoAgent
		rep := run(t, o)
		if rep.Method != "tar" {
			t.Errorf("auto chose %q (%q) on a server that runs commands; want tar", rep.Method, rep.MethodReason)
		}
	})
}

// Owners over SFTP are numeric ids (SFTP version 3 sends no names), and
// --usermap, --groupmap and --chown apply to them as with --numeric-ids:
// numeric FROM values and "*" match, names of the source cannot.
func TestSFTPOwnerMaps(t *testing.T) {
	src := filepath.Join(t.TempDir(), "alice")
	TestDir{"a": TestFile{Content: "a"}, "b": TestFile{Content: "b"}, "d": TestDir{"c": TestFile{Content: "c"}}}.build(t, src)
	must(t, os.Lchown(filepath.Join(src, "a"), 1500, 1600))
	must(t, os.Lchown(filepath.Join(src, "b"), 1, 1)) // daemon here: a name rule "daemon" must not match it
	srv := sftpOnly(t, "")
	owner := func(p string) string {
		fi, err := os.Lstat(p)
		must(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		return fmt.Sprintf("%d:%d", st.Uid, st.Gid)
	}
	for _, tc := range []struct {
		name                string
		usermap, groupmap   []string
		chown               string
		wantA, wantB, wantC string
	}{
		{"numeric", []string{"1500:2500"}, []string{"1600:2600"}, "", "2500:2600", "1:1", "0:0"},
		{"names-do-not-match", []string{"daemon:3000"}, []string{"daemon:3001"}, "", "1500:1600", "1:1", "0:0"},
		{"star", []string{"*:4000"}, []string{"*:4001"}, "", "4000:4001", "4000:4001", "4000:4001"},
		{"chown", nil, nil, "5000:5001", "5000:5001", "5000:5001", "5000:5001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "alice")
			o := sftpOptions(srv, src, dst)
			o.Writer.Owner.Usermap, o.Writer.Owner.Groupmap, o.Writer.Owner.Chown = tc.usermap, tc.groupmap, tc.chown
			run(t, o)
			if a, b, c := owner(filepath.Join(dst, "a")), owner(filepath.Join(dst, "b")), owner(filepath.Join(dst, "d/c")); a != tc.wantA || b != tc.wantB || c != tc.wantC {
				t.Errorf("owners a %s, b %s, d/c %s; want %s, %s, %s", a, b, c, tc.wantA, tc.wantB, tc.wantC)
			}
		})
	}
}

// A SRC that is a file lands at DST/<name>, as with every method; a SRC
// that is missing fails the run before DST is made.
func TestSFTPFileSrc(t *testing.T) {
	src := filepath.Join(t.TempDir(), "alice")
	TestDir{"wp-config.php": TestFile{Content: "<?php // config\n", Mode: 0o600}}.build(t, src)
	truncateTimes(t, src)
	srv := sftpOnly(t, "")
	dst := filepath.Join(t.TempDir(), "restored")
	rep := run(t, sftpOptions(srv, filepath.Join(src, "wp-config.php"), dst))
	got, err := os.ReadFile(filepath.Join(dst, "wp-config.php"))
	if err != nil || string(got) != "<?php // config\n" || rep.Files != 1 {
		t.Errorf("DST/wp-config.php: %q, %v, %d files; want the file", got, err, rep.Files)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	if _, err := restore.Run(context.Background(), sftpOptions(srv, filepath.Join(src, "nope"), missing)); err == nil {
		t.Errorf("a missing SRC: no error")
	}
	if _, err := os.Lstat(missing); err == nil {
		t.Errorf("a missing SRC made DST")
	}
}
