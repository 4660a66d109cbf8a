package main

// Tests of the selection flags' edges: --files-from comments,
// "!" and empty patterns, the exit codes of missing -from files and of
// SRCs that are all missing. In-process through run(), local → local.

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeTestFile writes text to a new file in a temporary directory.
func writeTestFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// listTree lists the paths under dir (directories with a trailing "/").
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// --files-from skips comment lines ("#", ";") and blank lines, as
// rsync -r --files-from does, and exits 0.
func TestFilesFromComments(t *testing.T) {
	t.Parallel()
	src := smallTree(t)
	list := writeTestFile(t, "list", "# lost after the upgrade\n; from the ticket\n\npublic_html/index.php\r\nmail\n")
	dst := filepath.Join(t.TempDir(), "dst")
	mustRunIn(t, "--config", "none", "restore", "-q", "--files-from", list, src, dst)
	want := []string{"./", "mail/", "mail/cur/", "mail/cur/1700000000.M1.box", "public_html/", "public_html/index.php"}
	if got := listTree(t, dst); !slices.Equal(got, want) {
		t.Errorf("restored %q, want %q", got, want)
	}
}

// --exclude='!' clears the rules before it (also from an --exclude-from
// file), an empty --exclude is ignored, as in rsync.
func TestExcludeClearAndEmpty(t *testing.T) {
	t.Parallel()
	src := smallTree(t)
	dst := filepath.Join(t.TempDir(), "dst")
	mustRunIn(t, "--config", "none", "restore", "-q", "--exclude=*.php", "--exclude=!", "--exclude=", "--exclude=*.png", src, dst)
	got := listTree(t, dst)
	if !slices.Contains(got, "public_html/index.php") || slices.Contains(got, "public_html/img/logo.png") {
		t.Errorf("--exclude='*.php' --exclude='!' --exclude='' --exclude='*.png' restored %q", got)
	}
	pats := writeTestFile(t, "pats", "# the list so far goes\n!\nmail/\n")
	dst2 := filepath.Join(t.TempDir(), "dst")
	mustRunIn(t, "--config", "none", "restore", "-q", "--exclude=*.php", "--exclude-from", pats, src, dst2)
	got = listTree(t, dst2)
	if !slices.Contains(got, "public_html/index.php") || slices.Contains(got, "mail/") {
		t.Errorf("--exclude='*.php' --exclude-from (with a \"!\" line) restored %q", got)
	}
}

// A missing --exclude-from file exits 11 and a missing --files-from file
// exits 1, as with rsync 3.2.7; neither creates DST.
func TestMissingFromFiles(t *testing.T) {
	t.Parallel()
	src := smallTree(t)
	for _, c := range []struct {
		flag string
		code int
	}{{"--exclude-from", exitFileIO}, {"--include-from", exitFileIO}, {"--files-from", exitUsage}} {
		dst := filepath.Join(t.TempDir(), "dst")
		r := runIn(t, "--config", "none", "restore", c.flag+"=/nonexistent/list", src, dst)
		if r.code != c.code || !strings.Contains(r.stderr, c.flag+": open /nonexistent/list: no such file or directory") {
			t.Errorf("%s: want exit %d naming the file:\n%s", c.flag, c.code, r)
		}
		if _, err := os.Lstat(dst); !os.IsNotExist(err) {
			t.Errorf("%s: DST was created", c.flag)
		}
	}
}

// Out-of-range flags are usage errors naming the flag and the value.
func TestFlagRanges(t *testing.T) {
	t.Parallel()
	src := smallTree(t)
	for _, c := range []struct{ flag, want string }{
		{"--jobs=0", "--jobs 0: must be auto or 1 to 256"},
		{"--block-size=1K", "--block-size 1KiB: must be at least 64KiB"},
		{"--write-buffer=1K", "--write-buffer 1KiB: must be at least 4KiB"},
		{"--contimeout=0", "--contimeout 0: must be at least 1 second"},
	} {
		dst := filepath.Join(t.TempDir(), "dst")
		r := runIn(t, "--config", "none", "restore", c.flag, src, dst)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: want exit 1 and %q:\n%s", c.flag, c.want, r)
		}
		if _, err := os.Lstat(dst); !os.IsNotExist(err) {
			t.Errorf("%s: DST was created", c.flag)
		}
	}
}

// With several SRCs, both hooks get the first in RESTORE_SRC, every one in
// RESTORE_SRCS (one a line, in command-line order) and their number in
// RESTORE_SRC_COUNT.
func TestHooksSeveralSrcs(t *testing.T) {
	t.Parallel()
	src := smallTree(t)
	dir := t.TempDir()
	dst := filepath.Join(dir, "dst")
	srcs := []string{src + "/public_html", src + "/mail", src + "/empty"}
	hook := func(phase string) string {
		return `printf '%s|%s|%s' "$RESTORE_SRC" "$RESTORE_SRCS" "$RESTORE_SRC_COUNT" > ` + dir + "/" + phase
	}
	args := append([]string{"--config", "none", "restore", "-q", "--pre-hook", hook("pre"), "--post-hook", hook("post")}, srcs...)
	mustRunIn(t, append(args, dst)...)
	want := srcs[0] + "|" + strings.Join(srcs, "\n") + "|3"
	for _, phase := range []string{"pre", "post"} {
		b, err := os.ReadFile(filepath.Join(dir, phase))
		if err != nil || string(b) != want {
			t.Errorf("%s-hook saw %q (%v), want %q", phase, b, err, want)
		}
	}
}

// 'completion' with a shell it has no script for is a usage error naming
// the shells; the enum flags complete their values.
func TestCompletionShellsAndValues(t *testing.T) {
	t.Parallel()
	r := runIn(t, "completion", "tcsh")
	if r.code != exitUsage || !strings.Contains(r.stderr, `no script for shell "tcsh" (shells: bash, fish, powershell, zsh)`) || r.stdout != "" {
		t.Errorf("completion tcsh: want exit 1 naming the shells:\n%s", r)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"restore", "--method", ""}, []string{"auto", "raw", "rsync", "sftp", "tar"}},
		{[]string{"restore", "--compress", ""}, []string{"auto", "gzip", "lz4", "none", "zstd"}},
		{[]string{"restore", "--progress", ""}, []string{"auto", "bar", "none", "plain"}},
		{[]string{"config", "show", "--log-format", ""}, []string{"json", "text"}},
	} {
		r := mustRunIn(t, append([]string{"__complete"}, c.args...)...)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		got := slices.Sorted(slices.Values(lines[:len(lines)-1]))
		if !slices.Equal(got, c.want) || lines[len(lines)-1] != ":4" { // 4: no file completion
			t.Errorf("completion of %q: %q, want %q and :4", c.args, lines, c.want)
		}
	}
}
