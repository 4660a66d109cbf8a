package transport

import (
	"errors"
	"strings"
)

// Shell words, as a POSIX shell (IEEE Std 1003.1, "Shell Command
// Language", 2.2 Quoting) reads and writes them for a simple command: the
// -e program line, and the commands we run on a remote shell.

// SplitCommandLine splits s into words the way a POSIX shell would for a
// simple command: blanks separate words, '...' is literal, "..." allows
// \" \\ \$ \` escapes, and a backslash outside quotes escapes the next
// byte. There is no variable, glob or tilde expansion. Unterminated quotes
// and a trailing backslash are errors. It reads -e (rsync's --rsh) and
// the command of a session of the built-in endpoint (ListenAndServe).
func SplitCommandLine(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case ' ', '\t', '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case '\\':
			if i+1 == len(s) {
				return nil, errors.New("trailing backslash")
			}
			i++
			if s[i] == '\n' { // line continuation
				continue
			}
			inWord = true
			cur.WriteByte(s[i])
		case '\'':
			inWord = true
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
		case '"':
			inWord = true
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\\\"$`\n", s[i+1]) >= 0 {
					i++
					if s[i] == '\n' {
						continue
					}
				}
				cur.WriteByte(s[i])
			}
			if i == len(s) {
				return nil, errors.New("unterminated double quote")
			}
		default:
			inWord = true
			cur.WriteByte(c)
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// ShellQuote quotes s as one word for a POSIX shell when it holds anything
// beyond a conservative set of safe bytes. A leading "~/" stays unquoted so
// the remote shell still expands it.
func ShellQuote(s string) string {
	if rest, ok := strings.CutPrefix(s, "~/"); ok && rest != "" {
		return "~/" + ShellQuote(rest)
	}
	safe := s != ""
	for i := 0; i < len(s) && safe; i++ {
		c := s[i]
		safe = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("_-./=+,:@%", c) >= 0
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
