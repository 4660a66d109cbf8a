package dest

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// rootName is the conventional name of id 0. rsync does not send the
// sender's name for id 0 and matches the receiver's name for it instead;
// this is what that name is taken to be when the entry carries none.
const rootName = "root"

// idRuleKind is how an idRule's FROM side matches.
type idRuleKind uint8

const (
	matchID      idRuleKind = iota // FROM is a numeric id
	matchRange                     // FROM is LOW-HIGH, inclusive
	matchName                      // FROM is a name (possibly empty)
	matchPattern                   // FROM is a wildcard pattern over names
)

// idRule is one FROM:TO pair of --usermap or --groupmap.
type idRule struct {
	kind      idRuleKind
	low, high uint32 // matchID (low only) and matchRange
	from      string // matchName and matchPattern
	// fromIsRoot is set for a matchName whose FROM resolves to id 0 on this
	// host, so that it matches id 0, whose name rsync takes from the
	// receiver.
	fromIsRoot bool
	to         int
}

// idMap is a parsed --usermap or --groupmap: FROM:TO rules, first match wins.
// It is immutable after parsing.
type idMap struct {
	rules []idRule
}

// parseIDMap parses the values of one kind of map option (flag is
// "--usermap" or "--groupmap", used in errors) in order: each value is a
// comma-separated list of FROM:TO pairs, and the lists are concatenated.
// lookup resolves names on this host; a TO name it does not know is an
// error wrapping ErrUnknownName.
func parseIDMap(flag string, specs []string, lookup func(string) (int, bool)) (idMap, error) {
	var m idMap
	for _, spec := range specs {
		for pair := range strings.SplitSeq(spec, ",") {
			r, err := parseIDRule(pair, lookup)
			if err != nil {
				return idMap{}, &SpecError{Flag: flag, Item: pair, Err: err}
			}
			m.rules = append(m.rules, r)
		}
	}
	return m, nil
}

// parseIDRule parses one FROM:TO pair. FROM is an id ("33"), a range
// ("1000-1999"), a wildcard pattern ("*", "web*", "[ab]*"; matched against
// names only), or a name, possibly empty (matching ids that have no name).
func parseIDRule(pair string, lookup func(string) (int, bool)) (idRule, error) {
	from, to, ok := strings.Cut(pair, ":")
	if !ok {
		return idRule{}, errIDMapNoColon
	}
	var r idRule
	toID, err := resolveTo(to, lookup)
	if err != nil {
		return idRule{}, err
	}
	r.to = toID

	switch {
	case isDecimal(from):
		id, err := parseID(from)
		if err != nil {
			return idRule{}, err
		}
		r.kind, r.low, r.high = matchID, id, id
	case isRange(from):
		lo, hi, _ := strings.Cut(from, "-")
		l, errL := parseID(lo)
		h, errH := parseID(hi)
		if err := errors.Join(errL, errH); err != nil {
			return idRule{}, err
		}
		if l > h {
			return idRule{}, errIDMapRange
		}
		r.kind, r.low, r.high = matchRange, l, h
	case strings.ContainsAny(from, "*?["):
		if _, err := path.Match(from, ""); err != nil {
			return idRule{}, fmt.Errorf("pattern %q: %w", from, err)
		}
		r.kind, r.from = matchPattern, from
	default:
		r.kind, r.from = matchName, from
		if id, ok := lookup(from); ok && id == 0 && from != "" {
			r.fromIsRoot = true
		}
	}
	return r, nil
}

// resolveTo turns a TO value into an id on this host.
func resolveTo(to string, lookup func(string) (int, bool)) (int, error) {
	if to == "" {
		return 0, errIDMapNoTo
	}
	if isDecimal(to) {
		id, err := parseID(to)
		return int(id), err
	}
	id, ok := lookup(to)
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrUnknownName, to)
	}
	return id, nil
}

// match returns the TO id of the first rule matching the sender's id and
// name, where name is "" for an id without a name. For id 0 the caller passes
// the name to match (see OwnerPolicy.Resolve); a plain-name rule whose FROM is
// a local name of id 0 matches it too.
func (m idMap) match(id uint32, name string) (int, bool) {
	for i := range m.rules {
		r := &m.rules[i]
		var hit bool
		switch r.kind {
		case matchID, matchRange:
			hit = r.low <= id && id <= r.high
		case matchName:
			hit = r.from == name || (id == 0 && r.fromIsRoot)
		case matchPattern:
			hit, _ = path.Match(r.from, name) // validated when parsed
		}
		if hit {
			return r.to, true
		}
	}
	return 0, false
}

// isDecimal reports whether s is a non-empty run of ASCII digits.
func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isRange reports whether s has the shape LOW-HIGH of two decimal ids.
func isRange(s string) bool {
	lo, hi, ok := strings.Cut(s, "-")
	return ok && isDecimal(lo) && isDecimal(hi)
}

// parseID parses a decimal uid or gid. 4294967295 is excluded: it is
// (uid_t)-1, which chown(2) reads as "leave unchanged".
func parseID(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil || v == 1<<32-1 {
		return 0, fmt.Errorf("%w: %q", errIDMapBadID, s)
	}
	return uint32(v), nil
}
