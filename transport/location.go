package transport

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"unicode"
)

// Location is one end of a restore: a local path, or a path on a host
// reached over SSH. The zero Port means "not given" (ssh_config or 22).
// A Location is a plain value and safe to copy and share.
type Location struct {
	// User is the remote login name; "" means not given (ssh_config, then
	// the local user name).
	User string
	// Host is the remote host name or IP address, without brackets for
	// IPv6; "" for a local path.
	Host string
	// Port is the TCP port; 0 means not given.
	Port int
	// Path is the path on the host, as given: relative paths are relative
	// to the remote home directory (or the server's root for
	// "restoresync listen"), and "" means that directory itself.
	Path string
}

// Remote reports whether l names a path on another host.
func (l Location) Remote() bool { return l.Host != "" }

// String formats l in the syntax ParseLocation accepts: PATH (with "./"
// added when it would otherwise read as remote), [user@]host:PATH, or
// ssh://[user@]host[:port]/PATH when a port is set. A relative Path with a
// port cannot be spelled exactly and is shown with a leading "/" (display
// only).
func (l Location) String() string {
	if !l.Remote() {
		if !strings.HasPrefix(l.Path, "/") && (looksLikeURL(l.Path) || hostSpecEnd(l.Path) >= 0) {
			// "a:b" would read as host "a"; "./a:b" is the same file.
			return "./" + l.Path
		}
		return l.Path
	}
	if l.Port == 0 {
		if s := l.rsyncString(); !looksLikeURL(s) {
			return s
		}
		// "h://x" would read as a URL; ssh:// spells it exactly, since
		// the path starts with "/" here.
	}
	var b strings.Builder
	b.WriteString("ssh://")
	if l.User != "" {
		b.WriteString(l.User)
		b.WriteByte('@')
	}
	switch {
	case l.Port != 0:
		b.WriteString(net.JoinHostPort(l.Host, strconv.Itoa(l.Port)))
	case strings.Contains(l.Host, ":"):
		b.WriteString("[" + l.Host + "]")
	default:
		b.WriteString(l.Host)
	}
	if l.Path != "" && !strings.HasPrefix(l.Path, "/") {
		b.WriteByte('/')
	}
	b.WriteString(l.Path)
	return b.String()
}

// rsyncString formats a remote l as [user@]host:PATH.
func (l Location) rsyncString() string {
	var b strings.Builder
	if l.User != "" {
		b.WriteString(l.User)
		b.WriteByte('@')
	}
	if strings.Contains(l.Host, ":") {
		b.WriteString("[" + l.Host + "]")
	} else {
		b.WriteString(l.Host)
	}
	b.WriteByte(':')
	b.WriteString(l.Path)
	return b.String()
}

// looksLikeURL reports whether s starts with "scheme://".
func looksLikeURL(s string) bool {
	_, _, ok := urlScheme(s)
	return ok
}

// ParseLocation parses a command-line location the way rsync does:
//
//	PATH                        local path
//	[user@]host:PATH            remote; "host:" is the remote home directory
//	[user@][v6addr]:PATH        remote over IPv6
//	ssh://[user@]host[:port]/PATH  remote; PATH keeps its leading "/"
//
// A string is remote when it has a colon before its first slash. The path is
// kept byte for byte (no percent-decoding in ssh:// URLs). Errors: an empty
// string, a missing host, a bad port, an unsupported URL scheme, and rsync
// daemon syntax ("host::module", "rsync://"), which wraps ErrDaemonSyntax.
func ParseLocation(s string) (Location, error) {
	if s == "" {
		return Location{}, errors.New("empty location")
	}
	if scheme, rest, ok := urlScheme(s); ok {
		switch scheme {
		case "ssh":
			return parseSSHURL(s, rest)
		case "rsync":
			return Location{}, fmt.Errorf("location %q: %w", s, ErrDaemonSyntax)
		default:
			return Location{}, fmt.Errorf("location %q: unsupported URL scheme %q (use ssh:// or [user@]host:path)", s, scheme)
		}
	}
	hostEnd := hostSpecEnd(s)
	if hostEnd < 0 {
		return Location{Path: s}, nil
	}
	loc, err := parseUserHost(s[:hostEnd])
	if err != nil {
		return Location{}, fmt.Errorf("location %q: %w", s, err)
	}
	loc.Path = s[hostEnd+1:]
	if strings.HasPrefix(loc.Path, ":") {
		return Location{}, fmt.Errorf("location %q: %w", s, ErrDaemonSyntax)
	}
	return loc, nil
}

// urlScheme reports the lower-cased scheme of s when s starts with
// "scheme://", and the text after "://".
func urlScheme(s string) (scheme, rest string, ok bool) {
	i := strings.Index(s, "://")
	if i <= 0 {
		return "", "", false
	}
	for j, c := range s[:i] {
		alpha := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !alpha && (j == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return "", "", false
		}
	}
	return strings.ToLower(s[:i]), s[i+3:], true
}

// hostSpecEnd returns the index of the colon ending the [user@]host part of
// s, or -1 when s is a local path (a slash comes first, or no colon). Colons
// inside a bracketed IPv6 address do not count.
func hostSpecEnd(s string) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '/':
			return -1
		case ':':
			return i
		case '[':
			j := strings.IndexAny(s[i:], "]/")
			if j < 0 || s[i+j] == '/' {
				return -1
			}
			i += j
		}
	}
	return -1
}

// parseUserHost splits "[user@]host" or "[user@][v6addr]". The user is
// everything before the last "@", as in rsync.
func parseUserHost(s string) (Location, error) {
	var loc Location
	if at := strings.LastIndexByte(s, '@'); at >= 0 {
		loc.User, s = s[:at], s[at+1:]
		if loc.User == "" {
			return Location{}, errors.New("empty user name before @")
		}
		if strings.Contains(loc.User, ":") {
			return Location{}, fmt.Errorf("user %q contains ':' (passwords are not supported)", loc.User)
		}
		if strings.ContainsFunc(loc.User, badNameRune) || strings.ContainsAny(loc.User, "/[]") {
			return Location{}, fmt.Errorf("bad user name %q", loc.User)
		}
	}
	if strings.HasPrefix(s, "[") {
		if !strings.HasSuffix(s, "]") {
			return Location{}, fmt.Errorf("bad bracketed host %q", s)
		}
		s = s[1 : len(s)-1]
	}
	if strings.ContainsAny(s, "[]/") || strings.ContainsFunc(s, badNameRune) {
		return Location{}, fmt.Errorf("bad host %q", s)
	}
	if s == "" {
		return Location{}, errors.New("missing host name")
	}
	if strings.HasPrefix(s, "-") {
		// Would be taken as an option by ssh and other -e programs.
		return Location{}, fmt.Errorf("host %q starts with '-'", s)
	}
	loc.Host = s
	return loc, nil
}

// badNameRune reports runes that no user or host name holds: spaces and
// control characters, which would also garble an ssh command line.
func badNameRune(r rune) bool {
	return r <= ' ' || r == 0x7f || unicode.IsSpace(r) || unicode.IsControl(r)
}

// parseSSHURL parses the part after "ssh://": [user@]host[:port][/path].
func parseSSHURL(s, rest string) (Location, error) {
	authority, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		authority, path = rest[:i], rest[i:]
	}
	hostPort := authority
	userPart := ""
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		userPart, hostPort = authority[:at+1], authority[at+1:]
	}
	port := 0
	if i := strings.LastIndexByte(hostPort, ':'); i >= 0 && !strings.HasSuffix(hostPort, "]") {
		p, err := strconv.Atoi(hostPort[i+1:])
		if err != nil || p < 1 || p > 65535 {
			return Location{}, fmt.Errorf("location %q: bad port %q", s, hostPort[i+1:])
		}
		port, hostPort = p, hostPort[:i]
	}
	if !strings.HasPrefix(hostPort, "[") && strings.Contains(hostPort, ":") {
		return Location{}, fmt.Errorf("location %q: IPv6 address must be in brackets", s)
	}
	loc, err := parseUserHost(userPart + hostPort)
	if err != nil {
		return Location{}, fmt.Errorf("location %q: %w", s, err)
	}
	loc.Port = port
	loc.Path = path
	return loc, nil
}
