package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/internal/testsshd"
)

// writeAccountTrees writes, under a new temporary directory, one small
// account tree per name (root/NAME): a public_html with an index.php
// naming the account, a cache/ and a log, and sizes growing with the
// name's place in names (the i-th has i+1 blobs of 64 KiB), so that
// smallest-first differs from the given order when names are not sorted
// by it. It returns root.
func writeAccountTrees(t *testing.T, names ...string) string {
	t.Helper()
	root := t.TempDir()
	for i, name := range names {
		files := map[string]string{
			"public_html/index.php":  "<?php echo '" + name + "';\n",
			"public_html/error.log":  "log of " + name + "\n",
			"public_html/cache/page": "cached\n",
			"mail/cur/1.box":         "Subject: " + name + "\n\nhi\n",
		}
		for j := 0; j <= i; j++ {
			files[fmt.Sprintf("public_html/uploads/blob%d", j)] = strings.Repeat(name[:1], 64<<10)
		}
		for rel, data := range files {
			p := filepath.Join(root, name, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

// An [account.NAME] section describes the account's restore: the global
// src template with {account}, the section's exclude and include rules,
// ssh_config, hooks, jobs and compress apply to 'restore --account NAME
// DST', and config show says where each comes from.
func TestE2EAccountConfigSection(t *testing.T) {
	e2e(t)
	t.Parallel()
	srv := testsshd.Start(t)
	name, uid, gid := throwawayAccount(t)
	root := writeAccountTrees(t, name)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.toml")
	text := fmt.Sprintf(`src = "testhost:%s/{account}"
remote_path = %q
ssh_config = %q

[account.%s]
include = ["cache/"]
exclude = ["*.log", "cache/*"]
jobs = 2
compress = "lz4"
post_hook = "env | grep ^RESTORE_ | sort > %s/post.env"
`, root, binPath, srv.Config(t), name, dir)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), name)
	r := mustRun(t, "restore", "--config", cfg, "--json", "--account", name, dst)
	rep := parseReport(t, r)
	if rep.Jobs != 2 || rep.Compression != "lz4" {
		t.Errorf("report: jobs %d, compression %q; want the section's 2, lz4", rep.Jobs, rep.Compression)
	}
	for rel, want := range map[string]bool{
		"public_html/index.php": true, "public_html/uploads/blob0": true, "mail/cur/1.box": true,
		"public_html/cache": true, "public_html/error.log": false, "public_html/cache/page": false,
	} {
		if _, err := os.Lstat(filepath.Join(dst, rel)); (err == nil) != want {
			t.Errorf("%s restored: %v, want %v", rel, err == nil, want)
		}
	}
	assertOwnedBy(t, dst, uid, gid)
	env, err := os.ReadFile(filepath.Join(dir, "post.env"))
	if err != nil {
		t.Fatalf("the section's post_hook did not run: %v", err)
	}
	for _, want := range []string{"RESTORE_ACCOUNT=" + name, "RESTORE_SRC=testhost:" + root + "/" + name, "RESTORE_DST=" + dst, "RESTORE_STATUS=ok"} {
		if !strings.Contains(string(env), want+"\n") {
			t.Errorf("post_hook environment lacks %s:\n%s", want, env)
		}
	}
	// config show names the section's lines.
	r = mustRun(t, "--config", cfg, "config", "show", "--account", name)
	for _, want := range []string{"src", "testhost:" + root + "/" + name, "exclude", "*.log,cache/*", cfg + ":9", "ssh_config", cfg + ":3"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("config show lacks %q:\n%s", want, r.stdout)
		}
	}
	// Without --account, a src naming {account} is a usage error.
	r = runBin(t, "restore", "--config", cfg, filepath.Join(t.TempDir(), "x"))
	if r.code != exitUsage || !strings.Contains(r.stderr, "{account}") {
		t.Errorf("src with {account} and no --account: want exit 1 naming {account}:\n%s", r)
	}
}
