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
