package transfer

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gokrazy/rsync/rsyncclient"

	"github.com/restoresync/restoresync/internal/testenv"
)

func TestCheckRsyncArgs(t *testing.T) {
	for _, ok := range [][]string{nil, {"-rtp"}, {"-r", "-t"}, {"-rltpogD"}} {
		if err := CheckRsyncArgs(ok); err != nil {
			t.Errorf("CheckRsyncArgs(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range [][]string{{"-e"}, {"-rtpe.iLsfx"}, {"--rsh=sh"}, {"--server"}, {"-f", "+ x"}, {"-"}, {""}, {"."}, {"/etc"}, {"-T/tmp"}, {"--remove-source-files"}} {
		if err := CheckRsyncArgs(bad); !errors.Is(err, ErrProtocol) {
			t.Errorf("CheckRsyncArgs(%q) = %v, want an ErrProtocol", bad, err)
		}
	}
}

// The agent's rsync-sender role serves the rsync protocol to gokrazy's
// client, with the system rsync and with the in-process gokrazy sender.
func TestRsyncSenderRole(t *testing.T) {
	testenv.RequireTool(t, "rsync")
	src := t.TempDir()
	files := map[string]string{"a.txt": "alpha\n", "dir/b.bin": strings.Repeat("beta", 50000), "dir/sub/c": "", "odd name\n": "x"}
	for name, data := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	for _, bin := range []string{"rsync", ""} {
		name := map[string]string{"rsync": "system", "": "gokrazy"}[bin]
		t.Run(name, func(t *testing.T) {
			old := rsyncBinary
			rsyncBinary = bin
			t.Cleanup(func() { rsyncBinary = old })
			// Only the rsync-sender role runs rsync: not parallel, rsyncBinary is shared.
			root := filepath.Dir(src)
			d := PipeDialer{Config: ServerConfig{Root: root, ReadOnly: true}}
			rs, err := DialRsyncSender(t.Context(), d, Hello{Path: filepath.Base(src), RsyncArgs: []string{"-rtp"}}, Timeouts{})
			if err != nil {
				t.Fatal(err)
			}
			defer rs.Close()
			client, err := rsyncclient.New([]string{"-rtp"}, rsyncclient.DontRestrict(), rsyncclient.WithStderr(testWriter{t}))
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(t.TempDir(), "dst")
			if _, err := client.Run(t.Context(), rs, []string{dst}); err != nil {
				t.Fatalf("rsync client: %v (stderr %q)", err, rs.Stderr())
			}
			for name, data := range files {
				got, err := os.ReadFile(filepath.Join(dst, name))
				if err != nil || string(got) != data {
					t.Errorf("%s: got %d bytes (%v), want %d", name, len(got), err, len(data))
				}
			}
			if sent, recv := rs.WireBytes(); sent <= 0 || recv < 200000 {
				t.Errorf("WireBytes = %d sent, %d received", sent, recv)
			}
		})
	}
}

// A client cannot make the agent's rsync run options beyond the whitelist,
// nor leave the served root.
func TestRsyncSenderRefuses(t *testing.T) {
	root := t.TempDir()
	d := PipeDialer{Config: ServerConfig{Root: root, ReadOnly: true}}
	if _, err := DialRsyncSender(t.Context(), d, Hello{Path: ".", RsyncArgs: []string{"--remove-source-files"}}, Timeouts{}); !errors.Is(err, ErrProtocol) {
		t.Errorf("bad option: got %v, want ErrProtocol", err)
	}
	// The agent itself checks the options (a client could skip the check):
	// it ends the stream after the handshake, saying why.
	s := PipeStream(t.Context(), d.Config)
	defer s.Close()
	if err := writeHandshake(s, Hello{Proto: ProtocolVersion, Role: RoleRsyncSender, Path: ".", Compression: "none", RsyncArgs: []string{"-e.sh"}}); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(s)
	if !strings.Contains(s.Stderr(), "not allowed") || len(rest) > 200 {
		t.Errorf("agent given -e: stderr %q, %d bytes after the handshake", s.Stderr(), len(rest))
	}
	_, err := DialRsyncSender(t.Context(), d, Hello{Path: "../..", RsyncArgs: []string{"-r"}}, Timeouts{})
	var re *RemoteError
	if !errors.As(err, &re) {
		t.Errorf("path outside the root: got %v, want a RemoteError", err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("gokrazy: %s", strings.TrimSpace(string(p)))
	return len(p), nil
}

func (testWriter) Close() error { return nil }
