package restore_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/restore/dest"
)

// rsyncItemize runs the real rsync with flags from src to dst as mode
// says, under the locale loc (LC_ALL), and returns its itemized lines (what
// is not one, "created directory", dropped) and its exit status. Pull and
// push go through a remote shell that runs the far side's rsync on this
// machine, so rsync's lines say the direction as they do over SSH.
func rsyncItemize(t *testing.T, mode, loc string, flags []string, src, dst string) ([]string, int) {
	t.Helper()
	testenv.RequireTool(t, "rsync")
	shell := filepath.Join(t.TempDir(), "rsh")
	// rsync calls "rsh HOST COMMAND..."; the command is shell text.
	if err := os.WriteFile(shell, []byte("#!/bin/sh\nshift\nexec sh -c \"$*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	args := append([]string{}, flags...)
	switch mode {
	case "local":
		args = append(args, src+"/", dst+"/")
	case "pull":
		args = append(args, "-e", shell, "backup:"+src+"/", dst+"/")
	case "push":
		args = append(args, "-e", shell, src+"/", "web:"+dst+"/")
	}
	cmd := exec.Command("rsync", args...)
	cmd.Env = append(os.Environ(), "LC_ALL="+loc)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("rsync %q: %v", args, err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		if len(l) >= 12 && l[11] == ' ' || strings.HasPrefix(l, "*deleting") {
			lines = append(lines, l)
		}
	}
	t.Logf("rsync %s: exit %d\n%s%s", strings.Join(flags, " "), code, out, stderr.String())
	return lines, code
}

// ourItemize runs our restore of src into dst as mode says, a dry run or
// a real run with --itemize-changes, with --delete or --force, and
// returns its change lines escaped as the command prints them for the
// locale loc, and its exit status by rsync's rule (23 when an entry
// failed).
func ourItemize(t *testing.T, mode, loc string, dry, del, force bool, src, dst string) ([]string, int) {
	t.Helper()
	o := options(mode, src, dst)
	o.DryRun, o.ItemizeChanges = dry, !dry
	o.Delete, o.Writer.Force = del, force
	rep, err := restore.Run(context.Background(), o)
	if err != nil {
		t.Fatalf("restore %s → %s: %v", o.Src, o.Dst, err)
	}
	var lines []string
	for _, l := range rep.Changes {
		lines = append(lines, dest.EscapeItemized(l, loc != "C"))
	}
	code := 0
	if len(rep.Errors) > 0 {
		code = 23
	}
	t.Logf("ours dry=%v: exit %d\n%s\nerrors %+v", dry, code, strings.Join(lines, "\n"), rep.Errors)
	return lines, code
}

// oddNamesTree is a SRC whose names hold what a terminal or a script
// reading the lines must not take as such: newlines (one forging a
// "*deleting" line), a carriage return, escape and other control bytes,
// tabs, a literal "\#012" (and "\#12", "\#999", a final backslash,
// which rsync escapes or keeps by its rule), invalid and truncated UTF-8
// next to valid UTF-8 and DEL; a directory, a symlink (its target too)
// and a hardlink group with such names.
func oddNamesTree(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "S")
	files := map[string]string{}
	for _, n := range []string{"new\nline", "tab\there", `bs\#012x`, `bs\plain`, "inv\xffx", "del\x7fx",
		"c1\xc2\x85x", "utf\xc3\xa9x", "evil\n*deleting   precious", "cr\rx", "esc\x1bx", "trunc\xe2\x82",
		"dir\nnl/in\x01side", `bs\#12x`, `bs\#999`, `end\`} {
		files[n] = "data"
	}
	writeFiles(t, src, files)
	must(t, os.Symlink("tgt\nx\xff", filepath.Join(src, "ln\x01k")))
	must(t, os.Link(filepath.Join(src, "new\nline"), filepath.Join(src, "hl\nk")))
	touchAll(t, src, time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	return src
}

// The itemized lines of names with control bytes, invalid UTF-8 and
// backslashes are the real rsync's, byte for byte, in a UTF-8 locale and
// in the C locale (which escapes every byte above 0x7f): one line per
// entry, none forged by a name, for local, pull and push, dry run and
// real run. The hardlink group's two names are compared as members
// (rsync and we choose different leaders, README: "Itemized changes").
func TestItemizeEscapesNamesAsRsync(t *testing.T) {
	for _, loc := range []string{"C.UTF-8", "C"} {
		for _, mode := range modes {
			t.Run(loc+"/"+mode, func(t *testing.T) {
				src := oddNamesTree(t)
				tmp := t.TempDir()
				rdst, odst := filepath.Join(tmp, "rsync"), filepath.Join(tmp, "ours")
				members := []string{`hl\#012k`, `new\#012line`}
				for _, dry := range []bool{true, false} {
					flags := []string{"-aHAXi"}
					if dry {
						flags = []string{"-aHAXni"}
					}
					want, _ := rsyncItemize(t, mode, loc, flags, src, rdst)
					got, _ := ourItemize(t, mode, loc, dry, false, false, src, odst)
					if g, w := groupLines(got, members), groupLines(want, members); !slices.Equal(g, w) {
						t.Errorf("dry=%v:\n  %q\nrsync %s:\n  %q", dry, g, flags[0], w)
					}
					for _, l := range got {
						if strings.ContainsAny(l, "\n\r") || strings.HasPrefix(l, "*deleting") {
							t.Errorf("dry=%v: line %q can be read as another", dry, l)
						}
						if _, leader, ok := strings.Cut(l, " => "); ok && !slices.Contains(members, leader) {
							t.Errorf("dry=%v: line %q: the leader is not escaped as rsync escapes it", dry, l)
						}
					}
				}
				rsyncItemizeNothing(t, src, odst)
			})
		}
	}
}

// wayTree is a SRC with a file and a symlink whose names DST (wayDst)
// holds as non-empty directories, and a file DST has as it is.
func wayTree(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "S")
	writeFiles(t, src, map[string]string{"nolf": "new data", "keep": "k"})
	must(t, os.Symlink("keep", filepath.Join(src, "ln")))
	touchAll(t, src, time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	return src
}

// wayDst makes dst: src's "keep" as it is, and directories where src has
// the file "nolf" (files and directories at several depths, names that
// sort differently as "NAME/") and the symlink "ln" (an empty
// subdirectory).
func wayDst(t *testing.T, src, dst string) {
	t.Helper()
	writeFiles(t, dst, map[string]string{"nolf/deep/f": "x", "nolf/b": "x", "nolf/A": "x", "nolf/a.x/q/z": "x",
		"nolf/a/g": "x", "nolf/a/f": "x"})
	must(t, os.MkdirAll(filepath.Join(dst, "ln/sub"), 0o755))
	if out, err := exec.Command("rsync", "-a", filepath.Join(src, "keep"), dst+"/").CombinedOutput(); err != nil {
		t.Fatalf("rsync: %v\n%s", err, out)
	}
	touchDirs(t, dst)
}

// Where DST has a non-empty directory in the place of a file or symlink,
// the lines and the exit status are the real rsync's, in order, for
// local, pull and push, dry run and real run: with --delete or --force,
// the directory's contents as "*deleting" lines (deepest first, in
// rsync's order) with the deletions, before the entries' lines; without, no line for the entry
// and exit 23, in the dry run as in the real run, which leaves the
// directory. Then the tree is rsync's.
func TestItemizeDirectoryInTheWayMatchesRsync(t *testing.T) {
	for _, c := range []struct {
		name       string
		del, force bool
		flags      []string
	}{
		{"delete", true, false, []string{"--delete"}},
		{"force", false, true, []string{"--force"}},
		{"neither", false, false, nil},
	} {
		for _, mode := range modes {
			t.Run(c.name+"/"+mode, func(t *testing.T) {
				testenv.RequireTool(t, "rsync")
				src := wayTree(t)
				tmp := t.TempDir()
				rdst, odst := filepath.Join(tmp, "rsync"), filepath.Join(tmp, "ours")
				wayDst(t, src, rdst)
				// One DST copied to the other, so that their mtimes
				// are the same whatever the clock did in between.
				if out, err := exec.Command("cp", "-a", rdst, odst).CombinedOutput(); err != nil {
					t.Fatalf("cp -a: %v\n%s", err, out)
				}
				for _, dry := range []bool{true, false} {
					flags := append([]string{"-aHAXi"}, c.flags...)
					if dry {
						flags[0] = "-aHAXni"
					}
					want, wantCode := rsyncItemize(t, mode, "C.UTF-8", flags, src, rdst)
					got, gotCode := ourItemize(t, mode, "C.UTF-8", dry, c.del, c.force, src, odst)
					// The deletions in order; all lines as a set (rsync's
					// processes interleave "./" and the deletions).
					if !slices.Equal(deletions(got), deletions(want)) || !slices.Equal(sorted(got), sorted(want)) || gotCode != wantCode {
						t.Errorf("dry=%v: exit %d\n  %q\nrsync %s: exit %d\n  %q", dry, gotCode, got, strings.Join(flags, " "), wantCode, want)
					}
				}
				if out, err := exec.Command("rsync", "-aHAXni", "--delete", rdst+"/", odst+"/").CombinedOutput(); err != nil || len(out) > 0 {
					t.Errorf("our DST is not rsync's: %v\n%s", err, out)
				}
			})
		}
	}
}

// A change of xattrs only or of POSIX ACLs only is listed as the real
// rsync -aHAXi lists it, with 'x' or 'a' (an attribute DST has and SRC
// not, one SRC has and DST not, a value changed, an access ACL, a
// directory's default ACL, DST's root), together with other changes
// ('<'/'>' data, 't'), and an ACL mask that differs as the mode's 'p'
// only; for local, pull and push, whose data lines start
// with '<', dry run and real run.
func TestItemizeXattrACLChangesMatchRsync(t *testing.T) {
	testenv.RequireTool(t, "setfacl")
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			testenv.RequireTool(t, "rsync")
			src := filepath.Join(t.TempDir(), "S")
			writeFiles(t, src, map[string]string{"dst-xattr": "1", "dst-acl": "2", "src-xattr": "3", "src-acl": "4",
				"value": "5", "data": "6", "same": "7", "d/f": "8", "e/f": "9", "mask": "10"})
			setxattr(t, filepath.Join(src, "value"), "user.v", "old")
			sh(t, "setfacl", "-d", "-m", "u:nobody:rx", filepath.Join(src, "e"))
			sh(t, "setfacl", "-m", "u:nobody:rwx", filepath.Join(src, "mask"))
			touchAll(t, src, time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
			tmp := t.TempDir()
			rdst, odst := filepath.Join(tmp, "rsync"), filepath.Join(tmp, "ours")
			for _, d := range []string{rdst, odst} {
				if out, err := exec.Command("rsync", "-aHAX", src+"/", d+"/").CombinedOutput(); err != nil {
					t.Fatalf("rsync: %v\n%s", err, out)
				}
				setxattr(t, filepath.Join(d, "dst-xattr"), "user.theirs", "1")
				setxattr(t, filepath.Join(d, "value"), "user.v", "new")
				setxattr(t, d, "user.root", "1")
				sh(t, "setfacl", "-m", "u:nobody:rw", filepath.Join(d, "dst-acl"))
				sh(t, "setfacl", "-d", "-m", "u:nobody:rwx", filepath.Join(d, "d"))
				sh(t, "setfacl", "-k", filepath.Join(d, "e"))
				setxattr(t, filepath.Join(d, "data"), "user.extra", "1")
				os.WriteFile(filepath.Join(d, "data"), []byte("changed"), 0o644)
				sh(t, "setfacl", "-m", "m::r", filepath.Join(d, "mask"))
			}
			// What SRC has and DST not.
			setxattr(t, filepath.Join(src, "src-xattr"), "user.mine", "1")
			sh(t, "setfacl", "-m", "u:nobody:r", filepath.Join(src, "src-acl"))
			touchAll(t, src, time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
			touchDirs(t, rdst, odst)
			for _, dry := range []bool{true, false} {
				flags := []string{"-aHAXi"}
				if dry {
					flags = []string{"-aHAXni"}
				}
				want, _ := rsyncItemize(t, mode, "C.UTF-8", flags, src, rdst)
				got, _ := ourItemize(t, mode, "C.UTF-8", dry, false, false, src, odst)
				if got, want := sorted(got), sorted(want); !slices.Equal(got, want) {
					t.Errorf("dry=%v:\n  %q\nrsync %s:\n  %q", dry, got, flags[0], want)
				}
				if dry && len(got) < 7 {
					t.Errorf("dry run said only %q: a weak case", got)
				}
			}
			if out, err := exec.Command("rsync", "-aHAXni", src+"/", odst+"/").CombinedOutput(); err != nil || len(out) > 0 {
				t.Errorf("after the restore, rsync -aHAXni still sees: %v\n%s", err, out)
			}
		})
	}
}

// setxattr sets the extended attribute name of p (not following a
// symlink) to value.
func setxattr(t *testing.T, p, name, value string) {
	t.Helper()
	sh(t, "setfattr", "-h", "-n", name, "-v", value, p)
}

// deletions returns the "*deleting" lines of lines, in their order.
func deletions(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, "*deleting") {
			out = append(out, l)
		}
	}
	return out
}

// sorted returns a sorted copy of lines.
func sorted(lines []string) []string {
	out := slices.Clone(lines)
	slices.Sort(out)
	return out
}
