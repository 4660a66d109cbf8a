package restore_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// selectionTree is a hosting account with what filter rules trip on:
// dotfiles, names with spaces and brackets, a file and directories with
// the same name, a symlink, nested directories with repeated names. The
// account (mode 0711) and public_html (0750) have modes and mtimes
// (selectionRootTime) that a new directory does not.
func selectionTree(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "alice")
	for _, p := range []string{
		"public_html/index.php", "public_html/wp-config.php", "public_html/.htaccess",
		"public_html/wp-content/uploads/2024/photo one.jpg", "public_html/wp-content/uploads/2024/thumb.png",
		"public_html/wp-content/cache/page.html", "public_html/wp-content/plugins/akismet/akismet.php",
		"public_html/wp-content/plugins/akismet/readme.txt",
		"mail/cur/1700000000.M1.host:2,S", "mail/new/1700000001.M2.host", "mail/.Sent/cur/msg1",
		"logs/access.log", "logs/error.log.1", "public_html/logs/debug.log", "logs/old/access.log.2.gz", "logs/cache",
		"tmp/sess_abc", ".bash_history", "My Documents/report 2023.pdf", "My Documents/notes.txt",
		"cache/blob", "a[b].txt", "x1.log", "x2.log", "xa.log", "9lives.txt",
	} {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("data of "+p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(root, "empty"), 0o755)
	if err := os.Symlink("wp-content/uploads/2024", filepath.Join(root, "public_html/latest")); err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]os.FileMode{".": 0o711, "public_html": 0o750} {
		os.Chmod(filepath.Join(root, p), mode)
		os.Chtimes(filepath.Join(root, p), selectionRootTime, selectionRootTime)
	}
	return root
}

// selectionRootTime is the mtime of selectionTree's root and public_html.
var selectionRootTime = time.Date(2023, 1, 2, 3, 4, 5, 0, time.UTC)

// rootMeta describes DST's own mode, and whether its mtime is that of a
// selectionTree directory: rsync gives DST the metadata of the source
// directory the selection names or implies as ".", or none.
func rootMeta(t *testing.T, dst string) string {
	t.Helper()
	fi, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%v, source mtime %v", fi.Mode().Perm(), fi.ModTime().Equal(selectionRootTime))
}

// treeSet lists the paths under dir, directories with a trailing "/",
// symlinks not followed.
func treeSet(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// rsyncArgs turns rules into rsync's --include/--exclude arguments.
func rsyncRuleArgs(rules []treewalk.Rule) []string {
	var a []string
	for _, r := range rules {
		if r.Include {
			a = append(a, "--include="+r.Pattern)
		} else {
			a = append(a, "--exclude="+r.Pattern)
		}
	}
	return a
}

func ex(p string) treewalk.Rule { return treewalk.Rule{Pattern: p} }
func in(p string) treewalk.Rule { return treewalk.Rule{Include: true, Pattern: p} }

// The same include/exclude rules (and -R, --files-from, several SRCs) must
// select exactly the files the real rsync selects from the same tree. The
// restore is a pull through the agent's code (the sender applies the
// rules), and rsync really copies into a directory of its own.
func TestSelectionMatchesRsync(t *testing.T) {
	testenv.RequireTool(t, "rsync")
	tree := selectionTree(t)
	cases := []struct {
		name      string
		rules     []treewalk.Rule
		srcs      []string // below tree; none: the tree itself, as DST
		relative  bool
		filesFrom []string
	}{
		{name: "star-suffix", rules: []treewalk.Rule{ex("*.log")}},
		{name: "anchored", rules: []treewalk.Rule{ex("/logs")}},
		{name: "anchored-deep", rules: []treewalk.Rule{ex("/public_html/wp-content/*/")}},
		{name: "dir-only", rules: []treewalk.Rule{ex("cache/")}},
		{name: "dir-only-symlink", rules: []treewalk.Rule{ex("latest/"), ex("2024/")}},
		{name: "include-then-exclude-all", rules: []treewalk.Rule{in("*/"), in("*.php"), ex("*")}},
		{name: "triple-star", rules: []treewalk.Rule{in("/public_html/***"), ex("*")}},
		{name: "double-star-inner", rules: []treewalk.Rule{ex("wp-content/**/2024")}},
		{name: "double-star-prefix", rules: []treewalk.Rule{ex("**/cur")}},
		{name: "double-star-suffix", rules: []treewalk.Rule{ex("mail/**")}},
		{name: "double-star-ext", rules: []treewalk.Rule{ex("**.gz")}},
		{name: "inner-slash", rules: []treewalk.Rule{ex("uploads/2024")}},
		{name: "char-class", rules: []treewalk.Rule{ex("x[0-9].log")}},
		{name: "negated-class", rules: []treewalk.Rule{ex("x[!0-9].log")}},
		{name: "posix-class", rules: []treewalk.Rule{ex("[[:digit:]]*")}},
		{name: "question", rules: []treewalk.Rule{ex("x?.log")}},
		{name: "dotfiles", rules: []treewalk.Rule{ex(".*")}},
		{name: "spaces", rules: []treewalk.Rule{ex("* *")}},
		{name: "escaped-bracket", rules: []treewalk.Rule{ex(`a\[b\].txt`)}},
		{name: "first-match-wins", rules: []treewalk.Rule{in("*.php"), ex("/public_html/*"), ex("/public_html/wp-content")}},
		{name: "literal-with-slash", rules: []treewalk.Rule{ex("akismet/readme.txt")}},
		{name: "clear-list", rules: []treewalk.Rule{ex("*.php"), in("*.log"), ex("!"), ex("*.txt"), in("!"), ex("logs/")}},
		{name: "empty-pattern", rules: []treewalk.Rule{ex(""), in(""), ex("*.log")}},
		{name: "unknown-class", rules: []treewalk.Rule{ex("[![:foo:]]*"), ex("[[:nope:]]*"), ex("*.png")}},
		{name: "several-srcs", srcs: []string{"public_html", "logs", "My Documents/notes.txt"}, rules: []treewalk.Rule{ex("/logs/old"), ex("*.png")}},
		{name: "several-srcs-excluded-src", srcs: []string{"public_html", "logs"}, rules: []treewalk.Rule{ex("logs")}},
		{name: "relative", srcs: []string{"./public_html/wp-content", "./mail/cur"}, relative: true, rules: []treewalk.Rule{ex("*.txt")}},
		{name: "relative-implied-not-filtered", srcs: []string{"./public_html/wp-content/uploads"}, relative: true, rules: []treewalk.Rule{ex("public_html")}},
		{name: "files-from", filesFrom: []string{"public_html/wp-content", "mail/new", ".bash_history", "My Documents/notes.txt", "logs/old/"}, rules: []treewalk.Rule{ex("*.png")}},
		{name: "files-from-comments", filesFrom: []string{"# lost files", "; and more", "", "public_html/index.php", "./.bash_history", "mail/new"}},
		// A line starting with "./" implies the SRC directory itself as
		// ".": DST gets its mode and mtime; without it, DST is new.
		{name: "files-from-dot-slash", filesFrom: []string{"./.bash_history"}},
		{name: "files-from-dot-slash-deep", filesFrom: []string{"./public_html/index.php", "mail/new"}},
		{name: "files-from-dot-slash-covered", filesFrom: []string{"public_html", "./public_html/index.php"}},
		{name: "files-from-no-dot", filesFrom: []string{"public_html/index.php", "mail/new"}},
		{name: "files-from-dot-dot-slash", filesFrom: []string{"././.bash_history"}},
		// "/./" in a line keeps what follows, as -R does; "/././" also
		// implies the directory before it as ".".
		{name: "files-from-marker", filesFrom: []string{"public_html/./index.php", "public_html/wp-content/./plugins"}},
		{name: "files-from-marker-dot", filesFrom: []string{"public_html/././index.php"}},
		{name: "relative-dot-slash", srcs: []string{"./mail/cur", "././public_html/wp-content/cache"}, relative: true},
		// Lines from different directories that land on the same paths
		// merge, as with -R.
		{name: "files-from-merge", filesFrom: []string{"mail/./cur", "public_html/wp-content/./uploads", "mail/.Sent/./cur", "public_html/./wp-content"}, rules: []treewalk.Rule{ex("akismet")}},
	}
	pipe := transfer.PipeDialer{Config: transfer.ServerConfig{NewSink: restore.NewSink, Version: "test"}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			rdst, odst := filepath.Join(tmp, "rsync"), filepath.Join(tmp, "ours")
			args := append([]string{"-a"}, rsyncRuleArgs(c.rules)...)
			// The rules are command-line patterns: "!" and "" fold as in
			// rsync (treewalk.AddRule), as the restore command folds them.
			var filters []treewalk.Rule
			for _, r := range c.rules {
				filters = treewalk.AddRule(filters, r.Pattern, r.Include)
			}
			o := restore.Options{Dst: odst, Dialer: pipe, Filters: filters, Relative: c.relative, Compression: transfer.DefaultCompression}
			switch {
			case c.filesFrom != nil:
				list := filepath.Join(tmp, "list")
				os.WriteFile(list, []byte(strings.Join(c.filesFrom, "\n")+"\n"), 0o644)
				args = append(args, "-r", "--files-from="+list, tree+"/")
				o.Src, o.FilesFrom = "backup:"+tree, c.filesFrom
			case c.srcs != nil:
				if c.relative {
					args = append(args, "-R")
				}
				for i, s := range c.srcs {
					p := tree + "/" + s
					if c.relative {
						p = tree + "/" + s // "tree/./x": -R keeps x
					}
					args = append(args, p)
					if i == 0 {
						o.Src = "backup:" + p
					} else {
						o.MoreSrc = append(o.MoreSrc, "backup:"+p)
					}
				}
			default:
				args = append(args, tree+"/")
				o.Src = "backup:" + tree
			}
			args = append(args, rdst+"/")
			if out, err := exec.Command("rsync", args...).CombinedOutput(); err != nil {
				t.Fatalf("rsync %q: %v\n%s", args, err, out)
			}
			rep, err := restore.Run(context.Background(), o)
			if err != nil || len(rep.Errors) > 0 {
				t.Fatalf("restore: %v %+v", err, rep.Errors)
			}
			want, got := treeSet(t, rdst), treeSet(t, odst)
			if !slices.Equal(want, got) {
				t.Errorf("rsync %q selected\n  %q\nrestoresync selected\n  %q", args, want, got)
			}
			if want, got := rootMeta(t, rdst), rootMeta(t, odst); want != got {
				t.Errorf("rsync %q made DST %s, restoresync %s", args, want, got)
			}
			if len(want) == 0 {
				t.Errorf("the rules selected nothing: a weak case")
			}
		})
	}
}
