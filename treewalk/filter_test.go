package treewalk

import (
	"errors"
	"strings"
	"testing"
)

// Malformed patterns are refused with ErrBadPattern and the pattern named;
// well-formed ones compile.
func TestFilterRejectsBadPatterns(t *testing.T) {
	for _, p := range []string{"", "/", "[abc", `*x\`, "a\x00b", "[!"} {
		_, err := NewFilter([]Rule{{Pattern: p}})
		if !errors.Is(err, ErrBadPattern) || !strings.Contains(err.Error(), "bad filter pattern") {
			t.Errorf("pattern %q: got %v, want ErrBadPattern", p, err)
		}
	}
	for _, p := range []string{"*.php", "/logs/", "[]]x", "[[:digit:]]*", "**/cache/***", `a\[b\]`} {
		if _, err := NewFilter([]Rule{{Pattern: p}}); err != nil {
			t.Errorf("pattern %q: %v", p, err)
		}
	}
	if _, err := ParseRule("* x"); !errors.Is(err, ErrBadPattern) {
		t.Errorf("rule without +/-: %v", err)
	}
}

// The short form survives the round trip through a handshake, and a
// --exclude "+ x" is an include, as in rsync.
func TestFilterRulesRoundTrip(t *testing.T) {
	rules := []Rule{CommandLineRule("+ *.php", false), CommandLineRule("/logs/", false)}
	if !rules[0].Include || rules[1].Include {
		t.Fatalf("prefixes: %+v", rules)
	}
	f, err := NewFilter(rules)
	if err != nil {
		t.Fatal(err)
	}
	g, err := ParseFilter(f.Rules())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p   string
		dir bool
	}{{"logs", true}, {"logs", false}, {"a/index.php", false}, {"x/logs", true}} {
		if f.Excluded(c.p, c.dir) != g.Excluded(c.p, c.dir) {
			t.Errorf("%s: differs after the round trip", c.p)
		}
	}
	if !f.Excluded("logs", true) || f.Excluded("logs", false) || f.Excluded("x/logs", true) {
		t.Errorf("anchored dir-only rule: wrong decisions")
	}
}

// rsync's list handling: "!" clears the rules so far (also from a pattern
// file, clearing the command line's too), an empty pattern and comment
// lines add nothing, "- !" is a pattern for a file named "!".
func TestAddRuleClearAndEmpty(t *testing.T) {
	var rules []Rule
	rules = AddRule(rules, "*.php", false)
	rules = AddRule(rules, "", false)
	if len(rules) != 1 {
		t.Fatalf("an empty pattern added a rule: %+v", rules)
	}
	rules = AddRule(rules, "!", false)
	if len(rules) != 0 {
		t.Fatalf("\"!\" did not clear the list: %+v", rules)
	}
	rules = AddRule(rules, "- !", true)
	if len(rules) != 1 || rules[0].Include || rules[0].Pattern != "!" {
		t.Fatalf("\"- !\": %+v, want an exclude of \"!\"", rules)
	}
	rules, err := AddRulesFrom(rules, strings.NewReader("# comment\n; comment\n\n*.log\n!\n*.txt\r\n"), false, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 1 || rules[0].Pattern != "*.txt" {
		t.Fatalf("rules after a file with \"!\": %+v, want only *.txt", rules)
	}
	f, err := NewFilter(rules)
	if err != nil {
		t.Fatal(err)
	}
	if f.Excluded("a.php", false) || !f.Excluded("a.txt", false) {
		t.Errorf("filter of %+v: wrong decisions", rules)
	}
}

// A set naming an unknown class makes the pattern match nothing, negated
// or not, as rsync's wildmatch does; it is not an error.
func TestUnknownClassNeverMatches(t *testing.T) {
	for _, p := range []string{"[[:foo:]]*", "[![:foo:]]*", "*[[:digit:][:nope:]]", "/x[^[:bogus:]]"} {
		f, err := NewFilter([]Rule{{Pattern: p}})
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		for _, name := range []string{"a", "9", "xa", "x9", "dir/a1"} {
			if f.Excluded(name, false) {
				t.Errorf("%q excludes %q", p, name)
			}
		}
	}
	f, _ := NewFilter([]Rule{{Pattern: "[![:digit:]]*"}})
	if !f.Excluded("a", false) || f.Excluded("9", false) {
		t.Errorf("a known class in a negated set: wrong decisions")
	}
}
