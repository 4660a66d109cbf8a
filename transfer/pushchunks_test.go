package transfer

import (
	"errors"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/treewalk"
)

// A push's list planned chunk by chunk: the receiver plans each chunk,
// a hardlink may name a leader of an earlier chunk, and it finishes the
// planned entries named by path, as the client planned them (the
// receiver's own copy, not one the client sends again).
func TestPlanChunksFinishPlanned(t *testing.T) {
	ctx := testContext(t)
	sink := &recordSink{}
	c := dialPipe(t, ctx, ServerConfig{NewSink: sink.open}, Hello{Role: RoleReceiver, Path: t.TempDir(), Compression: "none"})
	defer c.Close()
	dir := treewalk.Entry{Path: ".", Kind: treewalk.KindDir, Mode: 0o755}
	sub := treewalk.Entry{Path: "a", Kind: treewalk.KindDir, Mode: 0o750}
	leader := treewalk.Entry{Path: "a/f", Kind: treewalk.KindFile, Mode: 0o644, Size: 3}
	link := treewalk.Entry{Path: "b", Kind: treewalk.KindFile, Mode: 0o644, Size: 3, LinkTo: "a/f"}
	sym := treewalk.Entry{Path: "c", Kind: treewalk.KindSymlink, Mode: 0o777, LinkTarget: "b"}
	if _, _, err := c.PlanChunk(ctx, &treewalk.Chunk{Entries: []treewalk.Entry{dir, sub, leader}, Leaders: []int{2}, Closed: 1}, ChunkOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.PlanChunk(ctx, &treewalk.Chunk{Entries: []treewalk.Entry{link, sym}, Last: true}, ChunkOptions{}); err != nil {
		t.Fatal(err)
	}
	if errs, err := c.FinishPlanned(ctx, []string{"a", "b", "c", "."}); err != nil || len(errs) > 0 {
		t.Fatalf("FinishPlanned: %v %v", errs, err)
	}
	var got []string
	for _, e := range sink.finished {
		got = append(got, e.Path+" "+e.LinkTo+e.LinkTarget)
	}
	if want := []string{"a ", "b a/f", "c b", ". "}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("finished %q, want %q", got, want)
	}
	if len(sink.planned) != 5 {
		t.Errorf("planned %d entries, want 5", len(sink.planned))
	}
}

// The receiver refuses, as a protocol error that ends the stream, a
// chunk whose hardlink names no leader of it or of an earlier chunk, and
// a finish of a path it does not hold (never planned, finished already,
// or a regular file no hardlink needs): the client cannot make it link
// to, or set the metadata of, what its list did not restore.
func TestPlanChunksRefused(t *testing.T) {
	ctx := testContext(t)
	dir := treewalk.Entry{Path: ".", Kind: treewalk.KindDir, Mode: 0o755}
	file := treewalk.Entry{Path: "f", Kind: treewalk.KindFile, Mode: 0o644}
	for _, tc := range []struct {
		name string
		do   func(c *Conn) error
		want string
	}{
		{"link to no leader", func(c *Conn) error {
			_, _, err := c.PlanChunk(ctx, &treewalk.Chunk{Entries: []treewalk.Entry{dir, file, {Path: "g", Kind: treewalk.KindFile, LinkTo: "f"}}}, ChunkOptions{})
			return err
		}, `hardlink to "f"`},
		{"finish unplanned", func(c *Conn) error {
			if _, _, err := c.PlanChunk(ctx, &treewalk.Chunk{Entries: []treewalk.Entry{dir, file}}, ChunkOptions{}); err != nil {
				return err
			}
			_, err := c.FinishPlanned(ctx, []string{"etc"})
			return err
		}, `finish of "etc"`},
		{"finish a plain file", func(c *Conn) error {
			if _, _, err := c.PlanChunk(ctx, &treewalk.Chunk{Entries: []treewalk.Entry{dir, file}}, ChunkOptions{}); err != nil {
				return err
			}
			_, err := c.FinishPlanned(ctx, []string{"f"})
			return err
		}, `finish of "f"`},
		{"finish twice", func(c *Conn) error {
			if _, _, err := c.PlanChunk(ctx, &treewalk.Chunk{Entries: []treewalk.Entry{dir, file}}, ChunkOptions{}); err != nil {
				return err
			}
			if _, err := c.FinishPlanned(ctx, []string{"."}); err != nil {
				return err
			}
			_, err := c.FinishPlanned(ctx, []string{"."})
			return err
		}, `finish of "."`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &recordSink{}
			c := dialPipe(t, ctx, ServerConfig{NewSink: sink.open}, Hello{Role: RoleReceiver, Path: t.TempDir(), Compression: "none"})
			defer c.Close()
			err := tc.do(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
			if !errors.Is(err, ErrProtocol) && !strings.Contains(err.Error(), "protocol error") {
				t.Errorf("%v is not a protocol error", err)
			}
		})
	}
}
