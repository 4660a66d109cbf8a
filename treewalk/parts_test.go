package treewalk

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// A part that ImpliesRoot lists its Base as "." first of all, once, with
// the Base's mode, whatever the order of the parts; a list without such a
// part has no "."; a part that is Base itself lists "." once. Each list
// passes CheckList.
func TestWalkPartsImpliedRoot(t *testing.T) {
	base := t.TempDir()
	for _, p := range []string{"a/x", "b/y", "-c"} {
		os.MkdirAll(filepath.Dir(filepath.Join(base, p)), 0o755)
		if err := os.WriteFile(filepath.Join(base, p), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(base, 0o711)
	root, err := os.OpenRoot(base)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, c := range []struct {
		name  string
		parts []Part
		want  []string
	}{
		{"implied", []Part{{Base: root, Rel: "-c"}, {Base: root, Rel: "b/y", ImpliesRoot: true}, {Base: root, Rel: "a/x", ImpliesRoot: true}},
			[]string{".", "-c", "a", "a/x", "b", "b/y"}},
		{"not-implied", []Part{{Base: root, Rel: "b/y"}, {Base: root, Rel: "a/x"}}, []string{"a", "a/x", "b", "b/y"}},
		{"whole-base", []Part{{Base: root, Rel: "."}, {Base: root, Rel: "a/x", ImpliesRoot: true}}, []string{".", "-c", "a", "a/x", "b", "b/y"}},
		{"implied-by-covered", []Part{{Base: root, Rel: "a"}, {Base: root, Rel: "a/x", ImpliesRoot: true}}, []string{".", "a", "a/x"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := WalkParts(context.Background(), c.parts, nil)
			if err != nil || len(l.Errors) > 0 {
				t.Fatalf("%v %v", err, l.Errors)
			}
			var got []string
			for _, e := range l.Entries {
				got = append(got, e.Path)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("listed %q, want %q", got, c.want)
			}
			if got[0] == "." && (l.Entries[0].Kind != KindDir || l.Entries[0].Mode != 0o711) {
				t.Errorf(`".": %v mode %o, want the base's directory, 0711`, l.Entries[0].Kind, l.Entries[0].Mode)
			}
			if err := CheckList(l.Entries); err != nil {
				t.Error(err)
			}
		})
	}
}

// An implied directory carries its own xattrs, not its base's.
func TestWalkPartsImpliedDirXattrs(t *testing.T) {
	base := t.TempDir()
	if err := os.MkdirAll(filepath.Join(base, "alice/x"), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, v := range map[string]string{".": "base", "alice": "alice"} {
		if err := unix.Setxattr(filepath.Join(base, p), "user.who", []byte(v), 0); err != nil {
			t.Fatalf("setxattr %s: %v", p, err)
		}
	}
	root, err := os.OpenRoot(base)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	l, err := WalkParts(context.Background(), []Part{{Base: root, Rel: "alice/x"}}, nil)
	if err != nil || len(l.Errors) > 0 || len(l.Entries) != 2 || l.Entries[0].Path != "alice" {
		t.Fatalf("%v %v %+v", err, l.Errors, l.Entries)
	}
	if x := l.Entries[0].Xattrs; len(x) != 1 || x[0].Name != "user.who" || string(x[0].Value) != "alice" {
		t.Errorf("implied directory alice has xattrs %+v, want its own user.who=alice", x)
	}
}

// Parts of two bases that give the same paths merge: each path once, in
// tree order, the first base given winning a file and a directory's
// metadata, a directory winning over a file, the contents of both
// directories listed; a hardlink whose walk leader lost its path to the other base is led by
// its remaining member. The list passes CheckList.
func TestWalkPartsMerge(t *testing.T) {
	b1, b2 := t.TempDir(), t.TempDir()
	for dir, files := range map[string][]string{b1: {"x", "a", "b/in", "d/f"}, b2: {"x", "a/in", "b", "d/f", "d/g", "d-e"}} {
		for _, p := range files {
			os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
			if err := os.WriteFile(filepath.Join(dir, p), []byte(dir+p), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Link(filepath.Join(b2, "x"), filepath.Join(b2, "y")); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(b1, "d"), 0o700)
	r1, err := os.OpenRoot(b1)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	r2, err := os.OpenRoot(b2)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	l, err := WalkParts(context.Background(), []Part{{Base: r1, Rel: "."}, {Base: r2, Rel: "."}}, nil)
	if err != nil || len(l.Errors) > 0 {
		t.Fatalf("%v %v", err, l.Errors)
	}
	want := []string{".", "a", "a/in", "b", "b/in", "d", "d/f", "d/g", "d-e", "x", "y"}
	var got []string
	for _, e := range l.Entries {
		got = append(got, e.Path)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listed %q, want %q", got, want)
	}
	if d := l.Entries[5]; d.Mode != 0o700 {
		t.Errorf("d: mode %o, want the first base's 0700", d.Mode)
	}
	if y := l.Entries[10]; y.LinkTo != "" {
		t.Errorf("y: LinkTo %q, want its own data (its leader x lost its path)", y.LinkTo)
	}
	if err := CheckList(l.Entries); err != nil {
		t.Error(err)
	}
}
