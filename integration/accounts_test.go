package integration

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testreport"
	"github.com/restoresync/restoresync/internal/testsshd"
)

// accountsJSON is restore --accounts --json's object.
type accountsJSON struct {
	Accounts []struct {
		Account  string            `json:"account"`
		ExitCode int               `json:"exit_code"`
		Error    string            `json:"error"`
		Files    int               `json:"files"`
		Bytes    int64             `json:"bytes"`
		Hooks    string            `json:"hooks"`
		Estimate int64             `json:"estimate_bytes"`
		Report   testreport.Report `json:"report"`
		Started  time.Time         `json:"started"`
		Done     time.Time         `json:"done"`
	} `json:"accounts"`
	Order     string  `json:"order"`
	OrderNote string  `json:"order_note"`
	FirstDone float64 `json:"first_done_seconds"`
	LastDone  float64 `json:"last_done_seconds"`
	ExitCode  int     `json:"exit_code"`
	SSHConns  int     `json:"ssh_connections"`
}

// restore --accounts over a real sshd, three real accounts, one that
// the backup lacks and one that this host lacks (its backup the
// smallest): each account present is restored as --account NAME (its
// owner, its own post-hook with its own RESTORE_* environment and
// report), the missing ones fail alone with their own exit codes, the
// worst of which is the run's; the smallest account starts first, the
// ones that cannot complete last; the first and last done are accounts
// that completed; the summary table and --json have a line and a report
// per account.
func TestE2EAccountsManyInOneRun(t *testing.T) {
	e2e(t)
	t.Parallel()
	srv := testsshd.Start(t)
	type acct struct {
		name     string
		uid, gid uint32
	}
	var accts []acct
	for range 3 {
		n, u, g := throwawayAccount(t)
		accts = append(accts, acct{n, u, g})
	}
	missing, _, _ := throwawayAccount(t) // a user here, no tree on the backup
	// Sizes grow with the position: accts[0] is the smallest.
	root := writeAccountTrees(t, accts[0].name, accts[1].name, accts[2].name)
	nouser := fmt.Sprintf("rsnouser%06d", rand.IntN(1000000)) // no such user here
	if err := os.MkdirAll(filepath.Join(root, nouser), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, nouser, "tiny"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	homes := filepath.Join(t.TempDir(), "home")
	cfg := filepath.Join(dir, "config.toml")
	hook := `env | grep ^RESTORE_ | grep -v ^RESTORE_REPORT= | sort > ` + dir + `/{account}.env; cp "$RESTORE_REPORT" ` + dir + `/{account}.report`
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("post_hook = %q\n", hook)), 0o644); err != nil {
		t.Fatal(err)
	}
	// Given largest first, the missing ones first and in the middle.
	list := strings.Join([]string{nouser, accts[2].name, missing, accts[1].name, accts[0].name}, ",")
	args := append([]string{"restore", "--config", cfg, "--accounts", list, "--parallel", "1"}, sshdArgs(srv)...)
	args = append(args, sshdURL(srv, root+"/{account}"), homes+"/{account}")

	r := runBin(t, append(args, "--json")...)
	var j accountsJSON
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		t.Fatalf("--json: %v\n%s", err, r)
	}
	if len(j.Accounts) != 5 || j.Order != "smallest" {
		t.Fatalf("--json: %d accounts, order %q; want 5, smallest:\n%s", len(j.Accounts), j.Order, r.stdout)
	}
	missingCode := 0
	for _, a := range j.Accounts {
		if a.Account == nouser {
			if a.ExitCode == 0 || a.Error == "" || a.Estimate != 0 {
				t.Errorf("account missing here: exit %d, error %q, estimate %d; want a failure, unsized", a.ExitCode, a.Error, a.Estimate)
			}
			missingCode = max(missingCode, a.ExitCode)
			continue
		}
		if a.Account == missing {
			missingCode = max(missingCode, a.ExitCode)
			if a.ExitCode == 0 || a.Error == "" {
				t.Errorf("missing account: exit %d, error %q; want a failure", a.ExitCode, a.Error)
			}
			if _, err := os.Stat(filepath.Join(dir, missing+".env")); err != nil {
				t.Errorf("the missing account's post-hook did not run: %v", err)
			}
			continue
		}
		if a.ExitCode != 0 || a.Files != 7 && a.Files != 6 && a.Files != 5 || a.Report.Files != a.Files || a.Hooks != "post ok" {
			t.Errorf("%s: exit %d (%s), %d files (report %d), hooks %q; want 0, its files, post ok", a.Account, a.ExitCode, a.Error, a.Files, a.Report.Files, a.Hooks)
		}
	}
	if r.code != missingCode || j.ExitCode != missingCode || missingCode == 0 {
		t.Errorf("exit %d, --json exit_code %d; want the failed account's %d:\n%s", r.code, j.ExitCode, missingCode, r)
	}
	// Smallest first (one at a time): accts[0], [1], [2]; the missing
	// account (no estimate), then the one missing here, last.
	started := map[string]time.Time{}
	for _, a := range j.Accounts {
		started[a.Account] = a.Started
	}
	runOrder := []string{accts[0].name, accts[1].name, accts[2].name, missing, nouser}
	for i, n := range runOrder {
		if i > 0 {
			prev := runOrder[i-1]
			if !started[prev].Before(started[n]) {
				t.Errorf("%s started at %v, not after %s (%v): want the smallest first", n, started[n], prev, started[prev])
			}
		}
	}
	// Every stream of every account, and the listings that sized them,
	// went over one shared SSH connection (--parallel 1's bound).
	if j.SSHConns != 1 {
		t.Errorf("%d SSH connections opened, want 1 (--max-connections defaults to --parallel)", j.SSHConns)
	}
	if j.FirstDone <= 0 || j.LastDone < j.FirstDone {
		t.Errorf("first done %.3fs, last %.3fs", j.FirstDone, j.LastDone)
	}

	for i, a := range accts {
		dst := filepath.Join(homes, a.name)
		assertOwnedBy(t, dst, a.uid, a.gid)
		rsyncItemize(t, []string{"-rlptDHni", "--checksum", "--delete"}, filepath.Join(root, a.name), dst)
		env, err := os.ReadFile(filepath.Join(dir, a.name+".env"))
		if err != nil {
			t.Errorf("%s: its post-hook did not run: %v", a.name, err)
			continue
		}
		for _, want := range []string{"RESTORE_ACCOUNT=" + a.name, "RESTORE_DST=" + dst,
			"RESTORE_SRC=" + sshdURL(srv, root+"/"+a.name), "RESTORE_STATUS=ok", fmt.Sprintf("RESTORE_FILES=%d", 5+i)} {
			if !strings.Contains(string(env), want+"\n") {
				t.Errorf("%s: post-hook environment lacks %s:\n%s", a.name, want, env)
			}
		}
		var rep testreport.Report
		if b, err := os.ReadFile(filepath.Join(dir, a.name+".report")); err != nil || json.Unmarshal(b, &rep) != nil || rep.Files != 5+i {
			t.Errorf("%s: RESTORE_REPORT: %v, %d files; want its own report", a.name, err, rep.Files)
		}
	}

	// The same command again, as a table: every account in place, the
	// missing one still failing alone.
	r = runBin(t, args...)
	t.Logf("rerun:\n%s", r)
	if r.code != missingCode {
		t.Errorf("rerun: exit %d, want %d:\n%s", r.code, missingCode, r)
	}
	for _, a := range append(accts, acct{name: missing}, acct{name: nouser}) {
		if !strings.Contains(r.stdout, "\n"+a.name+" ") && !strings.HasPrefix(r.stdout, a.name+" ") && !strings.Contains(r.stdout, " "+a.name+" ") {
			t.Errorf("the summary table has no line for %s:\n%s", a.name, r.stdout)
		}
	}
	for _, want := range []string{"account", "files", "bytes", "seconds", "exit", "hooks", "5 accounts, 2 failed, order smallest",
		"first done after", "(" + accts[0].name + "), last after", "(" + accts[2].name + ")"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the summary lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, missing+": restoresync: ") {
		t.Errorf("the missing account's error is not on stderr under its name:\n%s", r.stderr)
	}
}

// restore --accounts stopped mid-transfer (SIGSTOP), its agents killed,
// then resumed: while it is stopped and after it ends, every directory of
// every account is the account's, with its source's mode plus rwx for its
// owner; the same command again, without --force, completes every account.
func TestE2EAccountsInterruptedThenRerun(t *testing.T) {
	e2e(t)
	t.Parallel()
	srv := testsshd.Start(t)
	root := t.TempDir()
	type acct struct {
		name     string
		uid, gid uint32
	}
	var accts []acct
	for i := range 2 {
		n, u, g := throwawayAccount(t)
		accts = append(accts, acct{n, u, g})
		mustRun(t, "bench", "gen", "--profile", "hosting", "--scale", "0.04", "--seed", fmt.Sprint(20+i), filepath.Join(root, n))
	}
	homes := filepath.Join(t.TempDir(), "home")
	args := append([]string{"restore", "--config", "none", "--accounts", accts[0].name + "," + accts[1].name,
		"--parallel", "2", "--order", "given", "--jobs", "1", "--compress", "gzip:9", "--block-size", "4MiB"}, sshdArgs(srv)...)
	args = append(args, sshdURL(srv, root+"/{account}"), homes+"/{account}")

	r := startRestore(t, args...)
	r.waitPlaced(filepath.Join(homes, accts[0].name))
	if err := r.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for _, a := range accts {
		if dst := filepath.Join(homes, a.name); dirExists(dst) {
			assertInterimDirs(t, filepath.Join(root, a.name), dst, a.uid, a.gid)
		}
	}
	killed := killAgents(t, srv.PID)
	if err := r.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	res, _ := r.wait(r.start)
	if killed == 0 || res.code == 0 {
		t.Fatalf("%d agents killed, exit %d: the run was not interrupted:\n%s", killed, res.code, res)
	}
	t.Logf("stopped, %d agents killed: %s", killed, strings.TrimSpace(res.stderr))
	for _, a := range accts {
		if dst := filepath.Join(homes, a.name); dirExists(dst) && len(placedFiles(dst)) < statTree(t, filepath.Join(root, a.name)).files {
			assertInterimDirs(t, filepath.Join(root, a.name), dst, a.uid, a.gid)
		}
	}

	mustRun(t, args...)
	for _, a := range accts {
		src, dst := filepath.Join(root, a.name), filepath.Join(homes, a.name)
		assertOwnedBy(t, dst, a.uid, a.gid)
		rsyncItemize(t, []string{"-rltDHni", "--checksum", "--delete"}, src, dst)
		assertDirModes(t, src, dst, 0)
		assertNoTempFiles(t, dst)
	}
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// restore --accounts over a real sshd starts one agent, which sizes every
// account (one request, no file list) and then serves each account's
// stream in turn (a new handshake on the same session) instead of each
// starting its own: 4 accounts, one at a time, one stream each, start 1
// agent in all, not 8; each account is restored as rsync would.
func TestE2EAccountsShareAgents(t *testing.T) {
	e2e(t)
	t.Parallel()
	srv := testsshd.Start(t)
	var names []string
	for range 4 {
		n, _, _ := throwawayAccount(t)
		names = append(names, n)
	}
	root := writeAccountTrees(t, names...)
	agent, started := countingAgent(t, 0)
	homes := filepath.Join(t.TempDir(), "home")
	args := append([]string{"restore", "--config", "none", "--accounts", strings.Join(names, ","), "--parallel", "1", "--jobs", "1", "--json"},
		sshdArgs(srv)...)
	args = append(args, "--remote-path", agent, sshdURL(srv, root+"/{account}"), homes+"/{account}")
	r := runBin(t, args...)
	var j accountsJSON
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil || r.code != 0 {
		t.Fatalf("exit %d, --json: %v\n%s", r.code, err, r)
	}
	if n := started(); n != 1 {
		t.Errorf("%d agents started for 4 accounts, want 1 (sizing them all, then each one's stream):\n%s", n, r)
	}
	for i, a := range j.Accounts {
		if a.Estimate <= 0 || a.Estimate != a.Bytes || a.ExitCode != 0 {
			t.Errorf("%s: estimate %d, %d bytes restored, exit %d; want the exact size, restored", a.Account, a.Estimate, a.Bytes, a.ExitCode)
		}
		rsyncItemize(t, []string{"-rlptDHni", "--checksum", "--delete"}, filepath.Join(root, names[i]), filepath.Join(homes, names[i]))
	}
}

// A stream that an account's restore asked for and that came up only
// after the account was done is not torn down: it is parked for the next
// account, as the streams the account used are. Each new agent here takes
// 3 s to start and each account about 1 s (1 MiB at --bwlimit 1M), so
// every account's second stream (-j 2) is still starting when the account
// is done: were those streams killed, every account would start an agent
// of its own (9 for 8 accounts, the sizing one included) and wait for it
// to start only to kill it; kept, the later accounts take the ones that
// came up late.
func TestE2EAccountsKeepStreamsSetUpLate(t *testing.T) {
	e2e(t)
	t.Parallel()
	srv := testsshd.Start(t)
	const accounts = 8
	var names []string
	root := t.TempDir()
	for range accounts {
		n, _, _ := throwawayAccount(t)
		names = append(names, n)
		data := make([]byte, 1<<20)
		for i := range data {
			data[i] = byte(rand.Uint32())
		}
		p := filepath.Join(root, n, "public_html", "blob")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	agent, started := countingAgent(t, 3)
	homes := filepath.Join(t.TempDir(), "home")
	args := append([]string{"restore", "--config", "none", "--accounts", strings.Join(names, ","),
		"--parallel", "1", "--jobs", "2", "--compress", "none", "--bwlimit", "1M", "--json"}, sshdArgs(srv)...)
	args = append(args, "--remote-path", agent, sshdURL(srv, root+"/{account}"), homes+"/{account}")
	t0 := time.Now()
	r := runBin(t, args...)
	elapsed := time.Since(t0).Round(time.Millisecond)
	var j accountsJSON
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil || r.code != 0 {
		t.Fatalf("exit %d, --json: %v\n%s", r.code, err, r)
	}
	n := started()
	if n > accounts-1 {
		t.Errorf("%d agents started for %d accounts restored one after another in %v; want at most %d (streams that came up after their account was done, kept for the next):\n%s",
			n, accounts, elapsed, accounts-1, r)
	}
	t.Logf("%d agents started for %d accounts in %v", n, accounts, elapsed)
	for _, n := range names {
		rsyncItemize(t, []string{"-rlptDni", "--checksum"}, filepath.Join(root, n), filepath.Join(homes, n))
	}
}

// countingAgent writes an agent for --remote-path that books each start
// and, after the first, waits delaySeconds before it runs (an agent slow
// to start: a loaded backup server); started counts the starts so far.
func countingAgent(t *testing.T, delaySeconds int) (agent string, started func() int) {
	t.Helper()
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	agent = filepath.Join(dir, "agent")
	script := "#!/bin/sh\necho start >> " + starts + "\n"
	if delaySeconds > 0 {
		script += fmt.Sprintf("[ \"$(wc -l < %s)\" -gt 1 ] && sleep %d\n", starts, delaySeconds)
	}
	script += "exec " + binPath + " \"$@\"\n"
	if err := os.WriteFile(agent, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return agent, func() int {
		b, err := os.ReadFile(starts)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "start")
	}
}
