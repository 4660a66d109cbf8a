package restore_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// writeFiles creates files (path → content) under root, parents 0755.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, data := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// snapshot describes every entry under dir, dir itself included: type,
// mode, owner, size, mtime to the nanosecond, content, symlink target.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		desc := fmt.Sprintf("%v %d:%d size=%d mtime=%d", fi.Mode(), st.Uid, st.Gid, fi.Size(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			desc += " data=" + string(b)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// --delete removes, below the restored SRCs only, what the source lacks;
// what the filters exclude is protected (a directory holding a protected
// file stays), what lies outside the SRCs survives, and a planted symlink
// is removed as a link: what it points to is untouched.
func TestDeleteScope(t *testing.T) {
	src := filepath.Join(t.TempDir(), "alice")
	writeFiles(t, src, map[string]string{
		"public_html/index.php":         "<?php",
		"public_html/wp-content/a.txt":  "a",
		"public_html/debug.log":         "source log",
		"mail/cur/m1":                   "mail",
		"logs/access.log":               "log",
		"public_html/wp-content/b.html": "b",
	})
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			tmp := t.TempDir()
			dst := filepath.Join(tmp, "home")
			target := filepath.Join(tmp, "elsewhere")
			writeFiles(t, target, map[string]string{"precious": "keep me"})
			writeFiles(t, dst, map[string]string{
				"public_html/extra.php":                "stale", // in scope: deleted
				"public_html/wp-content/old/x.txt":     "stale", // dir in scope: deleted
				"public_html/keep.log":                 "kept",  // excluded: protected
				"public_html/cache/page.html":          "kept",  // excluded dir: protected
				"public_html/gone/a.log":               "kept",  // protected inside an extra dir
				"public_html/gone/b.txt":               "stale",
				"mail/new/stale":                       "stale",
				"outside.txt":                          "kept", // not below a SRC
				"logs/other.log":                       "kept", // logs is not restored
				"public_html/wp-content/uploads/a.jpg": "stale",
			})
			if err := os.Symlink(target, filepath.Join(dst, "public_html/evil")); err != nil {
				t.Fatal(err)
			}
			o := options(mode, src+"/public_html", dst)
			o.MoreSrc = []string{strings.Replace(o.Src, "/public_html", "/mail", 1)}
			o.Delete = true
			o.Filters = []treewalk.Rule{{Pattern: "*.log"}, {Pattern: "cache/"}}
			rep := run(t, o)
			for _, gone := range []string{"public_html/extra.php", "public_html/wp-content/old", "public_html/gone/b.txt",
				"mail/new", "public_html/evil", "public_html/wp-content/uploads"} {
				if _, err := os.Lstat(filepath.Join(dst, gone)); !os.IsNotExist(err) {
					t.Errorf("%s: still there (%v)", gone, err)
				}
			}
			for _, kept := range []string{"public_html/keep.log", "public_html/cache/page.html", "public_html/gone/a.log",
				"outside.txt", "logs/other.log", "public_html/index.php", "mail/cur/m1", "public_html/wp-content/b.html"} {
				if _, err := os.Lstat(filepath.Join(dst, kept)); err != nil {
					t.Errorf("%s: %v", kept, err)
				}
			}
			if _, err := os.Lstat(filepath.Join(dst, "public_html/debug.log")); !os.IsNotExist(err) {
				t.Errorf("public_html/debug.log: excluded on the source, yet restored (%v)", err)
			}
			if b, err := os.ReadFile(filepath.Join(target, "precious")); err != nil || string(b) != "keep me" {
				t.Errorf("the planted symlink's target: %q, %v", b, err)
			}
			// extra.php, old/x.txt, old/, gone/b.txt, new/stale, new/, evil, uploads/a.jpg, uploads/
			if rep.Deleted != 9 {
				t.Errorf("report: %d deleted, want 9", rep.Deleted)
			}
		})
	}
}

// Without --delete nothing is removed, and a file list with errors (a SRC
// that does not exist) deletes nothing either, as rsync does; the missing
// SRC is a per-file error (exit 23).
func TestDeleteSkippedOnListErrors(t *testing.T) {
	src := filepath.Join(t.TempDir(), "alice")
	writeFiles(t, src, map[string]string{"public_html/index.php": "<?php"})
	dst := t.TempDir()
	writeFiles(t, dst, map[string]string{"public_html/stale.php": "stale"})
	o := options("pull", src+"/public_html", dst)
	o.MoreSrc = []string{"backup:" + src + "/nope"}
	o.Delete = true
	var warned []string
	o.Warnf = func(f string, a ...any) { warned = append(warned, fmt.Sprintf(f, a...)) }
	rep, err := restore.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Errors) != 1 || rep.Errors[0].Path != "nope" {
		t.Errorf("errors: %+v, want one for nope", rep.Errors)
	}
	if _, err := os.Stat(filepath.Join(dst, "public_html/stale.php")); err != nil {
		t.Errorf("deleted despite the list's errors: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dst, "public_html/index.php")); err != nil {
		t.Errorf("the SRC that exists was not restored: %v", err)
	}
	if len(warned) == 0 || !strings.Contains(warned[0], "nothing deleted") {
		t.Errorf("warnings: %q", warned)
	}
}

// A dry run writes nothing (every entry of DST, DST's own mtime included,
// is as before), says what a real run then does, line for line, and a dry
// run after the real run finds nothing left to do. Into a DST that does
// not exist, it does not create it.
func TestDryRunWritesNothing(t *testing.T) {
	src := filepath.Join(t.TempDir(), "alice")
	writeFiles(t, src, map[string]string{
		"public_html/index.php":     "<?php new",
		"public_html/wp-config.php": "secret",
		"public_html/new/page.html": "new page",
		"mail/cur/m1":               "mail",
	})
	os.Symlink("index.php", filepath.Join(src, "public_html/home.php"))
	old := time.Date(2024, 3, 1, 12, 0, 0, 123, time.UTC)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "alice")
			run(t, options("local", src, dst))
			// Make DST differ: a changed file, a mode, a missing dir, extras.
			writeFiles(t, dst, map[string]string{"public_html/index.php": "<?php old!", "public_html/stale.php": "x", "tmp/junk": "j"})
			os.Chtimes(filepath.Join(dst, "public_html/index.php"), old, old)
			os.Chmod(filepath.Join(dst, "public_html/wp-config.php"), 0o666)
			os.RemoveAll(filepath.Join(dst, "public_html/new"))
			os.Chtimes(filepath.Join(dst, "public_html"), old, old)
			before := snapshot(t, dst)

			o := options(mode, src, dst)
			o.DryRun, o.Delete = true, true
			rep := run(t, o)
			if after := snapshot(t, dst); !mapsEqual(before, after) {
				t.Errorf("a dry run changed DST:\nbefore %v\nafter  %v", before, after)
			}
			want := []string{
				// rsync's order: a directory's extras before those of
				// its subdirectories, each directory's in reverse.
				"*deleting   tmp/junk",
				"*deleting   tmp/",
				"*deleting   public_html/stale.php",
				".d..t...... ./", // tmp/ was made in it
				".d..t...... public_html/",
				">f.st...... public_html/index.php",
				"cd+++++++++ public_html/new/",
				">f+++++++++ public_html/new/page.html",
				".f...p..... public_html/wp-config.php",
			}
			for i, l := range want {
				if mode == "push" && strings.HasPrefix(l, ">") {
					want[i] = "<" + l[1:] // rsync's letter for data sent
				}
			}
			if !rep.DryRun || !slices.Equal(rep.Changes, want) {
				t.Errorf("dry run said\n  %q\nwant\n  %q", rep.Changes, want)
			}

			o.DryRun, o.ItemizeChanges = false, true
			real := run(t, o)
			if !slices.Equal(real.Changes, rep.Changes) {
				t.Errorf("the real run did\n  %q\nthe dry run said\n  %q", real.Changes, rep.Changes)
			}
			assertSameTree(t, src, dst)
			o.DryRun, o.ItemizeChanges = true, false
			if again := run(t, o); len(again.Changes) != 0 {
				t.Errorf("a dry run after the restore still sees changes: %q", again.Changes)
			}
		})
	}
	t.Run("missing-dst", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "not", "yet")
		o := options("pull", src, dst)
		o.DryRun = true
		rep := run(t, o)
		if _, err := os.Lstat(filepath.Dir(dst)); !os.IsNotExist(err) {
			t.Errorf("a dry run created %s: %v", filepath.Dir(dst), err)
		}
		if len(rep.Changes) == 0 || rep.Changes[0] != "cd+++++++++ ./" {
			t.Errorf("changes: %q", rep.Changes)
		}
	})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Behind a served root (serve --listen, --root), every SRC of a selection
// is taken beneath it: several SRCs restore, and a SRC that climbs out of
// the root, by ".." or by a symlink, is refused without reading anything
// outside.
func TestSelectionConfinedToServedRoot(t *testing.T) {
	served := filepath.Join(t.TempDir(), "snapshots")
	writeFiles(t, served, map[string]string{"alice/mail/cur/m1": "mail", "alice/public_html/index.php": "<?php"})
	secret := filepath.Join(t.TempDir(), "secret")
	writeFiles(t, secret, map[string]string{"passwd": "root:x:0:0"})
	os.Symlink(secret, filepath.Join(served, "alice/escape"))
	pipe := transfer.PipeDialer{Config: transfer.ServerConfig{Root: served, ReadOnly: true, Version: "test"}}
	dst := t.TempDir()
	o := restore.Options{Src: "backup:/alice/mail", MoreSrc: []string{"backup:/alice/public_html/index.php"}, Dst: dst, Dialer: pipe}
	run(t, o)
	for _, p := range []string{"mail/cur/m1", "index.php"} {
		if _, err := os.Stat(filepath.Join(dst, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	for _, bad := range [][]string{
		{"backup:/alice/mail", "backup:/../" + filepath.Base(filepath.Dir(secret)) + "/secret/passwd"},
		{"backup:/alice/mail", "backup:/alice/escape/passwd"},
	} {
		dst := t.TempDir()
		o := restore.Options{Src: bad[0], MoreSrc: bad[1:], Dst: dst, Dialer: pipe}
		rep, err := restore.Run(context.Background(), o)
		if err == nil && len(rep.Errors) == 0 {
			t.Errorf("%q: restored without an error", bad)
		}
		if _, err := os.Stat(filepath.Join(dst, "passwd")); !os.IsNotExist(err) {
			t.Errorf("%q: passwd was restored from outside the served root", bad)
		}
	}
}

// A SRC that is a regular file lands at DST/<name>, pulled, pushed or
// local; a local file whose content is not a tar archive is such a file
// (one that is, is extracted: see the tar tests).
func TestFileSrc(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wp-config.php": "<?php define('DB', 'x');", "access.log.gz": "\x1f\x8bnot really gzip"})
	mtime := time.Date(2023, 5, 6, 7, 8, 9, 10, time.UTC)
	os.Chtimes(filepath.Join(dir, "wp-config.php"), mtime, mtime)
	os.Chmod(filepath.Join(dir, "wp-config.php"), 0o600)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "restored")
			run(t, options(mode, filepath.Join(dir, "wp-config.php"), dst))
			fi, err := os.Stat(filepath.Join(dst, "wp-config.php"))
			if err != nil || fi.Mode().Perm() != 0o600 || !fi.ModTime().Equal(mtime) {
				t.Fatalf("DST/wp-config.php: %v %v", fi, err)
			}
			if d, err := os.Stat(dst); err != nil || d.Mode().Perm() != 0o755 {
				t.Errorf("DST made for the file: %v %v, want mode 0755", d, err)
			}
		})
	}
	dst := t.TempDir()
	run(t, options("local", filepath.Join(dir, "access.log.gz"), dst))
	if b, err := os.ReadFile(filepath.Join(dst, "access.log.gz")); err != nil || string(b) != "\x1f\x8bnot really gzip" {
		t.Errorf("a gzip-looking file that is no tar archive: %q, %v", b, err)
	}
}

// The tar method takes several SRCs, -R and the filters (its sender walks
// like the raw one), and refuses --delete with a usage error naming it.
func TestTarSelection(t *testing.T) {
	src := filepath.Join(t.TempDir(), "alice")
	writeFiles(t, src, map[string]string{"public_html/index.php": "<?php", "public_html/debug.log": "log", "mail/cur/m1": "mail", "logs/a.log": "x"})
	for _, mode := range []string{"local", "pull"} {
		t.Run(mode, func(t *testing.T) {
			dst := t.TempDir()
			o := options(mode, src+"/./public_html", dst)
			o.MoreSrc = []string{strings.Replace(o.Src, "/./public_html", "/./mail", 1)}
			o.Relative, o.Method, o.Jobs = true, restore.MethodTar, 2
			o.Filters = []treewalk.Rule{{Pattern: "*.log"}}
			run(t, o)
			want := []string{"mail/", "mail/cur/", "mail/cur/m1", "public_html/", "public_html/index.php"}
			if got := treeSet(t, dst); !slices.Equal(got, want) {
				t.Errorf("tar restored %q, want %q", got, want)
			}
			o.Delete = true
			if _, err := restore.Run(context.Background(), o); !errors.Is(err, restore.ErrUsage) || !strings.Contains(err.Error(), "--delete") {
				t.Errorf("tar with --delete: %v", err)
			}
		})
	}
}
