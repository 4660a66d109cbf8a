package transfer

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/restoresync/restoresync/treewalk"
)

// Under --compress auto the puller's frames (list and read requests,
// signatures) go uncompressed: they carry no file data, so compressing
// them would only cost the puller CPU and the memory of a zstd encoder.
// The sender's data frames are still compressed.
func TestPullerFramesUncompressedUnderAuto(t *testing.T) {
	dir := t.TempDir()
	text := []byte("<?php echo esc_html( get_option( 'blogname' ) ); ?>\n")
	for i := range 3000 {
		p := filepath.Join(dir, fmt.Sprintf("wp-content/cache/page-%05d-with-a-long-cache-name.html", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, text, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := testContext(t)
	c := dialPipe(t, ctx, ServerConfig{}, Hello{Role: RoleSender, Path: dir, Compression: "auto"})
	defer c.Close()
	lr := c.ListChunks()
	l, err := treewalk.CollectChunks(func() (treewalk.Chunk, error) { return lr.Next(ctx) })
	if err != nil {
		t.Fatal(err)
	}
	var items []Item
	for _, e := range l.Entries {
		if e.HasData() {
			items = append(items, Item{Entry: e, Length: e.Size})
		}
	}
	if err := c.SendRead(items); err != nil {
		t.Fatal(err)
	}
	w := &collectWriter{}
	if _, err := c.RecvRead(ctx, items, w); err != nil {
		t.Fatal(err)
	}
	sent := c.SentStats()
	if sent.WireBytes == 0 {
		t.Fatal("the puller's frames were not counted")
	}
	for _, cs := range sent.Codecs {
		if cs.Codec != "none" {
			t.Errorf("puller sent %d bytes as %s, want none", cs.RawBytes, cs.Codec)
		}
	}
	peer, err := c.PeerStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	compressed := false
	for _, cs := range peer.Codecs {
		compressed = compressed || (cs.Codec != "none" && cs.WireBytes < cs.RawBytes)
	}
	if !compressed {
		t.Errorf("the sender compressed none of its text: %+v", peer.Codecs)
	}
}
