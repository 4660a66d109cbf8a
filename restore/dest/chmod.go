package dest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// defaultUmask is assumed when the process umask cannot be read: 022 is the
// umask almost every login shell and service manager sets.
const defaultUmask = 0o022

// permBits is the part of a mode that --chmod may change: permissions plus
// the setuid, setgid and sticky bits.
const permBits = 0o7777

// chmodScope says which entries a --chmod item applies to.
type chmodScope uint8

const (
	scopeAll   chmodScope = iota // no prefix
	scopeDirs                    // "D" prefix: directories only
	scopeFiles                   // "F" prefix: everything but directories
)

// chmodItem is one comma-separated item of a --chmod value, reduced to a mask
// of bits to keep and a set of bits to add.
type chmodItem struct {
	scope chmodScope
	keep  uint32 // bits of the current mode that survive the item
	add   uint32 // bits the item sets
	// condX marks an item that used "X": for a non-directory that had no
	// execute bit at all before the first item, the item adds no execute
	// bits (not even those named by a plain "x" in the same item).
	condX bool
}

// ChmodRules is a parsed list of --chmod items, applied in order. The zero
// value applies no change. A ChmodRules is immutable once parsed and safe for
// concurrent use.
type ChmodRules struct {
	items []chmodItem
}

// ParseChmod parses the values of one or more --chmod options, in the order
// they were given; each further option appends its items to the list, as in
// rsync(1) ("It is also legal to specify multiple --chmod options, as each
// additional option is just appended to the list of changes to make").
//
// The syntax is rsync's, from its man page: comma-separated items, each
// optionally prefixed with "D" (applies to directories only) or "F" (applies
// to everything that is not a directory), followed by either an octal mode of
// up to 07777 (e.g. "644", "D2775") or a chmod(1)-style symbolic change
// [ugoa]*[-+=][rwxXst]* (e.g. "u+rwX", "go-w", "o=", "Dg+s"). Like rsync, and
// unlike chmod(1), an item has exactly one operator ("u+r-w" is an error) and
// the right-hand side cannot copy another class ("g=u" is an error).
//
// As with chmod(1), an item that names no class ("+w", "=rX") leaves alone
// the bits set in the umask. ParseChmod uses the umask this process had when
// it was called (ProcessUmask), as rsync uses its own; see ParseChmodUmask
// to give one explicitly. rsync resolves --chmod on the client, so the
// umask that counts is the client's even when the other side receives:
// OwnerOptions.ChmodUmask carries it to the receiver of a push.
//
// A malformed item is reported as a *SpecError with Flag "--chmod".
func ParseChmod(specs []string) (ChmodRules, error) {
	return ParseChmodUmask(specs, processUmask())
}

// ParseChmodUmask is ParseChmod with an explicit umask (permission bits,
// e.g. 0o022) for the items that name no class. It is safe for concurrent
// use.
func ParseChmodUmask(specs []string, umask uint32) (ChmodRules, error) {
	var r ChmodRules
	for _, spec := range specs {
		for item := range strings.SplitSeq(spec, ",") {
			it, err := parseChmodItem(item, umask&0o777)
			if err != nil {
				return ChmodRules{}, &SpecError{Flag: "--chmod", Item: item, Err: err}
			}
			r.items = append(r.items, it)
		}
	}
	return r, nil
}

// Apply returns mode (Unix permission bits, 07777, plus any higher bits,
// which pass through unchanged) after every item in r, in order, as rsync's
// --chmod would leave it. isDir selects the "D" or "F" items. Callers must not
// apply it to symbolic links: rsync leaves their mode alone.
//
// Like rsync, "X" looks at mode as it was before the first item: "a-x,+X"
// restores the execute bits of an executable file, and "Fu+x,+X" does not
// make a non-executable file executable for group and others.
func (r ChmodRules) Apply(mode uint32, isDir bool) uint32 {
	hadX := mode&0o111 != 0
	other := mode &^ permBits
	perm := mode & permBits
	for _, it := range r.items {
		switch {
		case it.scope == scopeDirs && !isDir, it.scope == scopeFiles && isDir:
			continue
		}
		perm &= it.keep
		if it.condX && !hadX && !isDir {
			perm |= it.add &^ 0o111
		} else {
			perm |= it.add
		}
	}
	return perm | other
}

// Len returns the number of items in r; 0 means Apply changes nothing.
func (r ChmodRules) Len() int { return len(r.items) }

// chmod operators.
const (
	opNone  = 0
	opAdd   = '+'
	opSub   = '-'
	opEqual = '='
	opOctal = '0' // an absolute octal mode
)

// parseChmodItem parses one item: [DF]*[ugoa]*[-+=][rwxXst]* or [DF]*octal.
// The D/F letters and the class letters may come in any order before the
// operator, as rsync accepts them.
func parseChmodItem(s string, umask uint32) (chmodItem, error) {
	if s == "" {
		return chmodItem{}, errChmodEmpty
	}
	var (
		it     chmodItem
		who    uint32 // 0o111 multiples: which classes (u=0o100, g=0o010, o=0o001)
		setIDs uint32 // the set-id bits the classes own: u 04000, g 02000
		op     byte
		i      int
	)
	// First half: scope and classes, up to the operator or an octal digit.
	for op == opNone && i < len(s) {
		c := s[i]
		switch {
		case c == 'D' || c == 'F':
			sc := scopeDirs
			if c == 'F' {
				sc = scopeFiles
			}
			if it.scope != scopeAll && it.scope != sc {
				return chmodItem{}, errChmodScope
			}
			it.scope = sc
		case c == 'u':
			who |= 0o100
			setIDs |= 0o4000
		case c == 'g':
			who |= 0o010
			setIDs |= 0o2000
		case c == 'o':
			who |= 0o001
		case c == 'a':
			who |= 0o111
		case c == '+' || c == '-' || c == '=':
			op = c
		case c >= '0' && c <= '7':
			if who != 0 {
				return chmodItem{}, errChmodWhoOctal
			}
			op = opOctal
			continue // the digit belongs to the number
		default:
			return chmodItem{}, fmt.Errorf("unexpected %q before the operator", c)
		}
		i++
	}
	if op == opNone {
		return chmodItem{}, errChmodNoOp
	}
	if op == opOctal {
		v, err := strconv.ParseUint(s[i:], 8, 32)
		if err != nil || v > permBits {
			return chmodItem{}, errChmodOctal
		}
		it.keep, it.add = 0, uint32(v)
		return it, nil
	}

	// Second half: the permissions.
	var what, special uint32
	for _, c := range []byte(s[i:]) {
		switch c {
		case 'r':
			what |= 4
		case 'w':
			what |= 2
		case 'x':
			what |= 1
		case 'X':
			what |= 1
			it.condX = true
		case 's':
			// rsync gives "s" to the set-id bits of the classes named; with
			// neither u nor g named ("+s", "a+s", "o+s") it means setuid only.
			if setIDs != 0 {
				special |= setIDs
			} else {
				special |= 0o4000
			}
		case 't':
			special |= 0o1000
		default:
			return chmodItem{}, fmt.Errorf("unexpected %q after the operator (want r, w, x, X, s or t)", c)
		}
	}

	bits := who * what
	if who == 0 {
		who = 0o111
		bits = (who * what) &^ umask
	}
	switch op {
	case opAdd:
		it.keep, it.add = permBits, bits|special
	case opSub:
		it.keep, it.add = permBits&^(bits|special), 0
	case opEqual:
		// "=" resets the classes' rwx bits, and their set-id bits only
		// when "s" is given: "u=rw" keeps a setuid bit, as in rsync.
		it.keep = permBits &^ (who * 7)
		if special != 0 {
			it.keep &^= setIDs
		}
		it.add = bits | special
	}
	return it, nil
}

// errChmodUmask is wrapped in the *SpecError of an OwnerOptions.ChmodUmask
// above 0777.
var errChmodUmask = errors.New("umask for --chmod out of range (0-0777)")

// parseChmodOwner parses specs for OwnerOptions: with *umask when it is
// given (and at most 0777, else a *SpecError), else with ProcessUmask.
func parseChmodOwner(specs []string, umask *uint32) (ChmodRules, error) {
	if umask == nil {
		return ParseChmod(specs)
	}
	if *umask > 0o777 {
		return ChmodRules{}, &SpecError{Flag: "--chmod", Item: "umask " + octal(*umask), Err: errChmodUmask}
	}
	return ParseChmodUmask(specs, *umask)
}

// ProcessUmask returns this process's umask (permission bits, e.g. 0o022)
// without changing it, 022 where it cannot be read (see processUmask). It
// is safe for concurrent use.
func ProcessUmask() uint32 { return processUmask() }

// processUmask returns this process's umask (readUmask), or defaultUmask
// when it cannot be read.
func processUmask() uint32 {
	if u, ok := readUmask(); ok {
		return u
	}
	return defaultUmask
}

// readUmask returns this process's umask (permission bits) without
// changing it (calling umask(2) to read it would briefly change it for
// every thread): the "Umask:" line of /proc/self/status (Linux 4.7 and
// later). ok is false when it cannot be read.
func readUmask() (umask uint32, ok bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, found := strings.CutPrefix(sc.Text(), "Umask:")
		if !found {
			continue
		}
		u, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
		if err != nil {
			return 0, false
		}
		return uint32(u) & 0o777, true
	}
	return 0, false
}

// octal formats a mode as chmod(1) takes it ("0755").
func octal(m uint32) string { return "0" + strconv.FormatUint(uint64(m), 8) }
