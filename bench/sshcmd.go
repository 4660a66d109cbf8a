package bench

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/restoresync/restoresync/transport"
)

// sshArgv returns the OpenSSH command line that reaches loc the way the
// restore rows do: the -e command split into words, or ssh with the -F,
// -i and --known-hosts files of o (BatchMode, so nothing prompts), then
// -l USER and -p PORT when loc has them. The host is not included.
func sshArgv(o transport.SSHOptions, loc transport.Location) ([]string, error) {
	var argv []string
	if o.Rsh != "" {
		words, err := transport.SplitCommandLine(o.Rsh)
		if err != nil {
			return nil, fmt.Errorf("-e %q: %w", o.Rsh, err)
		}
		if len(words) == 0 {
			return nil, errors.New("-e: empty command")
		}
		argv = words
	} else {
		argv = []string{"ssh", "-o", "BatchMode=yes"}
		if o.ConfigFile != "" {
			argv = append(argv, "-F", o.ConfigFile)
		}
		for _, id := range o.Identities {
			argv = append(argv, "-i", id, "-o", "IdentitiesOnly=yes")
		}
		if len(o.KnownHosts) > 0 {
			argv = append(argv, "-o", "UserKnownHostsFile="+strings.Join(o.KnownHosts, " "))
		}
	}
	if loc.User != "" {
		argv = append(argv, "-l", loc.User)
	}
	if loc.Port != 0 {
		argv = append(argv, "-p", strconv.Itoa(loc.Port))
	}
	return argv, nil
}

// rshString joins argv into one -e string for rsync, quoting words that
// need it.
func rshString(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

// remoteCommand joins words into the command line ssh hands to the
// remote shell, each word quoted for it.
func remoteCommand(words ...string) string { return rshString(words) }

// shellQuote quotes s for a POSIX shell when it has anything but safe
// characters.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:@,+%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
