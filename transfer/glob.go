package transfer

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/restoresync/restoresync/transport"
)

// RoleGlob asks the server to expand Hello.Path, a pattern, into the
// paths that match it (helloReply.Matches), and nothing else: the stream
// ends after the reply. Protocol version 6 and later.
const RoleGlob = "glob"

// HasGlob reports whether p holds a pattern character of path.Match: '*',
// '?' or '['.
func HasGlob(p string) bool { return strings.ContainsAny(p, "*?[") }

// Glob dials d and asks the agent to expand pattern (RoleGlob) beneath
// the tree it serves. It returns the matching paths in the pattern's own
// form (absolute if it is, with its trailing slash if it has one), sorted;
// none is not an error. A bad pattern or one that leaves the served root
// is a *RemoteError; an agent of an older protocol fails the handshake
// (ErrProtocol). Safe for concurrent use.
func Glob(ctx context.Context, d transport.Dialer, pattern, version string, t Timeouts) ([]string, error) {
	_, c, err := Open(ctx, d, Hello{Role: RoleGlob, Path: pattern, Version: version, Compression: "none"}, t)
	if err != nil {
		return nil, err
	}
	c.s.Close() // the server has ended its side after the reply
	return c.matches, nil
}

// glob expands the client's pattern beneath cfg.Root, component by
// component with path.Match (fs.Glob), through an os.Root on the served
// root, so that a match is never reached through a symlink that leaves
// it. Without a served root the agent runs as the client's own login, and
// filepath.Glob expands the pattern as the user's shell would, hidden
// names included.
func (s *server) glob(pattern string) ([]string, error) {
	slash := strings.HasSuffix(pattern, "/")
	var matches []string
	if s.cfg.Root == "" {
		m, err := filepath.Glob(filepath.Clean(pattern))
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %w", pattern, err)
		}
		matches = m
	} else {
		if _, err := s.resolve(pattern); err != nil {
			return nil, err
		}
		rel := strings.TrimPrefix(path.Clean("/"+pattern), "/")
		if rel == "" {
			rel = "."
		}
		served, err := os.OpenRoot(s.cfg.Root)
		if err != nil {
			return nil, fmt.Errorf("open served root: %w", err)
		}
		defer served.Close()
		m, err := fs.Glob(served.FS(), rel)
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %w", pattern, err)
		}
		for _, p := range m {
			if strings.HasPrefix(pattern, "/") {
				p = "/" + p
			}
			matches = append(matches, p)
		}
	}
	if slash {
		for i := range matches {
			matches[i] += "/"
		}
	}
	if matches == nil {
		matches = []string{}
	}
	return matches, nil
}
