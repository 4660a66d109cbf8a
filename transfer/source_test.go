package transfer

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/restoresync/restoresync/treewalk"
)

// A symlink planted on the sending side after the walk, in place of a file
// or of one of its directories, must make the item fail: following it would
// send another file's contents (wp-config.php's, say) under the listed name.
func TestLocalSourceRefusesSymlinkPlantedAfterWalk(t *testing.T) {
	dir := t.TempDir()
	for p, data := range map[string]string{
		"public_html/uploads/photo.jpg": "JPEG-DATA-0123",
		"public_html/wp-config.php":     "DB_PASSWORD=x!",
		"other/photo.jpg":               "SECRET-DATA-99",
	} {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, p), []byte(data), 0o644))
	}
	src, err := OpenLocalSource(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	list, err := src.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var photo treewalk.Entry
	for _, e := range list.Entries {
		if e.Path == "public_html/uploads/photo.jpg" {
			photo = e
		}
	}
	it := &Item{Entry: photo, Length: photo.Size}
	read := func() (string, error) {
		r, err := src.Open(context.Background(), it)
		if err != nil {
			return "", err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		return string(b), err
	}
	if got, err := read(); err != nil || got != "JPEG-DATA-0123" {
		t.Fatalf("before planting: %q, %v", got, err)
	}

	// The file becomes a symlink to a same-size secret.
	p := filepath.Join(dir, "public_html/uploads/photo.jpg")
	must(t, os.Remove(p))
	must(t, os.Symlink("../wp-config.php", p))
	if got, err := read(); !errors.Is(err, treewalk.ErrSymlinkInPath) {
		t.Fatalf("file replaced by a symlink: read %q, err %v; want ErrSymlinkInPath", got, err)
	}

	// A directory on the way becomes a symlink to another directory.
	must(t, os.Remove(p))
	must(t, os.WriteFile(p, []byte("JPEG-DATA-0123"), 0o644))
	up := filepath.Join(dir, "public_html/uploads")
	must(t, os.Rename(up, up+".moved"))
	must(t, os.Symlink("../other", up))
	if got, err := read(); !errors.Is(err, treewalk.ErrSymlinkInPath) {
		t.Fatalf("directory replaced by a symlink: read %q, err %v; want ErrSymlinkInPath", got, err)
	}
}

// A read request's batch resolves each directory once for its files, with
// the same refusals: a file, or a directory on its way, replaced by a
// symlink since the walk makes the item fail in a new request; and a
// request that resolved the directory before the swap goes on reading the
// directory it resolved (the listed file), never the symlink's target.
func TestLocalSourceBatchRefusesSymlinkPlantedAfterWalk(t *testing.T) {
	dir := t.TempDir()
	for p, data := range map[string]string{
		"public_html/uploads/photo.jpg": "JPEG-DATA-0123",
		"public_html/uploads/logo.png":  "PNG-DATA-45678",
		"public_html/wp-config.php":     "DB_PASSWORD=x!",
		"other/photo.jpg":               "SECRET-DATA-99",
		"other/logo.png":                "SECRET-DATA-77",
	} {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, p), []byte(data), 0o644))
	}
	src, err := OpenLocalSource(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	list, err := src.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	items := map[string]*Item{}
	for _, e := range list.Entries {
		items[e.Path] = &Item{Entry: e, Length: e.Size}
	}
	read := func(b *sourceBatch, p string) (string, error) {
		r, err := b.Open(context.Background(), items[p])
		if err != nil {
			return "", err
		}
		defer r.Close()
		got, err := io.ReadAll(r)
		return string(got), err
	}
	const photo, logo = "public_html/uploads/photo.jpg", "public_html/uploads/logo.png"
	held := src.readBatch()
	defer held.Close()
	if got, err := read(held, photo); err != nil || got != "JPEG-DATA-0123" {
		t.Fatalf("before planting: %q, %v", got, err)
	}

	// The file becomes a symlink to a same-size secret.
	p := filepath.Join(dir, photo)
	must(t, os.Remove(p))
	must(t, os.Symlink("../wp-config.php", p))
	b := src.readBatch()
	if got, err := read(b, photo); !errors.Is(err, treewalk.ErrSymlinkInPath) {
		t.Fatalf("file replaced by a symlink: read %q, err %v; want ErrSymlinkInPath", got, err)
	}
	b.Close()

	// A directory on the way becomes a symlink to another directory.
	must(t, os.Remove(p))
	must(t, os.WriteFile(p, []byte("JPEG-DATA-0123"), 0o644))
	up := filepath.Join(dir, "public_html/uploads")
	must(t, os.Rename(up, up+".moved"))
	must(t, os.Symlink("../other", up))
	for _, f := range []string{photo, logo} {
		b := src.readBatch()
		if got, err := read(b, f); !errors.Is(err, treewalk.ErrSymlinkInPath) {
			t.Fatalf("%s: directory replaced by a symlink: read %q, err %v; want ErrSymlinkInPath", f, got, err)
		}
		b.Close()
	}
	// The batch that resolved the directory before reads the listed
	// file from it, not the secret the symlink points at.
	if got, err := read(held, logo); err != nil || got != "PNG-DATA-45678" {
		t.Fatalf("batch that resolved the directory before the swap: read %q, %v; want the listed file's data", got, err)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Every source opened on one selection of several bases, whether or not
// it listed the tree (each connection of a restore opens its own), reads
// each listed file from the base whose entry the merged list keeps: the
// first part given that reaches it, passing over a base that lacks it and
// one whose walk does not reach it (a directory on the way excluded,
// which another part implies).
func TestLocalSourceReadsMergedFilesFromTheirBase(t *testing.T) {
	b1, b2 := t.TempDir(), t.TempDir()
	for p, data := range map[string]string{
		b1 + "/d/f": "f of b1", b1 + "/a/sub/f": "excluded in b1", b1 + "/x": "x of b1",
		b2 + "/d/f": "f of b2", b2 + "/d/g": "g of b2", b2 + "/a/sub/f": "f of b2", b2 + "/x": "x of b2",
	} {
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(data), 0o644))
	}
	sel := Selection{
		Roots:   []SourceRoot{{Base: b1, Rel: "d"}, {Base: b1, Rel: "a"}, {Base: b1, Rel: "x"}, {Base: b2, Rel: "a/sub/f"}, {Base: b2, Rel: "."}},
		Filters: []string{"- /a/sub/"},
	}
	want := map[string]string{"d/f": "f of b1", "d/g": "g of b2", "a/sub/f": "f of b2", "x": "x of b1"}
	lister, err := OpenSelection(sel, OpenBase)
	if err != nil {
		t.Fatal(err)
	}
	defer lister.Close()
	list, err := lister.List(context.Background())
	if err != nil || len(list.Errors) > 0 {
		t.Fatalf("%v %v", err, list.Errors)
	}
	reader, err := OpenSelection(sel, OpenBase)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	files := 0
	for _, e := range list.Entries {
		if e.Kind != treewalk.KindFile {
			continue
		}
		files++
		for name, src := range map[string]*LocalSource{"the lister": lister, "another source": reader} {
			r, err := src.Open(context.Background(), &Item{Entry: e, Length: e.Size})
			if err != nil {
				t.Fatalf("%s: open %s: %v", name, e.Path, err)
			}
			b, err := io.ReadAll(r)
			r.Close()
			if err != nil || string(b) != want[e.Path] {
				t.Errorf("%s: %s read %q (%v), want %q", name, e.Path, b, err, want[e.Path])
			}
		}
	}
	if files != len(want) {
		t.Errorf("listed %d files, want %d", files, len(want))
	}
}
