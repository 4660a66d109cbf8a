package transport

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ServerAliveInterval and ServerAliveCountMax from ssh_config set the
// built-in client's keepalives; unset, the defaults hold.
func TestSSHConfigServerAlive(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	conf := "Host alive\n  ServerAliveInterval 2\n  ServerAliveCountMax 5\nHost off\n  ServerAliveInterval 0\nHost bad\n  ServerAliveInterval soon\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	kh := filepath.Join(dir, "known_hosts")
	os.WriteFile(kh, nil, 0o600)
	for _, tc := range []struct {
		host      string
		interval  time.Duration
		countMax  int
		wantError bool
	}{
		{"alive", 2 * time.Second, 5, false},
		{"off", -1, keepaliveMaxMissed, false},
		{"other", defaultKeepalive, keepaliveMaxMissed, false},
		{"bad", 0, 0, true},
	} {
		d, err := NewSSHDialer(Location{Host: tc.host, Path: "/x"}, SSHOptions{ConfigFile: cfg, KnownHosts: []string{kh}})
		if tc.wantError {
			if err == nil {
				t.Errorf("%s: no error for a bad ServerAliveInterval", tc.host)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.host, err)
		}
		sd := d.(*sshDialer)
		if sd.keepalive != tc.interval || sd.keepaliveMax != tc.countMax {
			t.Errorf("%s: keepalive every %v, %d missed; want %v, %d", tc.host, sd.keepalive, sd.keepaliveMax, tc.interval, tc.countMax)
		}
	}
}
