package dest

import (
	"errors"
	"fmt"
)

// ErrNonEmptyDir is a per-entry error: the source has a file or symlink
// where the destination has a directory with something in it. Like rsync,
// restoresync does not delete it unless told to (--force).
var ErrNonEmptyDir = errors.New("a non-empty directory is in the way (not deleted; --force deletes it)")

// ErrUnknownName is wrapped by the error NewOwnerPolicy returns when a TO
// name of --usermap, --groupmap or --chown is not a user or group on this
// host. (rsync only warns and leaves such files unmapped; we refuse to start,
// so that a typo cannot leave a tree owned by the wrong account.)
var ErrUnknownName = errors.New("no such user or group on this host")

// SpecError reports a malformed or unusable value of an ownership or
// permission option. errors.As finds it; Err says what is wrong and may wrap
// ErrUnknownName.
type SpecError struct {
	Flag string // the option: "--chmod", "--usermap", "--groupmap" or "--chown"
	Item string // the offending item of the value, e.g. "g=u" or "web:nosuch"
	Err  error  // what is wrong with Item
}

// Error returns e.g. `--chmod: bad item "g=u": unexpected 'u' after the operator ...`.
func (e *SpecError) Error() string {
	return fmt.Sprintf("%s: bad item %q: %v", e.Flag, e.Item, e.Err)
}

// Unwrap returns e.Err.
func (e *SpecError) Unwrap() error { return e.Err }

// Malformed --usermap and --groupmap items (wrapped in a *SpecError).
var (
	errIDMapNoColon = errors.New("no colon between FROM and TO")
	errIDMapNoTo    = errors.New("no name or id after the colon")
	errIDMapRange   = errors.New("range LOW-HIGH needs LOW <= HIGH, both numeric ids")
	errIDMapBadID   = errors.New("id out of range (0-4294967294)")
)

// Malformed --chmod items (wrapped in a *SpecError).
var (
	errChmodEmpty    = errors.New("empty item")
	errChmodScope    = errors.New(`both "D" and "F" given`)
	errChmodNoOp     = errors.New("missing operator (+, - or =) or octal mode")
	errChmodOctal    = errors.New("octal mode must be 0-7 digits no greater than 7777")
	errChmodWhoOctal = errors.New("octal mode after a class letter")
)
