package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// restore --accounts in this process, with local SRCs and accounts this
// host has (daemon, bin): each account's tree restored, a missing one
// failing alone with its exit code, which is the run's; the --json object
// has a report per account; bad command lines are usage errors before
// anything runs.
func TestAccountsLocal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("owners are set only as root")
	}
	root := t.TempDir()
	for _, n := range []string{"daemon", "bin"} {
		if err := exec.Command("cp", "-a", smallTree(t), filepath.Join(root, n)).Run(); err != nil {
			t.Fatal(err)
		}
	}
	dst := t.TempDir()
	r := runIn(t, "restore", "--config", "none", "--json", "--accounts", "daemon,bin,nobody",
		filepath.Join(root, "{account}"), filepath.Join(dst, "{account}"))
	var j struct {
		Accounts []struct {
			Account  string          `json:"account"`
			ExitCode int             `json:"exit_code"`
			Files    int             `json:"files"`
			Error    string          `json:"error"`
			Report   json.RawMessage `json:"report"`
		} `json:"accounts"`
		ExitCode int `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		t.Fatalf("--json: %v\n%s", err, r)
	}
	if len(j.Accounts) != 3 {
		t.Fatalf("%d accounts in --json, want 3:\n%s", len(j.Accounts), r)
	}
	for _, a := range j.Accounts {
		switch a.Account {
		case "nobody":
			if a.ExitCode != exitFileIO || !strings.Contains(a.Error, "nobody") {
				t.Errorf("nobody (no tree): exit %d, error %q; want %d naming it", a.ExitCode, a.Error, exitFileIO)
			}
		default:
			if a.ExitCode != 0 || a.Files != 5 || len(a.Report) == 0 {
				t.Errorf("%s: exit %d, %d files, report %s; want 0, 5, its report", a.Account, a.ExitCode, a.Files, a.Report)
			}
			if _, err := os.Stat(filepath.Join(dst, a.Account, "public_html", "index.php")); err != nil {
				t.Errorf("%s: %v", a.Account, err)
			}
		}
	}
	if r.code != exitFileIO || j.ExitCode != exitFileIO {
		t.Errorf("exit %d, --json exit_code %d; want the missing account's %d", r.code, j.ExitCode, exitFileIO)
	}

	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--accounts", "bin", "src/{account}", "dst"}, "DST \"dst\" must name {account}"},
		{[]string{"--accounts", "bin", "src", "dst/{account}"}, "SRC \"src\" must name {account}"},
		{[]string{"--accounts", "../etc", "src/{account}", "dst/{account}"}, "account name \"../etc\""},
		{[]string{"--accounts", "bin", "--account", "bin", "src/{account}", "dst/{account}"}, "cannot be combined"},
		{[]string{"--accounts", "bin", "--exclude-from", "-", "src/{account}", "dst/{account}"}, "standard input"},
		{[]string{"--accounts", "bin", "--order", "biggest", "src/{account}", "dst/{account}"}, "given, smallest, largest"},
		{[]string{"--all-accounts", "dst/{account}"}, "no [account.NAME] section"},
	} {
		r := runIn(t, append([]string{"restore", "--config", "none"}, c.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("want exit 1 with %q:\n%s", c.msg, r)
		}
	}
}
