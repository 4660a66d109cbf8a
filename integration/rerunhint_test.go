package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/internal/testsshd"
)

// A failure that a rerun of the same command cannot fix never gets the
// rerun hint: what to do instead is said in one line, on stderr after the
// error and in --json's hint, against a real sshd configured as such a
// server is (the agent-less methods as well as the agent's).
func TestE2ENoRerunHintWhenRerunCannotFix(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := smallTree(t)
	const (
		sftp     = "the server allows SFTP only (it answers every command with \"This service allows sftp connections only.\"): use --method sftp"
		notFound = "a rerun will not help: install the missing program on the remote host (or the restoresync agent), or choose another --method"
		refused  = "a rerun will not help: the remote command exited before it sent anything (a forced command, a restricted shell, or options the remote refused): check what this account may run there"
	)
	// badOptions is a remote program that runs rsync with an option rsync
	// does not know: rsync says so on stderr and exits 1.
	badOptions := filepath.Join(t.TempDir(), "bad-options")
	if err := os.WriteFile(badOptions, []byte("#!/bin/sh\nexec rsync --no-such-option \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	methods := [][]string{
		{"--method", "auto"}, {"--method", "raw"},
		{"--method", "tar", "--remote-path", "none"}, {"--method", "rsync", "--remote-path", "none"},
	}
	cases := []struct {
		name, sshdConfig string
		methods          [][]string
		hint             string
		code             int
		stderr           string // what stderr must also say
	}{
		{"sftp-only", "ForceCommand internal-sftp", methods, sftp, 12, ""},
		{"no-tar-rsync-find", "SetEnv PATH=/nonexistent", methods[2:], notFound, 12, "status 127"},
		{"forced-command", "ForceCommand echo 'this key may only run backups' >&2; exit 1", methods, refused, 12, "this key may only run backups"},
		// The remote program refuses its options: a usage error found there.
		{"remote-usage-error", "", [][]string{{"--method", "raw", "--remote-path", badOptions}}, refused, 12, "no-such-option"},
	}
	for _, c := range cases {
		srv := testsshd.StartConfig(t, c.sshdConfig)
		for _, m := range c.methods {
			for _, rsh := range []bool{false, true} {
				name := c.name + "/" + strings.ReplaceAll(strings.Join(m, "_"), badOptions, "bad-options")
				if rsh {
					name += "/-e_ssh"
				}
				t.Run(name, func(t *testing.T) {
					args := append([]string{"restore", "--json"}, sshdArgs(srv)...)
					loc := sshdURL(srv, src)
					if rsh {
						args = []string{"restore", "--json", "--remote-path", binPath, "-e", "ssh -F " + srv.Config(t)}
						loc = "testhost:" + src
					}
					args = append(args, m...)
					r := runBin(t, append(args, loc, filepath.Join(t.TempDir(), "dst"))...)
					checkNoRerunHint(t, r, c.code, c.hint, c.stderr)
				})
			}
		}
	}
}

// Host key and authentication failures say what failed and no rerun hint,
// through the built-in client and through -e ssh.
func TestE2ENoRerunHintHostKeyAuth(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := smallTree(t)
	srv := testsshd.Start(t)
	other := testsshd.Start(t) // its keys are not srv's
	for _, c := range []struct {
		name string
		swap func(args []string) []string
	}{
		{"host-key", func(args []string) []string {
			args[slices.Index(args, "--known-hosts")+1] = other.KnownHostsFile
			return args
		}},
		{"auth", func(args []string) []string {
			args[slices.Index(args, "-i")+1] = other.IdentityFile
			return args
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := c.swap(append([]string{"restore", "--json"}, sshdArgs(srv)...))
			r := runBin(t, append(args, sshdURL(srv, src), filepath.Join(t.TempDir(), "dst"))...)
			checkNoRerunHint(t, r, 255, "", "")
		})
		t.Run(c.name+"/-e_ssh", func(t *testing.T) {
			cfg := srv.Config(t)
			b, err := os.ReadFile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			swapped := strings.NewReplacer(srv.KnownHostsFile, other.KnownHostsFile)
			if c.name == "auth" {
				swapped = strings.NewReplacer(srv.IdentityFile, other.IdentityFile)
			}
			if err := os.WriteFile(cfg, []byte(swapped.Replace(string(b))), 0o600); err != nil {
				t.Fatal(err)
			}
			r := runBin(t, "restore", "--json", "--remote-path", binPath, "-e", "ssh -F "+cfg, "testhost:"+src, filepath.Join(t.TempDir(), "dst"))
			checkNoRerunHint(t, r, 255, "", "")
		})
	}
}

// checkNoRerunHint checks r's exit code, that neither stderr nor --json's
// report has the rerun hint, that --json's hint is hint, and that stderr
// has hint on the line after the error, and also says also.
func checkNoRerunHint(t *testing.T, r result, code int, hint, also string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d", r.code, code)
	}
	rep := parseReport(t, r)
	if strings.Contains(r.stderr, "rerun the same command") || strings.Contains(rep.Hint, "rerun the same command") {
		t.Errorf("the rerun hint, for a failure a rerun cannot fix:\n%s", r)
	}
	if rep.Hint != hint || rep.ExitCode != code {
		t.Errorf("--json: hint %q, exit_code %d; want %q, %d\n%s", rep.Hint, rep.ExitCode, hint, code, r)
	}
	if hint != "" && !strings.Contains(r.stderr, "\n("+hint+")\n") {
		t.Errorf("stderr lacks the hint line (%s):\n%s", hint, r)
	}
	if !strings.Contains(r.stderr, also) {
		t.Errorf("stderr does not say %q:\n%s", also, r)
	}
}
