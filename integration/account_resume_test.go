package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/restoresync/restoresync/internal/testsshd"
)

// An --account restore over a real sshd whose agent is killed mid-transfer
// leaves every directory it made owned by the account, with the source's
// mode plus full access for its owner (never root's, never owner-only
// unless the source says so), DST included; the same command, without
// --force or --ignore-dst-owner, then completes the tree.
func TestE2EAccountInterruptedThenRerun(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := faultsTree.get(t)
	srv := testsshd.Start(t)
	name, uid, gid := throwawayAccount(t)
	dst := filepath.Join(t.TempDir(), "home", name)
	args := append([]string{"restore", "--config", "none", "--account", name, "--jobs", "1", "--compress", "gzip:9", "--block-size", "4MiB"}, sshdArgs(srv)...)
	args = append(args, sshdURL(srv, src), dst)

	r := startRestore(t, args...)
	r.waitPlaced(dst)
	if n := killAgents(t, srv.PID); n == 0 {
		t.Fatal("no agent under sshd to kill")
	}
	res, _ := r.wait(r.start)
	if res.code == 0 {
		t.Fatalf("the restore completed although its agent was killed:\n%s", res)
	}
	placed := len(placedFiles(dst))
	if placed >= statTree(t, src).files {
		t.Fatalf("all %d files were in place: the restore was not interrupted", placed)
	}
	t.Logf("agent killed with %d files in place: %s", placed, strings.TrimSpace(res.stderr))
	assertInterimDirs(t, src, dst, uid, gid)
	assertPlacedSame(t, src, dst)

	mustRun(t, args...)
	assertOwnedBy(t, dst, uid, gid)
	// Modes aside (--account drops the setuid bits of files it gives
	// the account), the tree is the source's; directories have their
	// source's mode.
	rsyncItemize(t, []string{"-rltDHni", "--checksum", "--delete"}, src, dst)
	assertDirModes(t, src, dst, 0)
	assertNoTempFiles(t, dst)
}

// assertInterimDirs fails t unless every directory under dst (dst
// included) is owned by uid:gid and has its source's mode with rwx for its
// owner: what a run stopped before its end leaves.
func assertInterimDirs(t *testing.T, src, dst string, uid, gid uint32) {
	t.Helper()
	walkDirs(t, dst, func(rel string, st syscall.Stat_t) {
		if st.Uid != uid || st.Gid != gid {
			t.Errorf("directory %s after the interruption is owned by %d:%d, want the account's %d:%d", rel, st.Uid, st.Gid, uid, gid)
		}
	})
	assertDirModes(t, src, dst, 0o700)
}

// assertDirModes fails t unless every directory under dst (dst included)
// has the mode of its source's plus the bits in extra.
func assertDirModes(t *testing.T, src, dst string, extra uint32) {
	t.Helper()
	walkDirs(t, dst, func(rel string, st syscall.Stat_t) {
		var sst syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(src, rel), &sst); err != nil {
			t.Error(err)
			return
		}
		if want := sst.Mode&0o7777 | extra; st.Mode&0o7777 != want {
			t.Errorf("directory %s: mode %04o, want %04o", rel, st.Mode&0o7777, want)
		}
	})
}

// walkDirs calls fn with the lstat of every directory under root, root
// (".") included, but for the writer's temporary ones: a directory is
// made under its temporary name and owned there before it is renamed into
// the tree, so an interruption may leave one (root's, until its chown),
// which the rerun removes (assertNoTempFiles checks that it did).
func walkDirs(t *testing.T, root string, fn func(rel string, st syscall.Stat_t)) {
	t.Helper()
	check := func(rel string) {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(root, rel), &st); err != nil {
			t.Error(err)
			return
		}
		fn(rel, st)
	}
	check(".")
	walkRel(t, root, func(rel string, d os.DirEntry) {
		if d.IsDir() && !(strings.HasPrefix(d.Name(), ".restoresync-") && strings.HasSuffix(d.Name(), ".tmp")) {
			check(rel)
		}
	})
}

// killAgents sends SIGKILL to every restoresync process (binPath) that
// descends from the sshd of PID sshdPID, and returns how many it killed.
func killAgents(t *testing.T, sshdPID int) int {
	t.Helper()
	want, err := filepath.EvalSymlinks(binPath)
	if err != nil {
		t.Fatal(err)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	parent := map[int]int{}
	for _, p := range procs {
		b, err := os.ReadFile(p + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut after ')'.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		pid, _ := strconv.Atoi(filepath.Base(p))
		if len(f) > 1 {
			parent[pid], _ = strconv.Atoi(f[1])
		}
	}
	n := 0
	for pid := range parent {
		exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
		if err != nil || exe != want {
			continue
		}
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == sshdPID {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					n++
				}
				break
			}
		}
	}
	return n
}
