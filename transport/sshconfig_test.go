package transport

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testsshd"
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

// HostKeyAlias names the known_hosts entry as OpenSSH reads it: a plain
// name, or "[host]:port" for an entry recorded with its port; an alias
// that known_hosts lacks is refused as an unknown host key.
func TestSSHConfigHostKeyAlias(t *testing.T) {
	t.Parallel()
	srv := testsshd.Start(t)
	line, err := os.ReadFile(srv.KnownHostsFile)
	if err != nil {
		t.Fatal(err)
	}
	entry, key, _ := strings.Cut(strings.TrimSpace(string(line)), " ")
	for _, tc := range []struct {
		name, alias, knownAs string
		ok                   bool
	}{
		{"with-port", entry, entry, true},
		{"plain", "backup-alias", "backup-alias", true},
		{"unknown", "other-alias", "backup-alias", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			known := filepath.Join(dir, "known_hosts")
			if err := os.WriteFile(known, []byte(tc.knownAs+" "+key+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := filepath.Join(dir, "ssh_config")
			text := fmt.Sprintf("Host testhost\n\tHostName %s\n\tPort %d\n\tUser %s\n\tIdentityFile %s\n\tIdentitiesOnly yes\n\tHostKeyAlias %s\n\tUserKnownHostsFile %s\n\tGlobalKnownHostsFile /dev/null\n",
				srv.Host, srv.Port, srv.User, srv.IdentityFile, tc.alias, known)
			if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			d, err := NewSSHDialer(Location{Host: "testhost"}, SSHOptions{ConfigFile: cfg, RemotePath: echoAgent(t)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			s, err := d.Dial(ctx)
			if tc.ok {
				if err != nil {
					t.Fatalf("HostKeyAlias %s: %v", tc.alias, err)
				}
				checkEcho(t, s, 1024)
				s.Close()
				return
			}
			if err == nil {
				s.Close()
				t.Fatalf("HostKeyAlias %s, known as %s only: connected", tc.alias, tc.knownAs)
			}
			if !errors.Is(err, ErrHostKey) {
				t.Errorf("HostKeyAlias %s, known as %s only: %v; want ErrHostKey", tc.alias, tc.knownAs, err)
			}
		})
	}
}
