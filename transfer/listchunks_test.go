package transfer

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/restoresync/restoresync/treewalk"
)

// A pulled list comes chunk by chunk, the sender walking between
// requests, and other requests go on the same stream between two chunks:
// here each chunk's files are read before the next chunk is asked for.
// The chunks, concatenated, are the sender's walk, hardlinks across
// chunks included.
func TestListChunksInterleavedWithReads(t *testing.T) {
	old := treewalk.ChunkEntries
	treewalk.ChunkEntries = 2
	t.Cleanup(func() { treewalk.ChunkEntries = old })
	dir := t.TempDir()
	writeTree(t, dir, hostingTree())
	want, err := treewalk.Walk(t.Context(), dir)
	if err != nil || len(want.Errors) > 0 {
		t.Fatalf("walk: %v %v", err, want.Errors)
	}
	ctx := testContext(t)
	c := dialPipe(t, ctx, ServerConfig{}, Hello{Role: RoleSender, Path: dir, Compression: "lz4"})
	defer c.Close()
	lr := c.ListChunks()
	var got []treewalk.Entry
	chunks := 0
	for {
		ch, err := lr.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		chunks++
		got = append(got, ch.Entries...)
		var items []Item
		for _, e := range ch.Entries {
			if e.HasData() {
				items = append(items, Item{Entry: e, Length: e.Size})
			}
		}
		if len(items) == 0 {
			continue
		}
		if err := c.SendRead(items); err != nil {
			t.Fatal(err)
		}
		w := &collectWriter{}
		errs, err := c.RecvRead(ctx, items, w)
		if err != nil {
			t.Fatal(err)
		}
		for i, it := range items {
			data, _ := os.ReadFile(filepath.Join(dir, it.Entry.Path))
			if errs[i] != nil || !bytes.Equal(w.data[itemKey(&it)], data) {
				t.Errorf("%s: %v, %d bytes read, want %d", it.Entry.Path, errs[i], len(w.data[itemKey(&it)]), len(data))
			}
		}
	}
	if !equalEntries(got, want.Entries) {
		t.Errorf("chunks give %d entries, the walk %d", len(got), len(want.Entries))
	}
	if chunks < len(want.Entries)/2 {
		t.Errorf("%d chunks for %d entries at 2 a chunk", chunks, len(want.Entries))
	}
	if _, err := lr.Next(ctx); err != io.EOF {
		t.Errorf("after the last chunk: %v, want io.EOF", err)
	}
}

// A chunk whose hardlink names an entry of an earlier chunk that was not
// marked a leader, or that lists a path of an earlier chunk again, is a
// protocol error naming the entry.
func TestListReaderRefusesChunks(t *testing.T) {
	file := func(p, to string) treewalk.Entry {
		return treewalk.Entry{Path: p, Kind: treewalk.KindFile, Mode: 0o644, LinkTo: to}
	}
	for _, tt := range []struct {
		name   string
		chunks []treewalk.Chunk
		bad    string
	}{
		{"unmarked leader", []treewalk.Chunk{{Entries: []treewalk.Entry{file("a", "")}}, {Entries: []treewalk.Entry{file("b", "a")}, Last: true}}, "b"},
		{"twice", []treewalk.Chunk{{Entries: []treewalk.Entry{file("a", "")}}, {Entries: []treewalk.Entry{file("a", "")}, Last: true}}, "a"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := fakePeer(t, "", func(in *bufio.Reader, out io.Writer) {
				var h Hello
				if readHandshake(in, &h) != nil {
					return
				}
				writeHandshake(out, helloReply{Proto: ProtocolVersion, Version: "test", Codecs: CodecNames()})
				out.Write(messageWire(t, DefaultCompression, func(e *encoder) {
					for i := range tt.chunks {
						e.status(nil)
						e.chunk(&tt.chunks[i])
					}
				}))
			})
			c, err := Handshake(testContext(t), s, Hello{Role: RoleSender, Path: "/srv", Compression: "none"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Abort()
			_, err = c.List(testContext(t))
			checkNamedProtocolError(t, err, tt.bad, "invalid file list")
			if !errors.Is(err, treewalk.ErrBadList) {
				t.Errorf("%v does not wrap ErrBadList", err)
			}
		})
	}
}

// A list request pipelined ahead of a read on the same stream does not
// hold the read while the sender's walk is held: the sender answers it
// with an empty chunk, not the last, serves the read, and the request
// asked again once the walk goes on gives the rest of the list.
func TestListRequestDoesNotHoldReadsBehindIt(t *testing.T) {
	old := treewalk.ChunkEntries
	treewalk.ChunkEntries = 2
	t.Cleanup(func() { treewalk.ChunkEntries = old })
	dir := t.TempDir()
	files := map[string]testFile{}
	for _, p := range []string{"a", "b", "c", "d", "e"} {
		files[p] = testFile{data: textBytes(31, 5000)}
	}
	writeTree(t, dir, files)
	want, err := treewalk.Walk(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	treewalk.AfterChunk = func(n int) {
		if n == 1 {
			select {
			case <-hold:
			case <-time.After(20 * time.Second):
			}
		}
	}
	t.Cleanup(func() { treewalk.AfterChunk = nil })
	ctx := testContext(t)
	c := dialPipe(t, ctx, ServerConfig{}, Hello{Role: RoleSender, Path: dir, Compression: "none"})
	defer c.Close()
	lr := c.ListChunks()
	first, err := lr.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var items []Item
	for _, e := range first.Entries {
		if e.HasData() {
			items = append(items, Item{Entry: e, Length: e.Size})
		}
	}
	if len(items) == 0 || first.Last {
		t.Fatalf("first chunk %v: want a file and more chunks", first.Entries)
	}
	// The next list request, then a read behind it.
	if err := lr.Send(); err != nil {
		t.Fatal(err)
	}
	if err := c.SendRead(items); err != nil {
		t.Fatal(err)
	}
	ch, err := lr.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-hold:
		t.Fatal("the list reply came only once the walk was released")
	default:
	}
	if len(ch.Entries) != 0 || ch.Last {
		t.Fatalf("with the walk held and a read waiting, the reply was %d entries (last %v), want an empty chunk", len(ch.Entries), ch.Last)
	}
	w := &collectWriter{}
	errs, err := c.RecvRead(ctx, items, w)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		if errs[i] != nil || !bytes.Equal(w.data[itemKey(&it)], files[it.Entry.Path].data) {
			t.Errorf("%s: %v, %d bytes", it.Entry.Path, errs[i], len(w.data[itemKey(&it)]))
		}
	}
	close(hold)
	rest, err := treewalk.CollectChunks(func() (treewalk.Chunk, error) { return lr.Next(ctx) })
	if err != nil {
		t.Fatal(err)
	}
	if got := append(first.Entries, rest.Entries...); !equalEntries(got, want.Entries) {
		t.Errorf("the chunks give %d entries, the walk %d", len(got), len(want.Entries))
	}
}
