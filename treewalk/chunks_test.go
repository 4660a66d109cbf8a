package treewalk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// chunkTree makes a tree of nested directories, files and hardlinks whose
// groups span directories far apart in walk order.
func chunkTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for d := range 6 {
		for f := range 7 {
			p := filepath.Join(root, fmt.Sprintf("d%d", d), fmt.Sprintf("s%d", f%2), fmt.Sprintf("f%d", f))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, l := range [][2]string{{"d0/s0/f0", "d5/s1/link"}, {"d0/s0/f0", "d3/link"}, {"d2/s1/f1", "d4/s0/link"}} {
		if err := os.Link(filepath.Join(root, l[0]), filepath.Join(root, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("d0", filepath.Join(root, "sym")); err != nil {
		t.Fatal(err)
	}
	return root
}

// rootChunks walks dir in chunks (WalkRootChunks), closed at the end of
// the test.
func rootChunks(t *testing.T, dir string) *Chunks {
	t.Helper()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := WalkRootChunks(context.Background(), r)
	t.Cleanup(func() {
		c.Close()
		r.Close()
	})
	return c
}

func setChunkEntries(t *testing.T, n int) {
	old := ChunkEntries
	ChunkEntries = n
	t.Cleanup(func() { ChunkEntries = old })
}

// A chunked walk gives the entries and errors of Walk, in its order, in
// chunks of at most ChunkEntries+1 entries, whatever ChunkEntries is; its
// Leaders are the groups' leaders; and ListChecker accepts its chunks,
// hardlinks to leaders of earlier chunks included.
func TestWalkRootChunksIsWalk(t *testing.T) {
	dir := chunkTree(t)
	want, err := Walk(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2, 5, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			setChunkEntries(t, n)
			c := rootChunks(t, dir)
			var got List
			var leaders []string
			var chk ListChecker
			chunks := 0
			for {
				ch, err := c.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				chunks++
				if len(ch.Entries) > n {
					t.Errorf("chunk of %d entries, ChunkEntries %d", len(ch.Entries), n)
				}
				if err := chk.Check(ch); err != nil {
					t.Errorf("chunk %d: %v", chunks, err)
				}
				for _, i := range ch.Leaders {
					leaders = append(leaders, ch.Entries[i].Path)
				}
				got.Entries = append(got.Entries, ch.Entries...)
				got.Errors = append(got.Errors, ch.Errors...)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("chunks give %d entries, %v; Walk %d, %v", len(got.Entries), got.Errors, len(want.Entries), want.Errors)
			}
			if n < 5 && chunks < 10 {
				t.Errorf("%d chunks of at most %d of %d entries", chunks, n, len(want.Entries))
			}
			if wantL := []string{"d0/s0/f0", "d2/s1/f1"}; !reflect.DeepEqual(leaders, wantL) {
				t.Errorf("leaders %q, want %q", leaders, wantL)
			}
		})
	}
}

// Several parts are merged, then cut into chunks: the same list as
// WalkParts, the selection's errors at its end, leaders marked.
func TestWalkPartsChunksIsWalkParts(t *testing.T) {
	setChunkEntries(t, 3)
	dir := chunkTree(t)
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, parts := range [][]Part{
		{{Base: r, Rel: "d0"}, {Base: r, Rel: "d5", ImpliesRoot: true}, {Base: r, Rel: "d3"}},
		{{Base: r, Rel: "d2/s1", ImpliesRoot: true}},
	} {
		want, err := WalkParts(context.Background(), parts, nil)
		if err != nil {
			t.Fatal(err)
		}
		extra := &PathError{Path: "gone", Err: errors.New("no such file")}
		want.Errors = append(want.Errors, extra)
		c := WalkPartsChunks(context.Background(), parts, nil, []*PathError{extra})
		var chk ListChecker
		var got List
		for {
			ch, err := c.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := chk.Check(ch); err != nil {
				t.Error(err)
			}
			got.Entries = append(got.Entries, ch.Entries...)
			got.Errors = append(got.Errors, ch.Errors...)
		}
		c.Close()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("chunks give %v; WalkParts %v", got, want)
		}
	}
}

// ListChecker refuses what CheckList refuses across chunks: a path twice
// (or out of tree order), an entry beneath a file, a hardlink to an entry
// that is not a marked leader.
func TestListCheckerRefuses(t *testing.T) {
	f := func(p string) Entry { return Entry{Path: p, Kind: KindFile} }
	d := func(p string) Entry { return Entry{Path: p, Kind: KindDir} }
	for _, c := range []struct {
		name   string
		chunks []Chunk
	}{
		{"twice", []Chunk{{Entries: []Entry{d("."), f("a")}}, {Entries: []Entry{f("a")}}}},
		{"order", []Chunk{{Entries: []Entry{d("."), f("b")}}, {Entries: []Entry{f("a")}}}},
		{"beneath-file", []Chunk{{Entries: []Entry{d("."), f("a")}}, {Entries: []Entry{d("a/b")}}}},
		{"beneath-file-deep", []Chunk{{Entries: []Entry{f("a"), f("a/b/c")}}}},
		{"unmarked-leader", []Chunk{{Entries: []Entry{f("a")}}, {Entries: []Entry{{Path: "b", Kind: KindFile, LinkTo: "a"}}}}},
		{"kind", []Chunk{{Entries: []Entry{f("a")}, Leaders: []int{0}}, {Entries: []Entry{{Path: "b", Kind: KindSymlink, LinkTo: "a", LinkTarget: "x"}}}}},
		{"dir-leader", []Chunk{{Entries: []Entry{d("a")}, Leaders: []int{0}}}},
		{"leader-range", []Chunk{{Entries: []Entry{f("a")}, Leaders: []int{1}}}},
		{"beneath-closed", []Chunk{{Entries: []Entry{d("."), d("a"), f("a/x")}, Closed: 1}, {Entries: []Entry{f("a/y")}}}},
		{"closed-too-many", []Chunk{{Entries: []Entry{d("."), f("x")}, Closed: 2}}},
	} {
		var chk ListChecker
		var err error
		for _, ch := range c.chunks {
			if err = chk.Check(ch); err != nil {
				break
			}
		}
		if !errors.Is(err, ErrBadList) {
			t.Errorf("%s: %v, want ErrBadList", c.name, err)
		}
	}
}

// A chunk says which directories it completes: those whose last name
// its last entry is (through their last subdirectory), not one whose
// listing is still to come.
func TestChunksClosed(t *testing.T) {
	setChunkEntries(t, 1)
	dir := t.TempDir()
	for _, p := range []string{"d/a", "d/b", "d/s/x", "e"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := rootChunks(t, dir)
	got := map[string]int{}
	for {
		ch, err := c.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(ch.Entries) > 0 {
			got[ch.Entries[len(ch.Entries)-1].Path] = ch.Closed
		}
	}
	want := map[string]int{".": 0, "d": 0, "d/a": 0, "d/b": 0, "d/s": 0, "d/s/x": 2, "e": 1}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("closed by the chunk ending at each entry: %v, want %v", got, want)
	}
}

// The merge of several parts as they are walked gives WalkParts' list
// exactly (entries, their order, their metadata, hardlinks led by the
// first member in the list), whatever the chunk size and the order of the
// parts: parts of two bases giving the same paths (files, directories,
// a file against a directory), a hardlink whose members are in different
// parts and one whose walk leader loses its path, implied directories and
// roots, a part below another and one above another, a filter, and parts that cannot be listed
// (missing, below a file), whose errors are WalkParts' too.
func TestWalkPartsChunksMergeIsWalkParts(t *testing.T) {
	b1, b2 := chunkTree(t), t.TempDir()
	for _, p := range []string{"x", "d0/s0/f0", "d0/s9/new", "d1", "d3/s1/f9", "sym/in", "zz/a/b"} {
		os.MkdirAll(filepath.Dir(filepath.Join(b2, p)), 0o755)
		if err := os.WriteFile(filepath.Join(b2, p), []byte(p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range [][2]string{{"x", "y"}, {"d0/s0/f0", "zz/link"}} {
		if err := os.Link(filepath.Join(b2, l[0]), filepath.Join(b2, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(b2, "d0"), 0o700)
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
	filter, err := NewFilter([]Rule{{Include: false, Pattern: "s1/"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		parts []Part
		f     *Filter
	}{
		"two bases":                  {[]Part{{Base: r2, Rel: "."}, {Base: r1, Rel: "."}}, nil},
		"two bases, the other first": {[]Part{{Base: r1, Rel: "."}, {Base: r2, Rel: "."}}, nil},
		"a part, then its base":      {[]Part{{Base: r1, Rel: "d2/s1"}, {Base: r2, Rel: "d0", ImpliesRoot: true}, {Base: r1, Rel: "."}, {Base: r1, Rel: "d4"}}, nil},
		"files-from": {[]Part{{Base: r1, Rel: "d5/s1/link"}, {Base: r1, Rel: "d0", ImpliesRoot: true}, {Base: r1, Rel: "d0/s0"},
			{Base: r1, Rel: "gone"}, {Base: r1, Rel: "sym/in"}, {Base: r1, Rel: "d3", ImpliesRoot: true}, {Base: r1, Rel: "d4/s0/link"}}, nil},
		"mixed, filtered": {[]Part{{Base: r1, Rel: "d0"}, {Base: r2, Rel: "d0"}, {Base: r2, Rel: "zz/a", ImpliesRoot: true},
			{Base: r1, Rel: "d3"}, {Base: r2, Rel: "d3"}, {Base: r2, Rel: "x"}, {Base: r1, Rel: "d1"}, {Base: r2, Rel: "d1"}}, filter},
	} {
		want, err := WalkParts(context.Background(), c.parts, c.f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 2, 5, 1000} {
			t.Run(fmt.Sprintf("%s/%d", name, n), func(t *testing.T) {
				setChunkEntries(t, n)
				ch := WalkPartsChunks(context.Background(), c.parts, c.f, nil)
				defer ch.Close()
				var chk ListChecker
				var got List
				for {
					chunk, err := ch.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					if err := chk.Check(chunk); err != nil {
						t.Error(err)
					}
					got.Entries = append(got.Entries, chunk.Entries...)
					got.Errors = append(got.Errors, chunk.Errors...)
				}
				if !reflect.DeepEqual(got.Entries, want.Entries) {
					t.Errorf("merged as walked:\n%v\nWalkParts:\n%v", paths(got.Entries), paths(want.Entries))
					for i := range min(len(got.Entries), len(want.Entries)) {
						if !reflect.DeepEqual(got.Entries[i], want.Entries[i]) {
							t.Errorf("first difference: %+v\nWalkParts: %+v", got.Entries[i], want.Entries[i])
							break
						}
					}
				}
				if fmt.Sprint(got.Errors) != fmt.Sprint(want.Errors) {
					t.Errorf("errors %v, WalkParts %v", got.Errors, want.Errors)
				}
			})
		}
	}
}

// paths returns the entries' paths, with " => LEADER" for hardlinks.
func paths(entries []Entry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Path
		if e.LinkTo != "" {
			out[i] += " => " + e.LinkTo
		}
	}
	return out
}

// NextOr returns a ready chunk even when wake is ready too, returns
// nothing (ok false) when wake delivers while the walk is held, takes
// the chunk it did not return on the next call, and ends with io.EOF.
func TestChunksNextOr(t *testing.T) {
	setChunkEntries(t, 1)
	dir := t.TempDir()
	for _, p := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(dir, p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hold := make(chan struct{})
	AfterChunk = func(n int) {
		if n == 1 {
			<-hold
		}
	}
	t.Cleanup(func() { AfterChunk = nil })
	c := rootChunks(t, dir)
	closed := make(chan struct{})
	close(closed)
	var got []string
	// The first chunk comes whether or not wake is ready.
	for len(got) == 0 {
		ch, ok, err := c.NextOr(closed)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			got = append(got, paths(ch.Entries)...)
		}
	}
	// The walk is held after its first chunk: a wake ends the wait with
	// nothing taken.
	wake := make(chan struct{}, 1)
	wake <- struct{}{}
	if ch, ok, err := c.NextOr(wake); ok || err != nil {
		t.Fatalf("with the walk held, NextOr gave %v, ok %v, %v; want nothing", paths(ch.Entries), ok, err)
	}
	close(hold)
	for {
		ch, ok, err := c.NextOr(nil)
		if !ok {
			t.Fatal("NextOr with a nil wake returned without a chunk")
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, paths(ch.Entries)...)
	}
	if want := []string{".", "a", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("NextOr gave %v, want %v", got, want)
	}
}
