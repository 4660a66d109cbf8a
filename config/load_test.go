package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/config"
)

// settings are the keys the restore command accepts (cmd/restoresync's
// configKeys, as the README lists them); config itself knows none.
var settings = []string{
	"method", "jobs", "whole_file", "compress", "block_size", "read_buffer", "write_buffer",
	"numeric_ids", "chown", "usermap", "groupmap", "chmod", "keep_setid",
	"rsh", "remote_path", "identity", "known_hosts", "timeout", "contimeout", "verify",
	"no_xattrs", "no_acls", "no_sparse", "no_specials", "no_devices",
	"pre_hook", "post_hook", "bwlimit", "progress", "quiet", "verbose", "log_format",
}

// writeFile writes text as config.toml in a new temporary directory and
// returns its path.
// validList is the message of an unknown key's error with settings.
var validList = "unknown setting (valid: " + strings.Join(settings, ", ") + ")"

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// load is config.Load of text with the restore command's settings; it
// fails t on an error.
func load(t *testing.T, text string) (*config.File, string) {
	t.Helper()
	p := writeFile(t, text)
	f, err := config.Load(p, settings)
	if err != nil {
		t.Fatalf("Load:\n%s\n%v", text, err)
	}
	return f, p
}

// Every TOML type a setting may have decodes to the text a flag would
// take, with the file and the line it was set on; the global keys and each
// [account.NAME] section's keys are kept apart.
func TestLoadDecodesEachType(t *testing.T) {
	f, p := load(t, `# defaults for every restore
method = "auto"
jobs = 8
bwlimit = 1.5
verify = true
no_xattrs = false
chmod = ["D0755", "F0644"]
usermap = []
block_size = "16MiB"
timeout = 1e3
contimeout = -5

[account.bigshop]
jobs = 16
bwlimit = "0"
pre_hook = "/usr/local/sbin/site-maintenance on bigshop"

[account."odd name"]
quiet = true
`)
	if f.Path != p {
		t.Errorf("Path = %q, want %q", f.Path, p)
	}
	global := map[string]struct {
		values []string
		line   int
	}{
		"method":     {[]string{"auto"}, 2},
		"jobs":       {[]string{"8"}, 3},
		"bwlimit":    {[]string{"1.5"}, 4},
		"verify":     {[]string{"true"}, 5},
		"no_xattrs":  {[]string{"false"}, 6},
		"chmod":      {[]string{"D0755", "F0644"}, 7},
		"usermap":    {[]string{}, 8},
		"block_size": {[]string{"16MiB"}, 9},
		"timeout":    {[]string{"1000"}, 10},
		"contimeout": {[]string{"-5"}, 11},
	}
	if len(f.Global) != len(global) {
		t.Errorf("Global has %d keys, want %d: %v", len(f.Global), len(global), f.Global)
	}
	for k, want := range global {
		v, ok := f.Global[k]
		if !ok {
			t.Errorf("Global[%q] missing", k)
			continue
		}
		if v.Key != k || !slices.Equal(v.Values, want.values) || v.File != p || v.Line != want.line {
			t.Errorf("Global[%q] = %+v, want values %q at %s:%d", k, v, want.values, p, want.line)
		}
	}
	if v := f.Global["usermap"]; v.Values == nil || len(v.Values) != 0 {
		t.Errorf("an empty array: Values = %#v, want an empty list", v.Values)
	}
	if w := f.Global["jobs"].Where(); w != p+":3" {
		t.Errorf("Where() = %q, want %q", w, p+":3")
	}

	if len(f.Accounts) != 2 {
		t.Errorf("Accounts = %v, want bigshop and \"odd name\"", f.Accounts)
	}
	shop := f.Accounts["bigshop"]
	for k, want := range map[string]struct {
		value string
		line  int
	}{
		"jobs":     {"16", 14},
		"bwlimit":  {"0", 15},
		"pre_hook": {"/usr/local/sbin/site-maintenance on bigshop", 16},
	} {
		v := shop[k]
		if v.Key != k || !slices.Equal(v.Values, []string{want.value}) || v.File != p || v.Line != want.line {
			t.Errorf("Accounts[bigshop][%q] = %+v, want %q at line %d", k, v, want.value, want.line)
		}
	}
	if len(shop) != 3 {
		t.Errorf("[account.bigshop] has %d keys, want 3: %v", len(shop), shop)
	}
	if v := f.Accounts["odd name"]["quiet"]; !slices.Equal(v.Values, []string{"true"}) || v.Line != 19 {
		t.Errorf(`[account."odd name"] quiet = %+v, want true at line 19`, v)
	}
}

// Lines are those of the keys as written: a multi-line string's content is
// not mistaken for keys, and dotted keys and multi-line arrays count from
// their first line.
func TestLoadLines(t *testing.T) {
	f, _ := load(t, `post_hook = """
jobs = 3
"""
jobs = 4
chmod = [
  "D0755",
  "F0644",
]
pre_hook = '''
x = 1'''
account.alice.jobs = 2
verify = true
`)
	for k, line := range map[string]int{"post_hook": 1, "jobs": 4, "chmod": 5, "pre_hook": 9, "verify": 12} {
		if got := f.Global[k].Line; got != line {
			t.Errorf("%s: line %d, want %d", k, got, line)
		}
	}
	if v := f.Global["post_hook"]; !slices.Equal(v.Values, []string{"jobs = 3\n"}) {
		t.Errorf("post_hook = %q, want the multi-line string", v.Values)
	}
	if v := f.Global["jobs"]; !slices.Equal(v.Values, []string{"4"}) {
		t.Errorf("jobs = %q, want 4 (not the 3 inside post_hook's string)", v.Values)
	}
	if v := f.Accounts["alice"]["jobs"]; !slices.Equal(v.Values, []string{"2"}) || v.Line != 11 {
		t.Errorf("account.alice.jobs = %+v, want 2 at line 11", v)
	}
}

// A key that is not a setting, a value of another type, a table that is
// not [account.NAME] and a TOML syntax error are each an *Error naming the
// file, the line and the key concerned; nothing is returned with it.
func TestLoadRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		text string
		line int
		key  string
		msg  string // the whole of Error.Msg, or its start when it ends in "..."
	}{
		{"unknown global key", "jobs = 2\nexcludes = [\"cache\"]\n", 2, "excludes", validList},
		{"unknown account key", "jobs = 2\n\n[account.alice]\njobs = 3\nexcludes = \"x\"\n", 5, "account.alice.excludes", validList},
		{"misspelt key", "[account.alice]\njbos = 3\n", 2, "account.alice.jbos", validList},
		{"dashes for underscores", "block-size = \"1MiB\"\n", 1, "block-size", "unknown setting (did you mean block_size?)"},
		{"a flag's name that is not a setting", "account = \"alice\"\n", 1, "account", "must be a table of [account.NAME] sections"},
		{"global table", "[restore]\njobs = 2\n", 1, "restore", "unexpected table (sections are [account.NAME])"},
		{"table in an account", "[account.alice.paths]\njobs = 2\n", 1, "account.alice.paths", "unexpected table (sections are [account.NAME])"},
		{"inline table value", "jobs = 1\nchmod = { dirs = \"0755\" }\n", 2, "chmod", "unexpected table (sections are [account.NAME])"},
		{"account not a section", "[account]\nalice = 3\n", 2, "account.alice", "must be a [account.alice] section"},
		// keyLines reads only [table] headers, so an [[array]] header's line is
		// not known (0): the error still names the file and the key.
		{"array of account tables", "[[account.alice]]\njobs = 2\n", 0, "account.alice", "must be a [account.alice] section"},
		{"array of numbers", "chmod = [1, 2]\n", 1, "chmod", "an array may hold only strings, not int64"},
		{"date", "timeout = 2024-05-05\n", 1, "timeout", "unsupported value type time.Time"},
		// TOML syntax errors: the toml package's message, at the line and key
		// it reports.
		{"syntax error", "jobs = 2\nmethod = \n", 2, "method", "expected value ..."},
		{"unterminated string", "method = \"auto\n", 1, "method", "strings cannot contain newlines..."},
		{"key set twice", "jobs = 1\njobs = 2\n", 2, "jobs", "Key 'jobs' has already been defined..."},
		{"section twice", "[account.a]\n[account.a]\n", 2, "account", "Key 'account.a' has already been defined..."},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeFile(t, c.text)
			f, err := config.Load(p, settings)
			if f != nil {
				t.Errorf("Load returned a File with the error: %+v", f)
			}
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Load = %v (%T), want a *config.Error", err, err)
			}
			if ce.File != p || ce.Line != c.line || (c.key != "" && ce.Key != c.key) {
				t.Errorf("error at %s:%d key %q, want %s:%d key %q (%v)", ce.File, ce.Line, ce.Key, p, c.line, c.key, err)
			}
			if prefix, ok := strings.CutSuffix(c.msg, "..."); ok {
				if !strings.HasPrefix(ce.Msg, prefix) || ce.Msg == "" {
					t.Errorf("Msg = %q, want it to start with %q", ce.Msg, prefix)
				}
			} else if ce.Msg != c.msg {
				t.Errorf("Msg = %q, want %q", ce.Msg, c.msg)
			}
			if c.key != "" {
				want := p + ":" + strconv.Itoa(c.line) + ": " + c.key + ": " + ce.Msg
				if c.line == 0 {
					want = p + ": " + c.key + ": " + ce.Msg // no ":0"
				}
				if err.Error() != want {
					t.Errorf("Error() = %q, want %q", err, want)
				}
			}
		})
	}
}

// The keys the caller gives decide what a setting is: the same file loads
// with a caller that knows the key, and an unknown key's error lists the
// valid ones.
func TestLoadKeysDecide(t *testing.T) {
	p := writeFile(t, "[account.alice]\nexclude = [\"cache\"]\n")
	f, err := config.Load(p, []string{"exclude"})
	if err != nil {
		t.Fatal(err)
	}
	if v := f.Accounts["alice"]["exclude"]; !slices.Equal(v.Values, []string{"cache"}) {
		t.Errorf("exclude = %+v", v)
	}
	_, err = config.Load(p, []string{"include", "jobs"})
	if want := p + ":2: account.alice.exclude: unknown setting (valid: include, jobs)"; err == nil || err.Error() != want {
		t.Errorf("Load with other keys = %v, want %q", err, want)
	}
}

// [account.NAME] sections describe accounts: src, exclude, include,
// ssh_config, hooks, jobs, compress and bwlimit; a global value's
// {account} is the account's name in Settings(NAME), as written without
// one, and AccountNames lists the sections.
func TestAccountSectionsDescribeAccounts(t *testing.T) {
	keys := append(slices.Clone(settings), "src", "include", "exclude", "ssh_config")
	p := writeFile(t, `src = "backup:/snapshots/daily.0/home/{account}"
post_hook = "/usr/local/sbin/reload {account}"
jobs = 4

[account.carol]
src = "old-backup:/home/carol"
exclude = ["cache/", "*.log"]
include = ["*.php"]
ssh_config = "/etc/restoresync/ssh_config"
pre_hook = "maint on carol"
compress = "lz4"
bwlimit = "10M"
jobs = 2

[account.bob]
`)
	f, err := config.Load(p, keys)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.AccountNames(); !slices.Equal(got, []string{"bob", "carol"}) {
		t.Errorf("AccountNames = %q, want bob, carol", got)
	}
	for _, c := range []struct {
		account, key string
		want         []string
		line         int
	}{
		{"bob", "src", []string{"backup:/snapshots/daily.0/home/bob"}, 1},
		{"bob", "post_hook", []string{"/usr/local/sbin/reload bob"}, 2},
		{"bob", "jobs", []string{"4"}, 3},
		{"alice", "src", []string{"backup:/snapshots/daily.0/home/alice"}, 1},
		{"", "src", []string{"backup:/snapshots/daily.0/home/{account}"}, 1},
		{"carol", "src", []string{"old-backup:/home/carol"}, 6},
		{"carol", "exclude", []string{"cache/", "*.log"}, 7},
		{"carol", "include", []string{"*.php"}, 8},
		{"carol", "ssh_config", []string{"/etc/restoresync/ssh_config"}, 9},
		{"carol", "pre_hook", []string{"maint on carol"}, 10},
		{"carol", "compress", []string{"lz4"}, 11},
		{"carol", "bwlimit", []string{"10M"}, 12},
		{"carol", "jobs", []string{"2"}, 13},
		{"carol", "post_hook", []string{"/usr/local/sbin/reload carol"}, 2},
	} {
		v, ok := f.Settings(c.account)[c.key]
		if !ok || !slices.Equal(v.Values, c.want) || v.Line != c.line {
			t.Errorf("Settings(%q)[%s] = %+v (set: %v), want %q at line %d", c.account, c.key, v, ok, c.want, c.line)
		}
	}
	// The file's own values are not changed by an account's expansion.
	if v := f.Global["src"]; v.Values[0] != "backup:/snapshots/daily.0/home/{account}" {
		t.Errorf("Global src = %q after Settings", v.Values)
	}
}

// No file ("") is an empty configuration; a file that cannot be read is an
// error wrapping the file system's, not an *Error.
func TestLoadNoFile(t *testing.T) {
	f, err := config.Load("", settings)
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != "" || f.Global == nil || len(f.Global) != 0 || f.Accounts == nil || len(f.Accounts) != 0 {
		t.Errorf("Load(\"\") = %+v, want an empty File with empty maps", f)
	}
	if s := f.Settings("alice"); s == nil || len(s) != 0 {
		t.Errorf("Settings of an empty File = %v", s)
	}

	missing := filepath.Join(t.TempDir(), "missing.toml")
	_, err = config.Load(missing, settings)
	var ce *config.Error
	if !errors.Is(err, os.ErrNotExist) || errors.As(err, &ce) || !strings.HasPrefix(err.Error(), "config file: ") || !strings.Contains(err.Error(), missing) {
		t.Errorf("Load(missing) = %v, want \"config file: ...\" naming it and wrapping ErrNotExist", err)
	}
}

// Settings gives the global settings, the account's section overriding
// them key by key; an account without a section, and no account, get the
// global ones. The result is a copy.
func TestSettings(t *testing.T) {
	f, p := load(t, `jobs = 8
compress = "zstd:3"

[account.bigshop]
jobs = 16
bwlimit = "0"

[account.quiet]
`)
	got := func(m map[string]config.Value) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = strings.Join(v.Values, ",") + "@" + strings.TrimPrefix(v.Where(), p)
		}
		return out
	}
	for _, c := range []struct {
		account string
		want    map[string]string
	}{
		{"bigshop", map[string]string{"jobs": "16@:5", "compress": "zstd:3@:2", "bwlimit": "0@:6"}},
		{"quiet", map[string]string{"jobs": "8@:1", "compress": "zstd:3@:2"}},
		{"nobody", map[string]string{"jobs": "8@:1", "compress": "zstd:3@:2"}},
		{"", map[string]string{"jobs": "8@:1", "compress": "zstd:3@:2"}},
	} {
		if s := got(f.Settings(c.account)); !reflect.DeepEqual(s, c.want) {
			t.Errorf("Settings(%q) = %v, want %v", c.account, s, c.want)
		}
	}
	if _, ok := f.Accounts["quiet"]; !ok {
		t.Errorf("an empty [account.quiet] section is not kept: %v", f.Accounts)
	}
	s := f.Settings("bigshop")
	delete(s, "jobs")
	s["compress"] = config.Value{Key: "compress", Values: []string{"none"}}
	if f.Global["jobs"].Values[0] != "8" || f.Accounts["bigshop"]["jobs"].Values[0] != "16" || f.Global["compress"].Values[0] != "zstd:3" {
		t.Errorf("changing Settings' result changed the File: %+v", f)
	}
}
