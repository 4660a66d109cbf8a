package treewalk

import (
	"errors"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidPath(t *testing.T) {
	valid := []string{
		".", "a", "a/b", "public_html/wp-content/uploads/2024/01/photo.jpg",
		"...", "..a", "a..", "a/..b", "a/b..", ".htaccess", "a/.hidden", "-rf",
		"name with spaces", "ü/日本語", "\xff\xfe", "a\\..\\b", "C:", "a:b", "new\nline",
		strings.Repeat("x/", 200) + "x",
	}
	for _, p := range valid {
		if err := ValidPath(p); err != nil {
			t.Errorf("ValidPath(%q) = %v, want nil", p, err)
		}
	}
	invalid := []struct{ p, msg string }{
		{"", "empty"},
		{"/", "absolute"},
		{"/etc/passwd", "absolute"},
		{"//a", "absolute"},
		{"..", `".."`},
		{"../x", `".."`},
		{"a/..", `".."`},
		{"a/../b", `".."`},
		{"a/b/../../..", `".."`},
		{"./a", "not a clean path"},
		{"a/.", "not a clean path"},
		{"a/./b", "not a clean path"},
		{"a//b", "not a clean path"},
		{"a/", "not a clean path"},
		{"./", "not a clean path"},
		{"a\x00b", "NUL"},
		{"\x00", "NUL"},
		{"../\x00", "NUL"},
	}
	for _, tt := range invalid {
		err := ValidPath(tt.p)
		if !errors.Is(err, ErrBadPath) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("ValidPath(%q) = %v, want an ErrBadPath saying %q", tt.p, err, tt.msg)
		}
	}
}

// FuzzValidPath checks ValidPath against its definition: it accepts "." and
// the clean, relative, slash-separated paths with no ".." component and no
// NUL, which are all local (filepath.IsLocal), and nothing else.
func FuzzValidPath(f *testing.F) {
	for _, s := range []string{".", "a", "a/b", "..", "../x", "a/../b", "/etc/passwd", "a//b", "", "a\x00b", "./a", "a/", "...", "a/..b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		err := ValidPath(p)
		if err != nil {
			if !errors.Is(err, ErrBadPath) {
				t.Fatalf("ValidPath(%q) = %v, does not wrap ErrBadPath", p, err)
			}
			if p == "." {
				t.Fatalf("ValidPath(%q) = %v", p, err)
			}
		}
		hasDotDot := false
		for _, c := range strings.Split(p, "/") {
			hasDotDot = hasDotDot || c == ".."
		}
		want := p == "." || (p != "" && path.Clean(p) == p && !strings.HasPrefix(p, "/") && !hasDotDot && !strings.ContainsRune(p, 0))
		if (err == nil) != want {
			t.Fatalf("ValidPath(%q) = %v, want valid: %v", p, err, want)
		}
		if err == nil && !filepath.IsLocal(p) {
			t.Fatalf("ValidPath(%q) accepts a path filepath.IsLocal refuses", p)
		}
	})
}

// Checking a received path allocates nothing: the receiver checks every
// entry of the list and every item of every read request.
func TestValidPathAllocatesNothing(t *testing.T) {
	for _, p := range []string{"files/009/56/parser-40487.json", "wp-config.php", "."} {
		if n := testing.AllocsPerRun(100, func() {
			if err := ValidPath(p); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("ValidPath(%q): %.0f allocations, want none", p, n)
		}
	}
}
