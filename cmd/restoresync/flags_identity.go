package main

import (
	"fmt"
	"os"
	"strings"
)

// identityFlag is -i/--identity, ssh's private key file (repeatable). A
// directory is refused when the flag is parsed: rsync users type -i for
// --itemize-changes, and "-i SRC DST" would otherwise take SRC as a key
// and restore DST into the next argument.
type identityFlag struct{ files *[]string }

// identityHint ends the errors of a value -i refuses: what rsync's users
// meant by -i.
const identityHint = "(-i is ssh's --identity; rsync's -i is --itemize-changes, written out here)"

// Set adds one key file; a directory is an error, and so is a value that
// names no file and starts with "-" or holds a ":": an option or a SRC
// that -i took for its value, as from rsync's "-ni --delete", "-aHni" or
// "-ni host:/src/ dst".
func (f identityFlag) Set(v string) error {
	fi, err := os.Stat(v)
	if err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory, not a private key file %s", v, identityHint)
	}
	if err != nil && strings.HasPrefix(v, "-") {
		return fmt.Errorf("%s is an option, not a private key file %s", v, identityHint)
	}
	if err != nil && strings.Contains(v, ":") {
		return fmt.Errorf("%s is a location, not a private key file %s", v, identityHint)
	}
	*f.files = append(*f.files, v)
	return nil
}

// String returns the key files given so far, comma-separated.
func (f identityFlag) String() string {
	if f.files == nil {
		return ""
	}
	return strings.Join(*f.files, ",")
}

// Type names the value in --help.
func (f identityFlag) Type() string { return "file" }
