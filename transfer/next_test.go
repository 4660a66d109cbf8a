package transfer

import "testing"

// A sizes request, and a session ended with msgNext, leave the agent
// waiting on the same stream: a next handshake there, for another tree,
// is served as a first one is, nothing of one session is taken for the
// next, and the agent ends cleanly when the client then closes the
// stream.
func TestServeSessionsOnOneStream(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]testFile{
		"alice/index.php": {data: []byte("alice")},
		"bob/a":           {data: []byte("bob1")},
		"bob/b":           {data: []byte("bob2")},
	})
	ctx := testContext(t)
	s := PipeStream(ctx, ServerConfig{Root: root, Version: "srv"})
	defer s.Close()
	sc, err := Handshake(ctx, s, Hello{Role: RoleSizes, SizePaths: []string{"/bob"}, Compression: "none"})
	if err != nil || len(sc.sizes) != 1 || sc.sizes[0].Bytes != 8 {
		t.Fatalf("sizes: %+v, %v; want /bob's 8 bytes", sc, err)
	}
	for _, c := range []struct {
		path  string
		files int
	}{{"/alice", 1}, {"/bob", 2}, {"/alice", 1}} {
		conn, err := Handshake(ctx, s, Hello{Role: RoleSender, Path: c.path, Compression: "zstd:1"})
		if err != nil {
			t.Fatalf("%s: handshake: %v", c.path, err)
		}
		list, err := conn.List(ctx)
		if err != nil {
			t.Fatalf("%s: list: %v", c.path, err)
		}
		files := 0
		for _, e := range list.Entries {
			if e.Size > 0 {
				files++
			}
		}
		if files != c.files {
			t.Errorf("%s: %d files listed, want %d", c.path, files, c.files)
		}
		ended, err := conn.endSession()
		if err != nil || !ended {
			t.Fatalf("%s: end of session: ended %v, %v", c.path, ended, err)
		}
	}
	s.CloseWrite()
	ps := s.(*pipeStream)
	<-ps.done // the agent ends when the stream closes
	if e := s.Stderr(); e != "" {
		t.Errorf("the agent ended with %q, want a clean end", e)
	}
}
