package restore_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
)

// Native delta of the raw method: restore, change about 1% of the tree
// (bytes edited in the middle of the 5 MiB file, same size; bytes inserted
// in the middle of a photo; an append; a truncation), restore again: only
// the changes cross the wire and the tree compares equal. With 1 MiB
// blocks, the big file is split and each block travels as its own delta.
func TestRestoreDelta(t *testing.T) {
	for _, mode := range []string{"pull", "push"} {
		for _, block := range []int64{0, 1 << 20} {
			name := mode + map[int64]string{0: "/whole", 1 << 20: "/split"}[block]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				src := filepath.Join(t.TempDir(), "alice")
				accountFixture().build(t, src)
				dst := filepath.Join(t.TempDir(), "alice")
				o := options(mode, src, dst)
				o.Writer.BlockSizeBytes = block
				first := run(t, o)
				if first.DeltaFiles != 0 {
					t.Errorf("first run: %d delta files into an empty destination", first.DeltaFiles)
				}
				treeBytes := first.Bytes

				changeFixture(t, src)
				rep := run(t, o)
				assertSameTree(t, src, dst)
				assertNoTempFiles(t, dst)
				if rep.Files != 4 || rep.DeltaFiles != 4 {
					t.Errorf("delta run: %d files written, %d as deltas; want 4, 4", rep.Files, rep.DeltaFiles)
				}
				if limit := treeBytes / 20; rep.WireBytes >= limit {
					t.Errorf("delta run: %d wire bytes, want under 5%% of the tree's %d bytes", rep.WireBytes, treeBytes)
				}
				t.Logf("delta run: %d files, %d payload bytes, %d wire bytes (tree: %d bytes)", rep.Files, rep.Bytes, rep.WireBytes, treeBytes)

				// WholeFile sends the changed files whole.
				changeFixture(t, src)
				o.WholeFile = true
				whole := run(t, o)
				assertSameTree(t, src, dst)
				if whole.DeltaFiles != 0 || whole.WireBytes < 5<<20 {
					t.Errorf("whole-file run: %d delta files, %d wire bytes", whole.DeltaFiles, whole.WireBytes)
				}
			})
		}
	}
}

// changeFixture changes four files of accountFixture's tree, each in
// another way.
func changeFixture(t *testing.T, src string) {
	t.Helper()
	uploads := filepath.Join(src, "public_html/uploads/2024/05")
	big := filepath.Join(uploads, "big.mp4")
	f, err := os.OpenFile(big, os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt(bytes.Repeat([]byte("X"), 100), 2<<20+777)
	must(t, err)
	must(t, f.Close())

	photo := filepath.Join(uploads, "photo one.jpg")
	b, err := os.ReadFile(photo)
	must(t, err)
	b = append(b[:100_000:100_000], append([]byte("inserted bytes"), b[100_000:]...)...)
	must(t, os.WriteFile(photo, b, 0))

	log := filepath.Join(src, "logs/access.log")
	f, err = os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.WriteString("127.0.0.1 - - [18/May/2024] \"GET /new HTTP/1.1\" 200 512\n")
	must(t, err)
	must(t, f.Close())

	db := filepath.Join(src, "backups/db.sql")
	fi, err := os.Stat(db)
	must(t, err)
	must(t, os.Truncate(db, fi.Size()-1000))
}

// hookDialer calls hook once, from the stream that first crosses limit
// bytes sent (read, if recv), before those bytes go on.
type hookDialer struct {
	transport.Dialer
	limit int64
	recv  bool
	once  *sync.Once
	hook  func()
}

func (d hookDialer) Dial(ctx context.Context) (transport.Stream, error) {
	s, err := d.Dialer.Dial(ctx)
	if err != nil {
		return nil, err
	}
	return &hookStream{Stream: s, d: d}, nil
}

type hookStream struct {
	transport.Stream
	d          hookDialer
	sent, recv atomic.Int64
}

func (s *hookStream) Write(p []byte) (int, error) {
	if !s.d.recv && s.sent.Add(int64(len(p))) > s.d.limit {
		s.d.once.Do(s.d.hook)
	}
	return s.Stream.Write(p)
}

func (s *hookStream) Read(p []byte) (int, error) {
	n, err := s.Stream.Read(p)
	if s.d.recv && s.recv.Add(int64(n)) > s.d.limit {
		s.d.once.Do(s.d.hook)
	}
	return n, err
}

// A basis that changes between the plan (which took its signature) and
// the data's arrival makes its delta fail; the file is sent again whole in
// the same run. A basis replaced by a symlink is not read through, even
// to a file with the very content of the old basis.
func TestRestoreDeltaBasisChanged(t *testing.T) {
	for _, mode := range []string{"pull", "push"} {
		for _, change := range []string{"edited", "symlink"} {
			t.Run(mode+"/"+change, func(t *testing.T) {
				t.Parallel()
				src := filepath.Join(t.TempDir(), "alice")
				accountFixture().build(t, src)
				dst := filepath.Join(t.TempDir(), "alice")
				o := options(mode, src, dst)
				o.Jobs = 1
				o.Compression = transfer.Compression{}
				run(t, o)
				changeFixture(t, src)

				basis := filepath.Join(dst, "public_html/uploads/2024/05/big.mp4")
				outside := filepath.Join(t.TempDir(), "outside.mp4")
				old, err := os.ReadFile(basis)
				must(t, err)
				must(t, os.WriteFile(outside, old, 0o644))
				changed := false
				hook := func() {
					changed = true
					switch change {
					case "edited": // same size: only the rebuilt data's hash tells
						f, err := os.OpenFile(basis, os.O_WRONLY, 0)
						must(t, err)
						_, err = f.WriteAt([]byte("changed under the restore"), 1000)
						must(t, err)
						must(t, f.Close())
					case "symlink":
						must(t, os.Remove(basis))
						must(t, os.Symlink(outside, basis))
					}
				}
				// The signatures cross the wire after the file list: in
				// the pull's first data request, in the push's plan reply.
				d := hookDialer{Dialer: o.Dialer, limit: 8 << 10, recv: mode == "push", once: &sync.Once{}, hook: hook}
				o.Dialer = d
				rep := run(t, o)
				if !changed {
					t.Fatal("the hook did not run")
				}
				assertSameTree(t, src, dst)
				assertNoTempFiles(t, dst)
				if rep.Files != 4 || rep.DeltaFiles != 3 {
					t.Errorf("%d files written, %d as deltas; want 4, 3 (big.mp4 sent again whole)", rep.Files, rep.DeltaFiles)
				}
				if b, err := os.ReadFile(outside); err != nil || !bytes.Equal(b, old) {
					t.Errorf("the symlink's target was changed: %v", err)
				}
			})
		}
	}
}
