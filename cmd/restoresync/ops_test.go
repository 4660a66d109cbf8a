package main

// Tests of the operators' flags (hooks, logs, quiet, config, completion,
// help), run in-process through run() on small trees written by the test.
// --account, which needs real accounts of this host, is tested by the
// built binary in integration/.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/restoresync/restoresync/internal/testreport"
)

// readEnv reads a file written by env(1) into a map.
func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the hook did not run: %v", err)
	}
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	return env
}

// wantEnv fails t unless env holds every key of want with its value.
func wantEnv(t *testing.T, hook string, env, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got, ok := env[k]; !ok || got != v {
			t.Errorf("%s: %s=%q (set: %v), want %q", hook, k, got, ok, v)
		}
	}
}

// The hooks' environment: every RESTORE_* variable, and the JSON report
// file, which is gone once restoresync exits.
func TestHooksEnvironment(t *testing.T) {
	t.Parallel()
	src := smallTree(t)
	dir := t.TempDir()
	dst := filepath.Join(dir, "dst")
	pre := fmt.Sprintf("env > %s/pre.env; echo pre-hook-output", dir)
	post := fmt.Sprintf("env > %s/post.env; cp \"$RESTORE_REPORT\" %s/report.json; echo post-hook-output >&2", dir, dir)
	r := mustRunIn(t, "restore", "--config", "none", "--json", "--compress", "lz4", "--pre-hook", pre, "--post-hook", post, src, dst)
	rep := parseReport(t, r)
	if !strings.Contains(r.stderr, "pre-hook-output") || !strings.Contains(r.stderr, "post-hook-output") {
		t.Errorf("the hooks' output is not passed through to stderr:\n%s", r)
	}

	wantEnv(t, "pre-hook", readEnv(t, dir+"/pre.env"), map[string]string{
		"RESTORE_HOOK": "pre", "RESTORE_SRC": src, "RESTORE_DST": dst, "RESTORE_ACCOUNT": "",
		"RESTORE_METHOD": "auto", "RESTORE_COMPRESSION": "lz4",
	})
	postEnv := readEnv(t, dir+"/post.env")
	wantEnv(t, "post-hook", postEnv, map[string]string{
		"RESTORE_HOOK": "post", "RESTORE_SRC": src, "RESTORE_DST": dst, "RESTORE_ACCOUNT": "",
		"RESTORE_METHOD": "raw", "RESTORE_COMPRESSION": "none", // local → local
		"RESTORE_FILES": "5", "RESTORE_BYTES": strconv.FormatInt(rep.Bytes, 10),
		"RESTORE_STATUS": "ok", "RESTORE_EXIT": "0",
	})
	if rep.Files != 5 {
		t.Errorf("report: %d files, want 5", rep.Files)
	}
	if s, err := strconv.ParseFloat(postEnv["RESTORE_SECONDS"], 64); err != nil || s <= 0 || s > rep.Seconds+1 {
		t.Errorf("RESTORE_SECONDS=%q, the report says %v s", postEnv["RESTORE_SECONDS"], rep.Seconds)
	}
	var hookRep testreport.Report
	b, _ := os.ReadFile(dir + "/report.json")
	if err := json.Unmarshal(b, &hookRep); err != nil || hookRep.Files != rep.Files || hookRep.Bytes != rep.Bytes {
		t.Errorf("RESTORE_REPORT held %q (%v), want the report of %d files", b, err, rep.Files)
	}
	// The same object --json prints, how the run ended included.
	var hookObj, jsonObj map[string]any
	if json.Unmarshal(b, &hookObj) != nil || json.Unmarshal([]byte(r.stdout), &jsonObj) != nil {
		t.Fatalf("RESTORE_REPORT %q or --json %q is not a JSON object", b, r.stdout)
	}
	if code, ok := hookObj["exit_code"]; !ok || code != 0.0 || hookObj["error"] != nil {
		t.Errorf("RESTORE_REPORT after a good restore: exit_code %v (present: %v), error %v; want 0 and no error:\n%s", code, ok, hookObj["error"], b)
	}
	delete(hookObj, "seconds")
	delete(jsonObj, "seconds")
	if hb, jb := fmt.Sprint(hookObj), fmt.Sprint(jsonObj); hb != jb {
		t.Errorf("RESTORE_REPORT and --json differ:\nhook: %s\njson: %s", hb, jb)
	}
	if _, err := os.Stat(postEnv["RESTORE_REPORT"]); !os.IsNotExist(err) {
		t.Errorf("RESTORE_REPORT %s outlived the hook: %v", postEnv["RESTORE_REPORT"], err)
	}
}

// A failing pre-hook aborts with its status before anything is written,
// and the post-hook does not run.
func TestPreHookAborts(t *testing.T) {
	t.Parallel()
	src := smallTree(t)
	dir := t.TempDir()
	dst := filepath.Join(dir, "dst")
	r := runIn(t, "restore", "--config", "none", "--pre-hook", "echo site is locked >&2; exit 7",
		"--post-hook", "touch "+dir+"/post-ran", src, dst)
	if r.code != 7 || !strings.Contains(r.stderr, "site is locked") || !strings.Contains(r.stderr, "pre-hook") {
		t.Errorf("want exit 7 with the hook's message and a pre-hook error:\n%s", r)
	}
	if _, err := os.Lstat(dst); !os.IsNotExist(err) {
		t.Errorf("DST exists after a pre-hook abort: %v", err)
	}
	if _, err := os.Lstat(dir + "/post-ran"); err == nil {
		t.Error("the post-hook ran after a pre-hook abort")
	}
}

// The post-hook runs after failed and partial restores too, and says so;
// restoresync's exit status is the restore's. After a good restore, a
// failing post-hook gives exit 26.
func TestPostHookStatus(t *testing.T) {
	t.Parallel()
	src := smallTree(t)
	dir := t.TempDir()
	hook := func(name string) string {
		return fmt.Sprintf("env > %s/%s.env; cp \"$RESTORE_REPORT\" %s/%s.json", dir, name, dir, name)
	}
	// hookReport checks the RESTORE_REPORT the hook named name copied: the
	// exit code the run ends with, and an error message containing msg.
	hookReport := func(name string, code int, msg string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name+".json"))
		var rep testreport.Report
		if err == nil {
			err = json.Unmarshal(b, &rep)
		}
		if err != nil || rep.ExitCode != code || !strings.Contains(rep.Error, msg) || rep.Errors == nil {
			t.Errorf("%s: RESTORE_REPORT %q (%v): want exit_code %d, an error containing %q and an errors list", name, b, err, code, msg)
		}
	}

	// failed: SRC does not exist
	r := runIn(t, "restore", "--config", "none", "--post-hook", hook("failed"), filepath.Join(dir, "missing"), filepath.Join(dir, "d1"))
	if r.code != exitFileIO {
		t.Errorf("missing SRC: want exit %d:\n%s", exitFileIO, r)
	}
	wantEnv(t, "post-hook after a failure", readEnv(t, dir+"/failed.env"), map[string]string{
		"RESTORE_STATUS": "failed", "RESTORE_EXIT": strconv.Itoa(exitFileIO), "RESTORE_FILES": "0"})
	hookReport("failed", exitFileIO, "missing")

	// partial: a non-empty directory where SRC has a file (kept without --force)
	d2 := filepath.Join(dir, "d2")
	if err := os.MkdirAll(filepath.Join(d2, "public_html", "index.php", "keep"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = runIn(t, "restore", "--config", "none", "--post-hook", hook("partial"), src, d2)
	if r.code != exitPartial {
		t.Errorf("directory in the way: want exit %d:\n%s", exitPartial, r)
	}
	wantEnv(t, "post-hook after a partial restore", readEnv(t, dir+"/partial.env"), map[string]string{
		"RESTORE_STATUS": "partial", "RESTORE_EXIT": strconv.Itoa(exitPartial), "RESTORE_FILES": "4"})
	hookReport("partial", exitPartial, "some files could not be restored")

	// a good restore, a failing hook
	r = runIn(t, "restore", "--config", "none", "--post-hook", "exit 3", src, filepath.Join(dir, "d3"))
	if r.code != exitPostHook || !strings.Contains(r.stderr, "post-hook") || !strings.Contains(r.stderr, "status 3") {
		t.Errorf("failing post-hook after a good restore: want exit %d naming the hook's status:\n%s", exitPostHook, r)
	}
	if _, err := os.Stat(filepath.Join(dir, "d3", "public_html", "index.php")); err != nil {
		t.Errorf("the restore before the failing post-hook: %v", err)
	}
}

// -q prints nothing on success; -v with --log-format json gives one JSON
// record per restored file, and stdout keeps only the --json report.
func TestQuietAndJSONLogs(t *testing.T) {
	t.Parallel()
	src := smallTree(t)
	dir := t.TempDir()
	r := mustRunIn(t, "restore", "--config", "none", "-q", src, filepath.Join(dir, "q"))
	if r.stdout != "" || r.stderr != "" {
		t.Errorf("-q printed something:\n%s", r)
	}
	r = mustRunIn(t, "restore", "--config", "none", "-q", "--json", src, filepath.Join(dir, "qj"))
	parseReport(t, r)

	dst := filepath.Join(dir, "v")
	r = mustRunIn(t, "restore", "--config", "none", "-v", "--log-format", "json", "--json", src, dst)
	rep := parseReport(t, r)
	restored := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		var rec struct {
			Level, Msg, Path, Action string
			Size                     *int64
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("stderr line is not JSON: %q", line)
			continue
		}
		if rec.Msg != "restored" || rec.Level != "INFO" || rec.Size == nil || rec.Action != "write" {
			t.Errorf("record %q: want level INFO, msg restored, size, action write", line)
			continue
		}
		fi, err := os.Stat(filepath.Join(dst, rec.Path))
		if err != nil || fi.Size() != *rec.Size {
			t.Errorf("record %q: the file on disk: %v", line, err)
		}
		restored[rec.Path] = true
	}
	if len(restored) != rep.Files || !restored["public_html/wp-config.php"] {
		t.Errorf("%d files logged, the report says %d: %v", len(restored), rep.Files, restored)
	}
}

// writeConfig writes a config file for a test.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const testConfig = `# restoresync test configuration
jobs = 3
compress = "lz4:2"
bwlimit = "50M"
block_size = "1MiB"

[account.nobody]
jobs = 2
post_hook = "true"
`

// Config precedence: global < [account.NAME] < flag, seen by 'config show'
// with each setting's source, and by a real restore's report.
func TestConfigPrecedence(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, testConfig)
	show := func(args ...string) map[string][2]string {
		r := mustRunIn(t, append([]string{"--config", cfg, "config", "show"}, args...)...)
		if !strings.Contains(r.stdout, "# config file: "+cfg) {
			t.Errorf("config show does not name the file:\n%s", r.stdout)
		}
		m := map[string][2]string{}
		for _, line := range strings.Split(r.stdout, "\n") {
			f := strings.Fields(line)
			if len(f) == 5 && f[1] == "=" && f[3] == "#" {
				m[f[0]] = [2]string{f[2], f[4]}
			}
		}
		return m
	}
	want := func(m map[string][2]string, key, value, source string) {
		t.Helper()
		if m[key] != [2]string{value, source} {
			t.Errorf("%s: %v, want %s from %s", key, m[key], value, source)
		}
	}
	global := show()
	want(global, "jobs", "3", cfg+":2")
	want(global, "compress", "lz4:2", cfg+":3")
	want(global, "bwlimit", "50MiB", cfg+":4")
	want(global, "method", "auto", "default")
	want(global, "post_hook", `""`, "default")
	want(global, "remote_path", "restoresync", "default") // the effective default, as the README's flag table says
	acct := show("--account", "nobody")
	want(acct, "jobs", "2", cfg+":8")
	want(acct, "post_hook", "true", cfg+":9")
	want(acct, "compress", "lz4:2", cfg+":3")
	flags := show("--account", "nobody", "-j", "5", "--bwlimit", "0")
	want(flags, "jobs", "5", "flag")
	want(flags, "bwlimit", "0", "flag")
	want(flags, "block_size", "1MiB", cfg+":5")

	// The settings reach the restore (local → local reports jobs as set).
	src := smallTree(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		jobs int
	}{{nil, 3}, {[]string{"--account", "nobody"}, 2}, {[]string{"--account", "nobody", "-j", "5"}, 5}} {
		args := append(append([]string{"--config", cfg, "restore", "--json", "--bwlimit", "0"}, tc.args...), src, filepath.Join(dir, strconv.Itoa(tc.jobs)))
		if rep := parseReport(t, mustRunIn(t, args...)); rep.Jobs != tc.jobs {
			t.Errorf("restore %v: jobs %d, want %d", tc.args, rep.Jobs, tc.jobs)
		}
	}
}

// Bad configuration files: clear errors naming the file, line and key, and
// exit 1, before anything is written.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, text, want string }{
		{"unknown key", "jobs = 2\n\n[account.alice]\njbos = 3\n", ":4: account.alice.jbos: unknown setting"},
		{"dashed key", "block-size = \"1M\"\n", ":1: block-size: unknown setting (did you mean block_size?)"},
		{"bad value", "compress = \"lz4\"\njobs = \"many\"\n", `:2: jobs: "many": must be auto or a number of streams, 1 to 256`},
		{"out of range", "# defaults\njobs = 0\n", `:2: jobs: 0: must be auto or 1 to 256`},
		{"bad boolean", "verify = \"yes\"\n", `:1: verify: "yes": must be true or false`},
		{"account out of range", "[account.nobody]\nblock_size = \"1K\"\n", `:2: account.nobody.block_size: 1KiB: must be at least 64KiB`},
		{"negative timeout", "timeout = -5\n", `:1: timeout: -5: must be 0 (none) or a number of seconds`},
		{"bad account value", "[account.nobody]\n\nmethod = \"scp\"\n", `:3: account.nobody.method: unknown method "scp"`},
		{"syntax", "jobs = 2\nmethod = raw\n", ":2: "},
		{"table", "[ssh]\nport = 22\n", ":1: ssh: unexpected table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeConfig(t, tc.text)
			dst := filepath.Join(t.TempDir(), "dst")
			r := runIn(t, "--config", cfg, "restore", "--account", "nobody", smallTree(t), dst)
			if r.code != exitUsage || !strings.Contains(r.stderr, cfg+tc.want) {
				t.Errorf("want exit 1 and %q:\n%s", cfg+tc.want, r)
			}
			if _, err := os.Lstat(dst); !os.IsNotExist(err) {
				t.Errorf("DST exists after a config error")
			}
		})
	}
	r := runIn(t, "--config", "/nonexistent/restoresync.toml", "config", "show")
	if r.code != exitUsage || !strings.Contains(r.stderr, "/nonexistent/restoresync.toml") {
		t.Errorf("missing --config file: want exit 1 naming it:\n%s", r)
	}
}

// The default file: $XDG_CONFIG_HOME/restoresync/config.toml.
func TestConfigXDG(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "restoresync"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "restoresync", "config.toml")
	if err := os.WriteFile(p, []byte("jobs = 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CONFIG_HOME", dir)
	r := mustRunIn(t, "config", "show")
	if !strings.Contains(r.stdout, "# config file: "+p) || !strings.Contains(r.stdout, p+":1") {
		t.Errorf("config show does not use $XDG_CONFIG_HOME's file:\n%s", r.stdout)
	}
}

// Completion scripts generate (bash's is valid bash), and every command's
// --help has examples.
func TestCompletionAndHelpExamples(t *testing.T) {
	t.Parallel()
	for _, sh := range []string{"bash", "zsh", "fish"} {
		r := mustRunIn(t, "completion", sh)
		if !strings.Contains(r.stdout, "restoresync") || len(r.stdout) < 500 {
			t.Errorf("completion %s: %d bytes:\n%.300s", sh, len(r.stdout), r.stdout)
		}
		if sh == "bash" {
			cmd := exec.Command("bash", "-n")
			cmd.Stdin = strings.NewReader(r.stdout)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("bash -n on the bash completion: %v\n%s", err, out)
			}
		}
	}
	root := newRootCmd()
	initCompletion(root)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() != "help" {
			path := strings.Fields(c.CommandPath())[1:]
			r := mustRunIn(t, append(path, "--help")...)
			if c.Example == "" || !strings.Contains(r.stdout, "Examples:") {
				t.Errorf("%q --help has no examples", c.CommandPath())
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// --bwlimit follows rsync's units: a bare number is KiB/s.
func TestBwlimitUnits(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "100": 100 << 10, "1.5": 1536, "50M": 50 << 20, "800K": 800 << 10,
		"1MiB": 1 << 20, "2MB": 2e6, "1G": 1 << 30, "4096B": 4096,
	} {
		var b bwLimit
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("--bwlimit %s = %d, %v; want %d", in, b, err, want)
		}
		var back bwLimit // String reads back
		if err := back.Set(b.String()); err != nil || back != b {
			t.Errorf("--bwlimit %s: String %q reads back as %d, %v", in, b.String(), back, err)
		}
	}
	for _, bad := range []string{"-1", "fast", "10X"} {
		var b bwLimit
		if err := b.Set(bad); err == nil {
			t.Errorf("--bwlimit %s: no error", bad)
		}
	}
}
