package treewalk

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// ErrBadPath is returned by ValidPath for a path that could escape the
// destination or is not in canonical form.
var ErrBadPath = errors.New("invalid path")

// ValidPath checks a file-list path received from a peer: it must be ".",
// or a cleaned, relative, slash-separated path with no "." or ".."
// component, no empty component and no NUL byte. It returns nil or an error
// wrapping ErrBadPath that says what is wrong. It is a pure function.
func ValidPath(p string) error {
	switch {
	case p == ".":
		return nil
	case p == "":
		return fmt.Errorf("%w: %s", ErrBadPath, "empty path")
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("%w: %s", ErrBadPath, "NUL byte in path")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("%w: %s", ErrBadPath, "absolute path")
	}
	for rest := p; ; {
		c, after, more := strings.Cut(rest, "/")
		if c == ".." {
			return fmt.Errorf("%w: %s", ErrBadPath, "\"..\" component")
		}
		if c == "" || c == "." {
			return fmt.Errorf("%w: %s", ErrBadPath, "not a clean path")
		}
		if !more {
			break
		}
		rest = after
	}
	if path.Clean(p) != p {
		return fmt.Errorf("%w: %s", ErrBadPath, "not a clean path")
	}
	return nil
}
