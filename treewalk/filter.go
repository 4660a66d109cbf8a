package treewalk

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Filter rules, with the semantics of rsync's --include and --exclude
// (rsync(1), sections "FILTER RULES" and "INCLUDE/EXCLUDE PATTERN RULES";
// our own code, written from that description):
//
//   - the rules are tried in order for each path, and the first that
//     matches decides: an include keeps the entry, an exclude drops it; a
//     path no rule matches is kept;
//   - an excluded directory is not descended into, so nothing below it is
//     listed, whatever later rules say;
//   - a pattern that starts with "/" is anchored to the root of the
//     transfer (it matches the whole path from the top); one that ends
//     with "/" matches directories only; "dir/***" matches dir itself and
//     everything below it;
//   - a pattern with no "/" (other than a trailing one) and no "**" is
//     matched against the entry's name only; one with an inner "/" is
//     matched against the end of the path (as many trailing components as
//     it has), one with "**" after its start at any component boundary,
//     and one starting with "**" against the whole path;
//   - "*" matches any run of characters except "/", "**" any run including
//     "/", "?" one character other than "/", "[...]" one character of a
//     set ("[!...]" or "[^...]" negated, ranges "a-z", classes like
//     "[:digit:]"), and "\" makes the next character literal. A pattern
//     with none of "*?[" is compared literally (a "\" is then itself).
//     A set naming an unknown class ("[[:foo:]]") makes the pattern match
//     nothing, as in rsync;
//   - on the command line and in pattern files, "!" clears the rules
//     given so far and an empty pattern is ignored (AddRule).

// ErrBadPattern is wrapped by the errors of ParseRule and NewFilter for a
// pattern that cannot be used.
var ErrBadPattern = errors.New("bad filter pattern")

// Rule is one include or exclude rule.
type Rule struct {
	// Include keeps what the pattern matches; false excludes it.
	Include bool
	// Pattern is the rsync pattern, as written.
	Pattern string
}

// String returns the rule in rsync's short form: "+ PATTERN" or
// "- PATTERN", which ParseRule reads back.
func (r Rule) String() string {
	if r.Include {
		return "+ " + r.Pattern
	}
	return "- " + r.Pattern
}

// ParseRule reads a rule in rsync's short form, "+ PATTERN" or
// "- PATTERN". Errors wrap ErrBadPattern.
func ParseRule(s string) (Rule, error) {
	switch {
	case strings.HasPrefix(s, "+ "):
		return Rule{Include: true, Pattern: s[2:]}, nil
	case strings.HasPrefix(s, "- "):
		return Rule{Pattern: s[2:]}, nil
	}
	return Rule{}, fmt.Errorf("%w: %q: a rule starts with \"+ \" or \"- \"", ErrBadPattern, s)
}

// CommandLineRule is the rule of an --include (include true) or
// --exclude pattern: as rsync does, a pattern that starts with "+ " or
// "- " says itself whether it includes or excludes. It does not know the
// rule list, so "!" and "" are patterns here: AddRule handles them.
func CommandLineRule(pattern string, include bool) Rule {
	if r, err := ParseRule(pattern); err == nil {
		return r
	}
	return Rule{Include: include, Pattern: pattern}
}

// ClearRules is the pattern that clears the include/exclude list built so
// far (rsync's "!" rule, from --include, --exclude or a line of their
// -from files): the rules given after it are the only ones.
const ClearRules = "!"

// AddRule appends to rules the rule of an --include (include true) or
// --exclude PATTERN, as rsync reads one (rsync(1), "FILTER RULES"): "!"
// alone (ClearRules) drops every rule so far and returns an empty list,
// an empty pattern adds nothing, and "+ " or "- " in front says whether
// the rest includes or excludes (so "- !" excludes a file named "!").
func AddRule(rules []Rule, pattern string, include bool) []Rule {
	switch pattern {
	case ClearRules:
		return nil
	case "":
		return rules
	}
	return append(rules, CommandLineRule(pattern, include))
}

// AddRulesFrom appends to rules the patterns of an --include-from or
// --exclude-from file (include says which), read from r: one a line, or
// NUL-separated with nul (rsync's --from0). As rsync does, empty lines and
// lines starting with "#" or ";" are skipped, a line starting with "+ "
// or "- " says itself what it is, and a "!" line clears the list, the
// rules given before the file included (see AddRule). It returns the
// list, and read errors.
func AddRulesFrom(rules []Rule, r io.Reader, include, nul bool) ([]Rule, error) {
	lines, err := ReadLines(r, nul)
	if err != nil {
		return nil, err
	}
	for _, l := range lines {
		if IsComment(l) {
			continue
		}
		rules = AddRule(rules, l, include)
	}
	return rules, nil
}

// ReadRules is AddRulesFrom on an empty list: the rules of one pattern
// file (a "!" in it clears only the rules above it in the file).
func ReadRules(r io.Reader, include, nul bool) ([]Rule, error) {
	return AddRulesFrom(nil, r, include, nul)
}

// IsComment reports whether line, of a pattern file or a --files-from
// list, is skipped as rsync skips it: empty, or starting with "#" or ";".
// A path that starts with one of them is listed as "./#name".
func IsComment(line string) bool {
	return line == "" || line[0] == '#' || line[0] == ';'
}

// ReadLines splits r into lines ("\n", with a "\r" before it dropped) or,
// with nul, into NUL-separated strings. Empty items are kept (callers
// skip them). It returns read errors.
func ReadLines(r io.Reader, nul bool) ([]string, error) {
	sep := byte('\n')
	if nul {
		sep = 0
	}
	br := bufio.NewReader(r)
	var out []string
	for {
		b, err := br.ReadBytes(sep)
		if len(b) > 0 {
			b = bytes.TrimSuffix(b, []byte{sep})
			if !nul {
				b = bytes.TrimSuffix(b, []byte{'\r'})
			}
			out = append(out, string(b))
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// Filter decides which paths of a transfer are kept. It is immutable once
// made and safe for concurrent use. A nil *Filter keeps everything.
type Filter struct {
	rules []rule
}

// rule is a compiled Rule.
type rule struct {
	include     bool
	pat         string // without the anchoring "/" and the trailing "/"
	anchored    bool   // started with "/"
	dirOnly     bool   // ended with "/"
	wild        bool   // has one of "*?[": matched with wildmatch
	wild2       bool   // has "**"
	wild2Prefix bool   // starts with "**"
	wild3Suffix bool   // ends with "/***"
	never       bool   // names an unknown "[:class:]": matches nothing
	slashes     int    // "/" in pat
}

// NewFilter compiles rules. Errors (wrapping ErrBadPattern) name the
// pattern: an empty one, a NUL byte, an unterminated "[", a trailing "\".
// No rules gives a nil Filter, which keeps everything.
func NewFilter(rules []Rule) (*Filter, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	f := &Filter{}
	for _, r := range rules {
		c, err := compileRule(r)
		if err != nil {
			return nil, err
		}
		f.rules = append(f.rules, c)
	}
	return f, nil
}

// ParseFilter is NewFilter of rules in short form (Rule.String), as they
// travel in a handshake.
func ParseFilter(rules []string) (*Filter, error) {
	rs := make([]Rule, 0, len(rules))
	for _, s := range rules {
		r, err := ParseRule(s)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return NewFilter(rs)
}

func compileRule(r Rule) (rule, error) {
	p := r.Pattern
	bad := func(why string) (rule, error) {
		return rule{}, fmt.Errorf("%w: %q: %s", ErrBadPattern, r.Pattern, why)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return bad("NUL byte")
	}
	c := rule{include: r.Include}
	if strings.HasPrefix(p, "/") {
		c.anchored = true
		p = p[1:]
	}
	if len(p) > 1 && strings.HasSuffix(p, "/") {
		c.dirOnly = true
		p = p[:len(p)-1]
	}
	if p == "" || p == "/" {
		return bad("empty pattern")
	}
	c.wild = strings.ContainsAny(p, "*?[")
	if c.wild {
		if err := checkWild(p); err != "" {
			return bad(err)
		}
		c.wild2 = strings.Contains(p, "**")
		c.wild2Prefix = strings.HasPrefix(p, "**")
		c.wild3Suffix = p == "***" || strings.HasSuffix(p, "/***")
		c.never = hasUnknownClass(p)
	}
	c.slashes = strings.Count(p, "/")
	c.pat = p
	return c, nil
}

// checkWild returns why the wildcard pattern p is malformed, or "".
func checkWild(p string) string {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			if i+1 == len(p) {
				return "trailing backslash"
			}
			i++
		case '[':
			end := classEnd(p, i+1)
			if end < 0 {
				return "unterminated ["
			}
			i = end
		}
	}
	return ""
}

// hasUnknownClass reports whether a set of the wildcard pattern p (well
// formed: checkWild passed) names a character class that posixClass does
// not know, like "[[:foo:]]". rsync's wildmatch gives up on the whole
// match when it meets one, so such a pattern never matches, negated or
// not, and is no error.
func hasUnknownClass(p string) bool {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '[':
			end := classEnd(p, i+1)
			set := p[i+1 : end]
			for j := 0; j+1 < len(set); j++ {
				if set[j] == '\\' {
					j++
					continue
				}
				if set[j] == '[' && set[j+1] == ':' {
					if k := strings.Index(set[j+2:], ":]"); k >= 0 {
						if !slices.Contains(posixClasses, set[j+2:j+2+k]) {
							return true
						}
						j += 2 + k + 1
					}
				}
			}
			i = end
		}
	}
	return false
}

// posixClasses are the class names posixClass knows.
var posixClasses = []string{"alnum", "alpha", "blank", "cntrl", "digit", "graph", "lower", "print", "punct", "space", "upper", "xdigit"}

// classEnd returns the index of the "]" closing the set whose contents
// start at p[i], or -1.
func classEnd(p string, i int) int {
	if i < len(p) && (p[i] == '!' || p[i] == '^') {
		i++
	}
	if i < len(p) && p[i] == ']' {
		i++ // a leading "]" is literal
	}
	for ; i < len(p); i++ {
		switch {
		case p[i] == '\\':
			i++
		case p[i] == '[' && i+1 < len(p) && p[i+1] == ':':
			if end := strings.Index(p[i+2:], ":]"); end >= 0 {
				i += 2 + end + 1
			}
		case p[i] == ']':
			return i
		}
	}
	return -1
}

// Excluded reports whether the entry at p (slash-separated, relative to
// the root of the transfer, "." for the root itself, which is never
// excluded) is dropped by the rules; dir says whether it is a directory.
// It does not look at p's ancestors: a walk does not descend into an
// excluded directory in the first place.
func (f *Filter) Excluded(p string, dir bool) bool {
	if f == nil || p == "." || p == "" {
		return false
	}
	for i := range f.rules {
		if f.rules[i].matches(p, dir) {
			return !f.rules[i].include
		}
	}
	return false
}

// Rules returns the rules in short form (Rule.String), for a handshake.
func (f *Filter) Rules() []string {
	if f == nil {
		return nil
	}
	out := make([]string, len(f.rules))
	for i, r := range f.rules {
		pat := r.pat
		if r.anchored {
			pat = "/" + pat
		}
		if r.dirOnly {
			pat += "/"
		}
		out[i] = Rule{Include: r.include, Pattern: pat}.String()
	}
	return out
}

func (r *rule) matches(name string, dir bool) bool {
	if r.never || r.dirOnly && !dir {
		return false
	}
	if !r.anchored && r.slashes == 0 && !r.wild2 {
		// The name's last component only.
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			name = name[i+1:]
		}
	}
	text := name
	if r.wild2Prefix && !r.anchored {
		text = "/" + text // "**/x" matches "x" at the top too
	}
	if dir && r.wild3Suffix {
		text += "/" // "dir/***" matches dir itself
	}
	match := func(t string) bool {
		if r.wild {
			return wildmatch(r.pat, t)
		}
		return r.pat == t
	}
	switch {
	case !r.anchored && r.slashes > 0 && !r.wild2:
		// The last slashes+1 components.
		return match(trailingComponents(text, r.slashes+1))
	case !r.anchored && !r.wild2Prefix && r.wild2:
		// At the start or after any "/".
		if match(text) {
			return true
		}
		for i := 0; i < len(text); i++ {
			if text[i] == '/' && match(text[i+1:]) {
				return true
			}
		}
		return false
	}
	return match(text)
}

// trailingComponents returns the last n "/"-separated components of s (all
// of s when it has fewer).
func trailingComponents(s string, n int) string {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			n--
			if n == 0 {
				return s[i+1:]
			}
		}
	}
	return s
}

// wildmatch reports whether text matches the whole wildcard pattern p.
func wildmatch(p, text string) bool {
	for len(p) > 0 {
		switch c := p[0]; c {
		case '*':
			double := len(p) > 1 && p[1] == '*'
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
			if len(p) == 0 {
				return double || !strings.Contains(text, "/")
			}
			for i := 0; i <= len(text); i++ {
				if wildmatch(p, text[i:]) {
					return true
				}
				if i < len(text) && text[i] == '/' && !double {
					return false
				}
			}
			return false
		case '?':
			if len(text) == 0 || text[0] == '/' {
				return false
			}
			p, text = p[1:], text[1:]
		case '[':
			end := classEnd(p, 1)
			if len(text) == 0 || text[0] == '/' || !classMatch(p[1:end], text[0]) {
				return false
			}
			p, text = p[end+1:], text[1:]
		default:
			if c == '\\' && len(p) > 1 {
				p = p[1:]
				c = p[0]
			}
			if len(text) == 0 || text[0] != c {
				return false
			}
			p, text = p[1:], text[1:]
		}
	}
	return len(text) == 0
}

// classMatch reports whether byte b is in the set set (the text between
// "[" and "]").
func classMatch(set string, b byte) bool {
	negate := false
	if len(set) > 0 && (set[0] == '!' || set[0] == '^') {
		negate, set = true, set[1:]
	}
	found := false
	for i := 0; i < len(set); i++ {
		lo := set[i]
		if lo == '[' && i+1 < len(set) && set[i+1] == ':' {
			if end := strings.Index(set[i+2:], ":]"); end >= 0 {
				if posixClass(set[i+2:i+2+end], b) {
					found = true
				}
				i += 2 + end + 1
				continue
			}
		}
		if lo == '\\' && i+1 < len(set) {
			i++
			lo = set[i]
		}
		hi := lo
		if i+2 < len(set) && set[i+1] == '-' {
			hi = set[i+2]
			i += 2
			if hi == '\\' && i+1 < len(set) {
				i++
				hi = set[i]
			}
		}
		if lo <= b && b <= hi {
			found = true
		}
	}
	return found != negate
}

// posixClass reports whether b is in the POSIX character class name
// ("alpha", "digit", ...), in the C locale.
func posixClass(name string, b byte) bool {
	isUpper, isLower, isDigit := 'A' <= b && b <= 'Z', 'a' <= b && b <= 'z', '0' <= b && b <= '9'
	switch name {
	case "alnum":
		return isUpper || isLower || isDigit
	case "alpha":
		return isUpper || isLower
	case "blank":
		return b == ' ' || b == '\t'
	case "cntrl":
		return b < 0x20 || b == 0x7f
	case "digit":
		return isDigit
	case "graph":
		return b > 0x20 && b < 0x7f
	case "lower":
		return isLower
	case "print":
		return b >= 0x20 && b < 0x7f
	case "punct":
		return b > 0x20 && b < 0x7f && !isUpper && !isLower && !isDigit
	case "space":
		return b == ' ' || (b >= '\t' && b <= '\r')
	case "upper":
		return isUpper
	case "xdigit":
		return isDigit || ('a' <= b && b <= 'f') || ('A' <= b && b <= 'F')
	}
	return false
}
