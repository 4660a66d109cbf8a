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

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
