package integration

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/internal/testsshd"
)

// lsTree makes a tree with what a listing must render exactly: modes with
// set-id and sticky bits, a symlink, a hardlink, a fifo, an empty
// directory, and odd names (a space, a newline, a tab, a leading dash,
// UTF-8, a byte that is not UTF-8).
func lsTree(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "tree")
	files := map[string]os.FileMode{
		"public_html/index.php":     0o644,
		"public_html/wp-config.php": 0o600,
		"bin/tool":                  0o755 | os.ModeSetuid,
		"bin/group-tool":            0o750 | os.ModeSetgid,
		"odd/sp ace":                0o644,
		"odd/nl\nx":                 0o644,
		"odd/tab\tx":                0o644,
		"odd/-dash":                 0o644,
		"odd/café":                  0o644,
		"odd/bad\xffbyte":           0o644,
	}
	i := 0
	for name, mode := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.Repeat("x", 100*i+3)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		mt := time.Date(2026, 11, 29, 10, i, 7, 500_000_000, time.UTC)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
		i++
	}
	if err := os.Mkdir(filepath.Join(root, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(root, "tmp"), 0o1777)
	if err := os.Symlink("public_html/index.php", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(root, "public_html/index.php"), filepath.Join(root, "hard.php")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o640); err != nil {
		t.Fatal(err)
	}
	lchown(t, filepath.Join(root, "public_html/wp-config.php"), 1234, 5678)
	return root
}

// lsRow is one listed entry, as both rsync --list-only and restoresync ls
// print it: the type and mode, the size (not for directories: rsync
// prints the directory's own, the file list does not carry it), the mtime
// to the second, and the name as printed (escaped), a symlink's with its
// target.
type lsRow struct {
	perms string
	size  int64
	mtime int64
	name  string
}

var rsyncListRE = regexp.MustCompile(`^(\S{10}) +([\d,]+) (\d{4}/\d\d/\d\d \d\d:\d\d:\d\d) (.*)$`)

// rsyncList runs the real rsync --list-only with args (its -r and a path)
// in a UTF-8 locale and returns its rows by name.
func rsyncList(t *testing.T, args ...string) map[string]lsRow {
	t.Helper()
	testenv.RequireTool(t, "rsync")
	cmd := exec.Command("rsync", append([]string{"--list-only", "-l"}, args...)...)
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rsync --list-only %v: %v", args, err)
	}
	rows := map[string]lsRow{}
	for _, l := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		m := rsyncListRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("rsync --list-only line %q", l)
		}
		size, _ := strconv.ParseInt(strings.ReplaceAll(m[2], ",", ""), 10, 64)
		mt, err := time.ParseInLocation("2006/01/02 15:04:05", m[3], time.Local)
		if err != nil {
			t.Fatal(err)
		}
		if m[1][0] == 'd' {
			size = 0
		}
		rows[m[4]] = lsRow{perms: m[1], size: size, mtime: mt.Unix(), name: m[4]}
	}
	return rows
}

var lsLineRE = regexp.MustCompile(`^(\S{10}) (\S+) +(\S+) +(\d+) (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d) (.*)$`)

// lsRows parses restoresync ls's text output into rows by name.
func lsRows(t *testing.T, r result) map[string]lsRow {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%v", r)
	}
	rows := map[string]lsRow{}
	for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		m := lsLineRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("ls line %q\n%v", l, r)
		}
		size, _ := strconv.ParseInt(m[4], 10, 64)
		mt, err := time.ParseInLocation("2006-01-02T15:04:05", m[5], time.Local)
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := rows[m[6]]; dup {
			t.Errorf("ls lists %q twice", m[6])
		}
		rows[m[6]] = lsRow{perms: m[1], size: size, mtime: mt.Unix(), name: m[6]}
	}
	return rows
}

func compareRows(t *testing.T, what string, got, want map[string]lsRow) {
	t.Helper()
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: %q missing; rsync lists it as %+v", what, name, w)
		case g != w:
			t.Errorf("%s: %q is %+v, rsync says %+v", what, name, g, w)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: %q listed, rsync does not list it", what, name)
		}
	}
}

// lsJSONLine is the part of ls --json's objects the tests check.
type lsJSONLine struct {
	Path       string `json:"path"`
	Name       string `json:"name"`
	NameBase64 string `json:"name_base64"`
	Kind       string `json:"kind"`
	Mode       uint32 `json:"mode"`
	Uid        uint32 `json:"uid"`
	Gid        uint32 `json:"gid"`
	Size       int64  `json:"size"`
	MtimeNs    int64  `json:"mtime_ns"`
	LinkTarget string `json:"link_target"`
	Checksum   string `json:"xxh3"`
	Version    int    `json:"version"`
	Missing    bool   `json:"missing"`
}

func lsJSON(t *testing.T, r result) []lsJSONLine {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%v", r)
	}
	var out []lsJSONLine
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		var l lsJSONLine
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("ls --json line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// lsEndpoints are the ways ls reaches a remote tree: the agent over a real
// sshd (the built-in client, and -e ssh), the remote's find over the same
// sshd, and 'serve --listen'. Each
// returns the flags and the location of an absolute path beneath root.
func lsEndpoints(t *testing.T, root string) map[string]func(p string) []string {
	srv := testsshd.Start(t)
	cfg := srv.Config(t)
	l := startListen(t, root, newListenKeys(t))
	return map[string]func(p string) []string{
		"agent over sshd": func(p string) []string { return append(sshdArgs(srv), sshdURL(srv, p)) },
		"agent over -e ssh": func(p string) []string {
			return []string{"-e", "ssh -F " + cfg, "--remote-path", binPath, "testhost:" + p}
		},
		"agent-less over sshd": func(p string) []string {
			return append(sshdArgs(srv)[:6], "--remote-path", "none", sshdURL(srv, p))
		},
		"serve --listen": func(p string) []string {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(p, "/") {
				rel += "/"
			}
			return append(l.args(), l.url(rel))
		},
	}
}

// ls lists what rsync --list-only lists, entry for entry (types, modes,
// sizes, mtimes, names with the same escapes), recursive and not, for a
// directory's contents and for the directory itself, through the agent,
// agent-less and 'serve --listen'; --json gives the exact names (in
// base64 beside when not UTF-8), ids, modes and nanosecond mtimes.
func TestE2ELsMatchesRsyncListOnly(t *testing.T) {
	e2e(t)
	t.Parallel()
	root := lsTree(t)
	cases := []struct {
		flags []string // restoresync ls's
		rsync []string // rsync's for the same listing
		path  string   // beneath root
	}{
		{nil, nil, "/"},
		{[]string{"-R"}, []string{"-r"}, "/"},
		{nil, nil, "/odd"},
		{[]string{"-R"}, []string{"-r"}, "/odd"},
		{nil, nil, "/public_html/wp-config.php"},
		{[]string{"-R", "--exclude", "*.php"}, []string{"-r", "--exclude", "*.php"}, "/"},
	}
	for _, c := range cases {
		want := rsyncList(t, append(c.rsync, root+c.path)...)
		got := lsRows(t, runBin(t, append(append([]string{"ls"}, c.flags...), root+c.path)...))
		compareRows(t, fmt.Sprintf("local ls %v %s", c.flags, c.path), got, want)
	}
	for name, loc := range lsEndpoints(t, root) {
		for _, c := range cases {
			want := rsyncList(t, append(c.rsync, root+c.path)...)
			r := runBin(t, append(append([]string{"ls"}, c.flags...), loc(root+c.path)...)...)
			compareRows(t, fmt.Sprintf("%s: ls %v %s", name, c.flags, c.path), lsRows(t, r), want)
		}
		// -d: the entry itself, not what it holds.
		rows := lsRows(t, runBin(t, append([]string{"ls", "-d"}, loc(root+"/odd/")...)...))
		if len(rows) != 1 || rows["."].perms != "drwxr-xr-x" {
			t.Errorf("%s: ls -d DIR/ lists %v, want the directory alone as \".\"", name, rows)
		}
		// --json: exact names, ids, link targets, nanosecond mtimes.
		byName := map[string]lsJSONLine{}
		for _, l := range lsJSON(t, runBin(t, append([]string{"ls", "-R", "--json"}, loc(root+"/")...)...)) {
			if l.NameBase64 != "" {
				b, err := base64.StdEncoding.DecodeString(l.NameBase64)
				if err != nil {
					t.Errorf("%s: name_base64 %q: %v", name, l.NameBase64, err)
				}
				l.Name = string(b)
			}
			byName[l.Name] = l
		}
		for _, rel := range []string{"odd/nl\nx", "odd/bad\xffbyte", "public_html/wp-config.php", "link", "hard.php", "fifo", "tmp"} {
			var st syscall.Stat_t
			if err := syscall.Lstat(filepath.Join(root, rel), &st); err != nil {
				t.Fatal(err)
			}
			l, ok := byName[rel]
			if !ok {
				t.Errorf("%s: ls --json lacks %q", name, rel)
				continue
			}
			if l.Uid != st.Uid || l.Gid != st.Gid || l.Mode != st.Mode&0o7777 || l.MtimeNs != st.Mtim.Nano() {
				t.Errorf("%s: ls --json %q: uid %d gid %d mode %o mtime %d, the file has %d %d %o %d",
					name, rel, l.Uid, l.Gid, l.Mode, l.MtimeNs, st.Uid, st.Gid, st.Mode&0o7777, st.Mtim.Nano())
			}
		}
		if l := byName["link"]; l.Kind != "symlink" || l.LinkTarget != "public_html/index.php" {
			t.Errorf("%s: ls --json link: %+v, want a symlink to public_html/index.php", name, l)
		}
	}
}

// ls takes the connection settings of the configuration file, as restore
// does: here the identity, given by the file only.
func TestE2ELsConfigFile(t *testing.T) {
	e2e(t)
	t.Parallel()
	root := lsTree(t)
	srv := testsshd.Start(t)
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("identity = [%q]\n", srv.IdentityFile)), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runBin(t, "ls", "--config", cfg, "-F", "none", "--known-hosts", srv.KnownHostsFile, "--remote-path", binPath, sshdURL(srv, root+"/public_html/"))
	rows := lsRows(t, r)
	if _, ok := rows["wp-config.php"]; !ok || len(rows) != 3 {
		t.Errorf("ls with the identity from --config listed %v, want ., index.php and wp-config.php\n%v", rows, r)
	}
}

// --versions over three rsnapshot-style snapshots (cp -al) where the
// newest changed the file and a fourth lacks it: one row a snapshot,
// newest first, the two identical versions sharing a number and the
// checksum of their bytes, and a "missing" row.
func TestE2ELsVersions(t *testing.T) {
	e2e(t)
	t.Parallel()
	testenv.RequireTool(t, "cp")
	snaps := t.TempDir()
	rel := "home/alice/public_html/wp-config.php"
	old := []byte("<?php define('DB_PASSWORD', 'old');\n")
	changed := []byte("<?php define('DB_PASSWORD', 'changed-since');\n")
	p2 := filepath.Join(snaps, "daily.2", rel)
	if err := os.MkdirAll(filepath.Dir(p2), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p2, old, 0o640); err != nil {
		t.Fatal(err)
	}
	oldTime := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	os.Chtimes(p2, oldTime, oldTime)
	for _, c := range [][2]string{{"daily.2", "daily.1"}, {"daily.1", "daily.0"}} {
		if out, err := exec.Command("cp", "-al", filepath.Join(snaps, c[0]), filepath.Join(snaps, c[1])).CombinedOutput(); err != nil {
			t.Fatalf("cp -al: %v: %s", err, out)
		}
	}
	// The newest snapshot's copy changed: a new file, as rsnapshot makes.
	p0 := filepath.Join(snaps, "daily.0", rel)
	os.Remove(p0)
	if err := os.WriteFile(p0, changed, 0o640); err != nil {
		t.Fatal(err)
	}
	newTime := time.Date(2026, 11, 29, 9, 30, 0, 0, time.UTC)
	os.Chtimes(p0, newTime, newTime)
	if err := os.MkdirAll(filepath.Join(snaps, "daily.3", filepath.Dir(rel)), 0o755); err != nil {
		t.Fatal(err)
	}
	sum := func(b []byte) string { return fmt.Sprintf("%016x", xxh3.Hash(b)) }
	paths := []string{"daily.2", "daily.3", "daily.0", "daily.1"}

	check := func(name string, loc func(p string) []string) {
		args := []string{"ls", "--versions", "--json"}
		for i, s := range paths {
			l := loc(filepath.Join(snaps, s, rel))
			if i == 0 {
				args = append(args, l...)
			} else {
				args = append(args, l[len(l)-1])
			}
		}
		rows := lsJSON(t, runBin(t, args...))
		type want struct {
			snap    string
			version int
			size    int
			sum     string
			missing bool
		}
		wants := []want{
			{"daily.0", 1, len(changed), sum(changed), false},
			{"daily.2", 2, len(old), sum(old), false},
			{"daily.1", 2, len(old), sum(old), false},
			{"daily.3", 0, 0, "", true},
		}
		if len(rows) != len(wants) {
			t.Fatalf("%s: ls --versions --json printed %d rows, want %d: %+v", name, len(rows), len(wants), rows)
		}
		for i, w := range wants {
			r := rows[i]
			if !strings.Contains(r.Path, "/"+w.snap+"/") || r.Version != w.version || r.Size != int64(w.size) || r.Checksum != w.sum || r.Missing != w.missing {
				t.Errorf("%s: --versions row %d: %+v, want %s version %d, %d bytes, xxh3 %s, missing %v", name, i, r, w.snap, w.version, w.size, w.sum, w.missing)
			}
		}
	}
	check("local", func(p string) []string { return []string{p} })
	for name, loc := range lsEndpoints(t, snaps) {
		check(name, loc)
	}

	// A pattern, expanded by the agent beneath the tree it serves: the
	// snapshots that hold the file, newest first; a symlink out of the
	// served root matches nothing.
	if err := os.Symlink("/etc", filepath.Join(snaps, "escape")); err != nil {
		t.Fatal(err)
	}
	for name, loc := range lsEndpoints(t, snaps) {
		if name == "agent-less over sshd" {
			continue // the pattern is refused: the agent expands it
		}
		rows := lsJSON(t, runBin(t, append([]string{"ls", "--versions", "--json"}, loc(filepath.Join(snaps, "daily.*", rel))...)...))
		var got []string
		for _, r := range rows {
			got = append(got, fmt.Sprintf("%s:%d", filepath.Base(strings.Split(r.Path, "/home/")[0]), r.Version))
		}
		if strings.Join(got, " ") != "daily.0:1 daily.1:2 daily.2:2" {
			t.Errorf("%s: ls --versions daily.*: %v, want daily.0:1 daily.1:2 daily.2:2\n%+v", name, got, rows)
		}
		if name != "serve --listen" {
			continue
		}
		r := runBin(t, append([]string{"ls"}, loc(filepath.Join(snaps, "esc*", "pass*"))...)...)
		if r.code == 0 || strings.Contains(r.stdout, "passwd") {
			t.Errorf("%s: a pattern through a symlink out of the served root listed %v", name, r)
		}
	}

	r := runBin(t, "ls", "--versions", filepath.Join(snaps, "daily.1", rel), filepath.Join(snaps, "daily.3", rel), filepath.Join(snaps, "daily.0", rel))
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[0], "VERSION") ||
		!strings.HasPrefix(lines[1], "1 ") || !strings.Contains(lines[1], sum(changed)) || !strings.Contains(lines[1], "2026-11-29") ||
		!strings.HasPrefix(lines[2], "2 ") || !strings.Contains(lines[2], sum(old)) ||
		!strings.Contains(lines[3], "missing") || !strings.Contains(lines[3], "daily.3") {
		t.Errorf("ls --versions table:\n%s\nwant a header, daily.0 (1), daily.1 (2), daily.3 missing\n%v", r.stdout, r)
	}
}
