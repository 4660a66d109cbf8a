package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// 'config show' says which hooks a restore with its flags runs and where
// each comes from; a top-level hook, which runs for every restore (a
// one-file restore with no --account too, as the restore below shows), is
// followed by the note that [account.NAME] limits a hook to an account.
func TestConfigShowSaysHooks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "post-ran")
	cfg := writeConfig(t, "post_hook = \"touch "+marker+"\"\n\n[account.nobody]\npre_hook = \"true\"\n")
	show := func(args ...string) string {
		return mustRunIn(t, append([]string{"--config", cfg, "config", "show"}, args...)...).stdout
	}
	note := "# a top-level hook runs for every restore, with or without --account;\n# put it in [account.NAME] to run it only for that account's restores\n"
	want := "# hooks this restore runs:\n#   post: touch " + marker + "  (top level, " + cfg + ":1)\n" + note
	if out := show(); !strings.HasSuffix(out, want) {
		t.Errorf("config show:\n%s\nwant it to end with:\n%s", out, want)
	}
	want = "# hooks this restore runs:\n#   pre: true  ([account.nobody], " + cfg + ":4)\n#   post: touch " + marker + "  (top level, " + cfg + ":1)\n" + note
	if out := show("--account", "nobody"); !strings.HasSuffix(out, want) {
		t.Errorf("config show --account nobody:\n%s\nwant it to end with:\n%s", out, want)
	}
	want = "# hooks this restore runs:\n#   post: /bin/true  (command line)\n"
	if out := show("--post-hook", "/bin/true"); !strings.HasSuffix(out, want) {
		t.Errorf("config show --post-hook /bin/true:\n%s\nwant it to end with:\n%s", out, want)
	}
	if out := show("-n"); !strings.HasSuffix(out, "# hooks this restore runs: none (a dry run runs no hooks)\n") {
		t.Errorf("config show -n:\n%s", out)
	}
	if out := mustRunIn(t, "--config", "none", "config", "show").stdout; !strings.HasSuffix(out, "# hooks this restore runs: none\n") {
		t.Errorf("config show without a file:\n%s", out)
	}

	// What config show says is what a restore does: one file, no account.
	src := smallTree(t)
	mustRunIn(t, "--config", cfg, "restore", "-q", src+"/public_html/wp-config.php", src+"/empty", filepath.Join(dir, "dst"))
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the top-level post_hook did not run for a restore without --account: %v", err)
	}
}
