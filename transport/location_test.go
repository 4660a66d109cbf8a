package transport

import (
	"errors"
	"strings"
	"testing"
)

func TestParseLocation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want Location
	}{
		// Local paths: no colon before the first slash.
		{"backup", Location{Path: "backup"}},
		{"/srv/www", Location{Path: "/srv/www"}},
		{"./a:b", Location{Path: "./a:b"}},
		{"/a:b", Location{Path: "/a:b"}},
		{"dir/x:y", Location{Path: "dir/x:y"}},
		{"[::1]", Location{Path: "[::1]"}},
		{"[::1]/x:y", Location{Path: "[::1]/x:y"}},
		{"[::1:path", Location{Path: "[::1:path"}}, // no "]": local, as in rsync
		// rsync-style remote.
		{"host:alice", Location{Host: "host", Path: "alice"}},
		{"host:", Location{Host: "host"}},
		{"host:/var/www/", Location{Host: "host", Path: "/var/www/"}},
		{"bob@host:dir/a:b", Location{User: "bob", Host: "host", Path: "dir/a:b"}},
		{"a@b@host:p", Location{User: "a@b", Host: "host", Path: "p"}},
		{"host:with space", Location{Host: "host", Path: "with space"}},
		{"[::1]:path", Location{Host: "::1", Path: "path"}},
		{"root@[fe80::1%eth0]:/x", Location{User: "root", Host: "fe80::1%eth0", Path: "/x"}},
		{"[::1]:", Location{Host: "::1"}},
		// ssh:// URLs keep the path after the host, slash included.
		{"ssh://host/alice", Location{Host: "host", Path: "/alice"}},
		{"ssh://host", Location{Host: "host"}},
		{"ssh://host/", Location{Host: "host", Path: "/"}},
		{"ssh://u@host:2222/srv", Location{User: "u", Host: "host", Port: 2222, Path: "/srv"}},
		{"SSH://host:22/a%20b?c#d", Location{Host: "host", Port: 22, Path: "/a%20b?c#d"}},
		{"ssh://[::1]:2222/p", Location{Host: "::1", Port: 2222, Path: "/p"}},
		{"ssh://[::1]/p", Location{Host: "::1", Path: "/p"}},
		{"ssh://u@[2001:db8::1]", Location{User: "u", Host: "2001:db8::1"}},
	}
	for _, tt := range tests {
		got, err := ParseLocation(tt.in)
		if err != nil {
			t.Errorf("ParseLocation(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseLocation(%q) = %#v, want %#v", tt.in, got, tt.want)
		}
		if got.Remote() != (tt.want.Host != "") {
			t.Errorf("ParseLocation(%q).Remote() = %v", tt.in, got.Remote())
		}
	}
}

func TestParseLocationErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		daemon  bool
		errPart string
	}{
		{"", false, "empty"},
		{"host::module", true, "daemon"},
		{"host::", true, "daemon"},
		{"u@host::mod/x", true, "daemon"},
		{"[::1]::mod", true, "daemon"},
		{"rsync://host/module", true, "daemon"},
		{"RSYNC://host", true, "daemon"},
		{":path", false, "missing host"},
		{"u@:path", false, "missing host"},
		{"@host:path", false, "empty user"},
		{"-oProxyCommand=x:path", false, "starts with '-'"},
		{"ssh://-oFoo/x", false, "starts with '-'"},
		{"[]]:0", false, "bad host"},
		{"ssh://u:pw@host/p", false, "passwords"},
		{"ssh://[@0", false, "bad user"},
		{"my host:p", false, "bad host"},
		{"u\n@h:p", false, "bad user"},
		{"a[b]:p", false, "bad host"},
		{"ssh://", false, "missing host"},
		{"ssh:///path", false, "missing host"},
		{"ssh://host:/p", false, "bad port"},
		{"ssh://host:0/p", false, "bad port"},
		{"ssh://host:65536", false, "bad port"},
		{"ssh://host:22x/p", false, "bad port"},
		{"ssh://::1/p", false, "brackets"},
		{"sftp://host/p", false, "unsupported URL scheme"},
		{"http://host/p", false, "unsupported URL scheme"},
	}
	for _, tt := range tests {
		got, err := ParseLocation(tt.in)
		if err == nil {
			t.Errorf("ParseLocation(%q) = %#v, want error", tt.in, got)
			continue
		}
		if errors.Is(err, ErrDaemonSyntax) != tt.daemon {
			t.Errorf("ParseLocation(%q): errors.Is(ErrDaemonSyntax) = %v, want %v (%v)", tt.in, !tt.daemon, tt.daemon, err)
		}
		if !strings.Contains(err.Error(), tt.errPart) {
			t.Errorf("ParseLocation(%q) error %q does not mention %q", tt.in, err, tt.errPart)
		}
	}
}

func TestLocationStringLocalColon(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"a:b/c", "ssh://x", "h:"} {
		s := Location{Path: p}.String()
		if s != "./"+p {
			t.Errorf("Location{Path: %q}.String() = %q, want %q", p, s, "./"+p)
		}
		if back, err := ParseLocation(s); err != nil || back.Remote() {
			t.Errorf("ParseLocation(%q) = %#v, %v; want a local path", s, back, err)
		}
	}
}

func TestLocationStringRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		loc  Location
		want string
	}{
		{Location{Path: "/a:b/c"}, "/a:b/c"},
		{Location{Path: "./a:b"}, "./a:b"},
		{Location{Host: "h", Path: "rel"}, "h:rel"},
		{Location{Host: "h"}, "h:"},
		{Location{User: "u", Host: "h", Path: "/abs"}, "u@h:/abs"},
		{Location{Host: "::1", Path: "p"}, "[::1]:p"},
		{Location{User: "u", Host: "h", Port: 2222, Path: "/srv"}, "ssh://u@h:2222/srv"},
		{Location{Host: "::1", Port: 2222, Path: "/p"}, "ssh://[::1]:2222/p"},
		{Location{Host: "h", Port: 2222}, "ssh://h:2222"},
		{Location{Host: "A", Path: "//"}, "ssh://A//"},
	}
	for _, tt := range tests {
		s := tt.loc.String()
		if s != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.loc, s, tt.want)
			continue
		}
		back, err := ParseLocation(s)
		if err != nil {
			t.Errorf("ParseLocation(%q): %v", s, err)
		} else if back != tt.loc {
			t.Errorf("ParseLocation(%q) = %#v, want %#v", s, back, tt.loc)
		}
	}
}

func FuzzParseLocation(f *testing.F) {
	for _, s := range []string{"host:p", "ssh://u@[::1]:22/p", "a/b:c", "[::1]:x", "h::m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		loc, err := ParseLocation(s)
		if err != nil {
			return
		}
		if loc.Remote() && (loc.Host == "" || strings.HasPrefix(loc.Host, "-")) {
			t.Fatalf("ParseLocation(%q) = %#v: bad host", s, loc)
		}
		if !loc.Remote() && loc.Path != s {
			t.Fatalf("ParseLocation(%q) = %#v: local path changed", s, loc)
		}
		// Whatever parses must format and parse back to the same value,
		// except relative paths with a port, which String cannot spell.
		if loc.Port != 0 && loc.Path != "" && !strings.HasPrefix(loc.Path, "/") {
			return
		}
		back, err := ParseLocation(loc.String())
		if !loc.Remote() && err == nil && back.Path == "./"+loc.Path {
			back.Path = loc.Path // String adds "./" to keep "a:b" local
		}
		if err != nil || back != loc {
			t.Fatalf("round trip %q -> %#v -> %q -> %#v, %v", s, loc, loc.String(), back, err)
		}
	})
}
