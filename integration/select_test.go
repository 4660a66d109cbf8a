package integration

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/internal/testsshd"
)

// Restoring some files of an account over a real sshd: two SRCs with -R
// and a "/./" marker, an --exclude, --delete, first as a dry run (which
// changes nothing in DST, mtimes included, and prints rsync's itemized
// lines), then for real with --itemize-changes (the same lines), then the
// exit codes of a missing SRC among others (23), every SRC missing (11),
// a bad pattern (1) and SRCs on different hosts (1).
func TestE2ESelectionPull(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := filepath.Join(t.TempDir(), "snap", "alice")
	dst := filepath.Join(t.TempDir(), "alice")
	write := func(root string, files ...string) {
		for _, p := range files {
			full := filepath.Join(root, p)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(full, []byte("data of "+p), 0o640); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(src, "public_html/index.php", "public_html/wp-config.php", "public_html/cache/page.html",
		"public_html/wp-content/uploads/photo one.jpg", "mail/cur/m1", "mail/new/m2", "logs/access.log")
	write(dst, "public_html/stale.php", "public_html/cache/kept.html", "mail/new/outside", "mail/cur/stale", "other.txt")
	srv := testsshd.Start(t)
	args := func(extra ...string) []string {
		a := append([]string{"restore"}, sshdArgs(srv)...)
		return append(a, extra...)
	}
	sel := []string{"-R", "--exclude=cache/", "--delete",
		sshdURL(srv, src+"/./public_html"), sshdURL(srv, src+"/./mail/cur"), dst}

	before := snapshotTree(t, dst)
	dry := mustRun(t, args(append([]string{"-n"}, sel...)...)...)
	if after := snapshotTree(t, dst); !slices.Equal(before, after) {
		t.Errorf("the dry run changed DST:\nbefore %q\nafter  %q", before, after)
	}
	lines := strings.Split(strings.TrimSpace(dry.stdout), "\n")
	changes, summary := lines[:len(lines)-1], lines[len(lines)-1]
	for _, want := range []string{"*deleting   public_html/stale.php", "*deleting   mail/cur/stale",
		">f+++++++++ public_html/index.php", "cd+++++++++ public_html/wp-content/", ">f+++++++++ public_html/wp-content/uploads/photo one.jpg",
		">f+++++++++ mail/cur/m1"} {
		if !slices.Contains(changes, want) {
			t.Errorf("dry run: no line %q in\n%s", want, dry.stdout)
		}
	}
	for _, l := range changes {
		if strings.Contains(l, "cache") || strings.Contains(l, "outside") || strings.Contains(l, "other.txt") || strings.Contains(l, "logs") {
			t.Errorf("dry run: %q is out of the selection", l)
		}
	}
	if !strings.HasPrefix(summary, "dry run, nothing written") {
		t.Errorf("dry run summary: %q", summary)
	}

	real := mustRun(t, args(append([]string{"--itemize-changes"}, sel...)...)...)
	realLines := strings.Split(strings.TrimSpace(real.stdout), "\n")
	if got := realLines[:len(realLines)-1]; !slices.Equal(got, changes) {
		t.Errorf("the real run's changes\n  %q\ndiffer from the dry run's\n  %q", got, changes)
	}
	for _, p := range []string{"public_html/index.php", "public_html/wp-content/uploads/photo one.jpg", "mail/cur/m1",
		"public_html/cache/kept.html", "mail/new/outside", "other.txt"} {
		if _, err := os.Stat(filepath.Join(dst, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	for _, p := range []string{"public_html/stale.php", "mail/cur/stale", "public_html/cache/page.html", "mail/new/m2", "logs"} {
		if _, err := os.Lstat(filepath.Join(dst, p)); !os.IsNotExist(err) {
			t.Errorf("%s: should not be there (%v)", p, err)
		}
	}
	if again := mustRun(t, args(append([]string{"-n"}, sel...)...)...); strings.Count(strings.TrimSpace(again.stdout), "\n") != 0 {
		t.Errorf("a dry run after the restore still has changes:\n%s", again.stdout)
	}

	for _, c := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"missing SRC among others", args(sshdURL(srv, src+"/public_html/index.php"), sshdURL(srv, src+"/nope"), t.TempDir()), exitPartial, "nope"},
		{"every SRC missing", args(sshdURL(srv, src+"/nope1"), sshdURL(srv, src+"/nope2"), filepath.Join(t.TempDir(), "new")), exitFileIO, "nothing to restore"},
		{"bad pattern", args("--exclude=[abc", sshdURL(srv, src), t.TempDir()), exitUsage, "unterminated ["},
		{"mixed hosts", args(src+"/mail", sshdURL(srv, src+"/logs"), t.TempDir()), exitUsage, "same host"},
		{"files-from escaping", args("--files-from=-", sshdURL(srv, src), t.TempDir()), exitUsage, "leaves the SRC"},
	} {
		var r result
		if c.name == "files-from escaping" {
			r = runBinStdin(t, "../etc/passwd\n", c.args...)
		} else {
			r = runBin(t, c.args...)
		}
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("%s: want exit %d and %q:\n%s", c.name, c.code, c.msg, r)
		}
	}
}

// runBinStdin is runBin with stdin.
func runBinStdin(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	cmd, cancel := command(t, args...)
	defer cancel()
	var stdout, stderr strings.Builder
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(interface{ ExitCode() int }); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// snapshotTree describes each entry under root, root included: mode,
// size, mtime to the nanosecond.
func snapshotTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, fmt.Sprintf("%s %v %d %d", rel, fi.Mode(), fi.Size(), fi.ModTime().UnixNano()))
		return nil
	})
	return out
}
