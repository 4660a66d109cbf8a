package dest

import (
	"errors"
	"strings"
	"testing"
)

// fakeIDs is an IDLookup over fixed tables; it is read-only, so safe for
// concurrent use.
type fakeIDs struct {
	users, groups map[string]int
}

func (f fakeIDs) LookupUser(name string) (int, bool) {
	id, ok := f.users[name]
	return id, ok
}

func (f fakeIDs) LookupGroup(name string) (int, bool) {
	id, ok := f.groups[name]
	return id, ok
}

// hostIDs looks like a small web host's /etc/passwd and /etc/group.
var hostIDs = fakeIDs{
	users: map[string]int{
		"root": 0, "toor": 0, "daemon": 1, "bin": 2, "www-data": 33,
		"alice": 1001, "bob": 1002, "nobody": 65534,
	},
	groups: map[string]int{
		"root": 0, "daemon": 1, "bin": 2, "www-data": 33, "staff": 50,
		"alice": 1001, "nogroup": 65534,
	},
}

func TestIDMapMatch(t *testing.T) {
	type probe struct {
		id     uint32
		name   string
		want   int
		wantOK bool
	}
	tests := []struct {
		specs  []string
		probes []probe
	}{
		{[]string{"0-99:nobody,alice:bob,*:www-data"}, []probe{
			{0, "root", 65534, true},
			{99, "", 65534, true},
			{100, "alice", 1002, true},
			{5000, "carol", 33, true},
			{5000, "", 33, true}, // "*" matches ids without a name
		}},
		// First match wins, across repeated options too.
		{[]string{"alice:1", "alice:2,1001:3"}, []probe{
			{1001, "alice", 1, true},
			{1001, "", 3, true},
			{7, "bob", 0, false},
		}},
		// An empty FROM matches only nameless ids.
		{[]string{":nobody"}, []probe{
			{4242, "", 65534, true},
			{4242, "carol", 0, false},
		}},
		// Wildcards match names, never numbers.
		{[]string{"1*:daemon,web?:bin,[ab]*:www-data"}, []probe{
			{1001, "", 0, false},
			{1001, "web1", 2, true},
			{1001, "web12", 0, false},
			{1001, "bob", 33, true},
			{1001, "carol", 0, false},
		}},
		// A FROM name that is id 0 here matches id 0, as rsync matches id 0
		// by the receiver's names.
		{[]string{"toor:daemon"}, []probe{
			{0, "root", 1, true},
			{0, "", 1, true},
			{5, "root", 0, false},
			{5, "toor", 1, true},
		}},
		{[]string{"5:77777,10-20:www-data,4294967294:0"}, []probe{
			{5, "", 77777, true},
			{10, "x", 33, true},
			{20, "x", 33, true},
			{21, "x", 0, false},
			{4294967294, "", 0, true},
		}},
	}
	for _, tt := range tests {
		m, err := parseIDMap("--usermap", tt.specs, hostIDs.LookupUser)
		if err != nil {
			t.Errorf("parseIDMap(%q): %v", tt.specs, err)
			continue
		}
		for _, p := range tt.probes {
			got, ok := m.match(p.id, p.name)
			if got != p.want || ok != p.wantOK {
				t.Errorf("%q: match(%d, %q) = %d, %v; want %d, %v",
					tt.specs, p.id, p.name, got, ok, p.want, p.wantOK)
			}
		}
	}
}

func TestIDMapParseErrors(t *testing.T) {
	tests := []struct {
		spec     string
		bad      string // SpecError.Item
		contains string
		unknown  bool // wraps ErrUnknownName
	}{
		{"alice", "alice", "no colon", false},
		{"alice:", "alice:", "no name or id", false},
		{"alice:staff,carol:nosuch", "carol:nosuch", "nosuch", true},
		{"alice:staff,,", "", "no colon", false},
		{"20-10:staff", "20-10:staff", "LOW <= HIGH", false},
		{"[a:staff", "[a:staff", "syntax error in pattern", false},
		{"4294967295:staff", "4294967295:staff", "out of range", false},
		{"1:99999999999", "1:99999999999", "out of range", false},
	}
	for _, tt := range tests {
		_, err := parseIDMap("--groupmap", []string{"1:2", tt.spec}, hostIDs.LookupGroup)
		var se *SpecError
		if !errors.As(err, &se) {
			t.Errorf("%q: err = %v, want a *SpecError", tt.spec, err)
			continue
		}
		if se.Flag != "--groupmap" || se.Item != tt.bad {
			t.Errorf("%q: SpecError{Flag: %q, Item: %q}, want --groupmap, %q", tt.spec, se.Flag, se.Item, tt.bad)
		}
		if !strings.Contains(err.Error(), tt.contains) || !strings.HasPrefix(err.Error(), "--groupmap") {
			t.Errorf("%q: error %q, want --groupmap ... %q", tt.spec, err, tt.contains)
		}
		if errors.Is(err, ErrUnknownName) != tt.unknown {
			t.Errorf("%q: errors.Is(%v, ErrUnknownName) = %v", tt.spec, err, !tt.unknown)
		}
	}
}
