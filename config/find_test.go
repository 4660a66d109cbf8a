package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/config"
)

// UserFile is under an absolute $XDG_CONFIG_HOME, else under ~/.config: a
// relative XDG_CONFIG_HOME is ignored, as the XDG spec says.
func TestUserFile(t *testing.T) {
	home := t.TempDir()
	xdg := t.TempDir()
	for _, c := range []struct{ xdg, want string }{
		{xdg, filepath.Join(xdg, "restoresync", "config.toml")},
		{"", filepath.Join(home, ".config", "restoresync", "config.toml")},
		{"relative/dir", filepath.Join(home, ".config", "restoresync", "config.toml")},
	} {
		t.Setenv("HOME", home)
		t.Setenv("XDG_CONFIG_HOME", c.xdg)
		if got := config.UserFile(); got != c.want {
			t.Errorf("XDG_CONFIG_HOME=%q: UserFile() = %q, want %q", c.xdg, got, c.want)
		}
	}
	// No home and no XDG_CONFIG_HOME: no user file.
	t.Setenv("HOME", "")
	t.Setenv("XDG_CONFIG_HOME", "")
	if got := config.UserFile(); got != "" {
		t.Errorf("without HOME: UserFile() = %q, want \"\"", got)
	}
}

// Find: "none" is no file; a named file is used when it exists and is an
// error when it does not; otherwise the user's file when it exists, else
// the system's when it exists, else none.
func TestFind(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", xdg)
	// The system file is this host's: what Find says of it depends on
	// whether it exists here.
	system := ""
	if _, err := os.Stat(config.SystemFile); err == nil {
		system = config.SystemFile
	}

	if p, err := config.Find(config.None); p != "" || err != nil {
		t.Errorf("Find(%q) = %q, %v; want no file", config.None, p, err)
	}
	if p, err := config.Find(""); p != system || err != nil {
		t.Errorf("no user file: Find(\"\") = %q, %v; want %q", p, err, system)
	}

	user := filepath.Join(xdg, "restoresync", "config.toml")
	if err := os.MkdirAll(filepath.Dir(user), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(user, []byte("jobs = 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if p, err := config.Find(""); p != user || err != nil {
		t.Errorf("Find(\"\") = %q, %v; want the user's file %q", p, err, user)
	}

	named := writeFile(t, "jobs = 3\n")
	if p, err := config.Find(named); p != named || err != nil {
		t.Errorf("Find(%q) = %q, %v; want it", named, p, err)
	}
	missing := filepath.Join(t.TempDir(), "nope.toml")
	p, err := config.Find(missing)
	if p != "" || !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "config file: ") || !strings.Contains(err.Error(), missing) {
		t.Errorf("Find(%q) = %q, %v; want \"config file: ...\" naming it and wrapping ErrNotExist", missing, p, err)
	}
}

// Error says FILE:LINE: KEY: MSG, leaving out the line when it is not
// known (0) and the key when there is none.
func TestErrorText(t *testing.T) {
	for _, c := range []struct {
		err  config.Error
		want string
	}{
		{config.Error{File: "/etc/restoresync/config.toml", Line: 12, Key: "account.alice.jbos", Msg: "unknown setting"},
			"/etc/restoresync/config.toml:12: account.alice.jbos: unknown setting"},
		{config.Error{File: "c.toml", Key: "jobs", Msg: "0: must be 1 to 256"}, "c.toml: jobs: 0: must be 1 to 256"},
		{config.Error{File: "c.toml", Line: 3, Msg: "bad"}, "c.toml:3: bad"},
		{config.Error{File: "c.toml", Msg: "bad"}, "c.toml: bad"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("%+v: Error() = %q, want %q", c.err, got, c.want)
		}
	}
}
