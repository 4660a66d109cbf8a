package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/treewalk"
)

// chunkList is a chunkSource of chunks given in advance.
type chunkList struct{ chunks []treewalk.Chunk }

func (c *chunkList) next(context.Context) (treewalk.Chunk, error) {
	if len(c.chunks) == 0 {
		return treewalk.Chunk{}, io.EOF
	}
	ch := c.chunks[0]
	c.chunks = c.chunks[1:]
	return ch, nil
}
func (c *chunkList) requests() <-chan *batch { return nil }
func (c *chunkList) close()                  {}

// Once the sender has reported a list error, --delete deletes nothing
// more, as rsync ("IO error encountered -- skipping file deletion"),
// and what it deleted before stays deleted: a/, complete in the first
// chunk, loses its extra; b/, listed in the chunk that carries the
// error, and ./, complete at the end, keep theirs; the run warns once.
func TestChunkedDeleteStopsAtListError(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "D")
	for _, p := range []string{"a/extra", "b/extra", "extra"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, p), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w, err := dest.NewWriter(dst, dest.WriterOptions{Roots: []string{"."}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	dir := func(p string) treewalk.Entry { return treewalk.Entry{Path: p, Kind: treewalk.KindDir, Mode: 0o755} }
	link := func(p string) treewalk.Entry {
		return treewalk.Entry{Path: p, Kind: treewalk.KindSymlink, Mode: 0o777, LinkTarget: "nowhere"}
	}
	src := &chunkList{chunks: []treewalk.Chunk{
		{Entries: []treewalk.Entry{dir("."), dir("a"), link("a/s")}, Closed: 1},
		{Entries: []treewalk.Entry{dir("b"), link("b/t")}, Closed: 1,
			Errors: []*treewalk.PathError{{Path: "b/gone", Err: errors.New("unreadable")}}},
		{Entries: []treewalk.Entry{dir("c")}, Last: true},
	}}
	var warned []string
	o := Options{Jobs: 1, Delete: true, ob: &observer{},
		Warnf: func(f string, a ...any) { warned = append(warned, fmt.Sprintf(f, a...)) }}
	s := &localSession{w: w, jobs: 1, ob: o.ob}
	rep := &Report{}
	ctx := context.Background()
	tr := newTracker(ctx, s, rep, nil)
	if err := newChunkRun(s, o, rep, tr, src).run(ctx); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{"a/extra": false, "b/extra": true, "extra": true, "a/s": true, "c": true} {
		if _, err := os.Lstat(filepath.Join(dst, p)); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", p, err == nil, want)
		}
	}
	if rep.Deleted != 1 || len(rep.Errors) != 1 {
		t.Errorf("deleted %d, errors %v; want 1 deleted, the list's one error", rep.Deleted, rep.Errors)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "nothing deleted") {
		t.Errorf("warnings %q, want one that nothing more is deleted", warned)
	}
}
