package bench

import (
	"errors"
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
		words, err := splitWords(o.Rsh)
		if err != nil {
			return nil, err
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

// splitWords splits a command line into words like rsync's -e: single
// quotes, double quotes and backslashes, no other shell expansion.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote in " + strconv.Quote(s))
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote in " + strconv.Quote(s))
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
