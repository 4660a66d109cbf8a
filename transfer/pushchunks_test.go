package transfer

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
		{"delete again once cleared", func(c *Conn) error {
			if _, _, err := c.PlanChunk(ctx, &treewalk.Chunk{Entries: []treewalk.Entry{dir}}, ChunkOptions{}); err != nil {
				return err
			}
			_, _, err := c.PlanChunk(ctx, &treewalk.Chunk{Entries: []treewalk.Entry{file}}, ChunkOptions{Delete: true})
			return err
		}, "chunk options"},
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

// changerSink is a recordSink that is a ChunkChanger: each chunk's
// changes are one line naming its entries and how many chunks came
// before, with the listErr it was given.
type changerSink struct {
	*recordSink
	opts   ChunkOptions
	chunks int
}

func (s *changerSink) ChunkChanges(o ChunkOptions) ListChanges { s.opts = o; return s }

func (s *changerSink) Chunk(_ context.Context, ch *treewalk.Chunk, listErr bool) (Changes, error) {
	s.chunks++
	var names []string
	for _, e := range ch.Entries {
		names = append(names, e.Path)
	}
	return Changes{Lines: []string{fmt.Sprintf("%d %s %v", s.chunks, strings.Join(names, ","), listErr)}, Deleted: s.chunks}, nil
}

// A push's --delete, -n and -i go with each chunk: the receiver gives
// each chunk to its sink's ListChanges in turn, made once with the first
// chunk's options and told of a list error once the client clears
// Delete, and returns the changes before the plan; a dry run plans
// nothing and holds nothing to finish; Itemize and DryRun are the
// list's, and Delete once cleared stays so, else the stream ends
// (ErrProtocol).
func TestPlanChunksChanges(t *testing.T) {
	ctx := testContext(t)
	dir := treewalk.Entry{Path: ".", Kind: treewalk.KindDir, Mode: 0o755}
	file := treewalk.Entry{Path: "f", Kind: treewalk.KindFile, Mode: 0o644}
	sym := treewalk.Entry{Path: "s", Kind: treewalk.KindSymlink, Mode: 0o777, LinkTarget: "f"}
	open := func(t *testing.T) (*Conn, *changerSink) {
		sink := &changerSink{recordSink: &recordSink{}}
		newSink := func(ctx context.Context, dst string, opts ReceiverOptions) (Sink, error) {
			if _, err := sink.recordSink.open(ctx, dst, opts); err != nil {
				return nil, err
			}
			return sink, nil
		}
		c := dialPipe(t, ctx, ServerConfig{NewSink: newSink}, Hello{Role: RoleReceiver, Path: t.TempDir(), Compression: "none"})
		t.Cleanup(func() { c.Close() })
		return c, sink
	}
	t.Run("delete and itemize", func(t *testing.T) {
		c, sink := open(t)
		o := ChunkOptions{Delete: true, Itemize: true}
		plan, chg, err := c.PlanChunk(ctx, &treewalk.Chunk{Entries: []treewalk.Entry{dir, file}}, o)
		if err != nil || len(plan.Need) != 1 || !slices.Equal(chg.Lines, []string{"1 .,f false"}) || chg.Deleted != 1 {
			t.Fatalf("first chunk: plan %+v, changes %+v, %v", plan, chg, err)
		}
		o.Delete = false
		_, chg, err = c.PlanChunk(ctx, &treewalk.Chunk{Entries: []treewalk.Entry{sym}, Last: true}, o)
		if err != nil || !slices.Equal(chg.Lines, []string{"2 s true"}) {
			t.Fatalf("second chunk: changes %+v, %v", chg, err)
		}
		if sink.opts != (ChunkOptions{Delete: true, Itemize: true}) || len(sink.planned) != 3 {
			t.Errorf("made with %+v, planned %d entries; want the first chunk's options, 3", sink.opts, len(sink.planned))
		}
	})
	t.Run("dry run", func(t *testing.T) {
		c, sink := open(t)
		o := ChunkOptions{Delete: true, Itemize: true, DryRun: true}
		_, chg, err := c.PlanChunk(ctx, &treewalk.Chunk{Entries: []treewalk.Entry{dir, sym}, Last: true}, o)
		if err != nil || !slices.Equal(chg.Lines, []string{"1 .,s false"}) {
			t.Fatalf("changes %+v, %v", chg, err)
		}
		if len(sink.planned) != 0 {
			t.Errorf("a dry run planned %d entries", len(sink.planned))
		}
		if _, err := c.FinishPlanned(ctx, []string{"s"}); err == nil || !errors.Is(err, ErrProtocol) && !strings.Contains(err.Error(), "protocol error") {
			t.Errorf("finish after a dry run: %v, want a protocol error", err)
		}
	})
	t.Run("itemize dropped", func(t *testing.T) {
		c, _ := open(t)
		if _, _, err := c.PlanChunk(ctx, &treewalk.Chunk{Entries: []treewalk.Entry{dir}}, ChunkOptions{Itemize: true}); err != nil {
			t.Fatal(err)
		}
		_, _, err := c.PlanChunk(ctx, &treewalk.Chunk{Entries: []treewalk.Entry{file}}, ChunkOptions{})
		if err == nil || !strings.Contains(err.Error(), "chunk options") {
			t.Errorf("got %v, want the options refused", err)
		}
	})
}
