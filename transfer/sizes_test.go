package transfer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// One sizes request sizes every path: a tree's regular files once each
// (a hardlinked file once, symlinks not followed below the path, even to
// a big file or a directory holding one), a single file, an empty directory; a path missing or
// climbing out of the served root has its own error, and the others are
// still sized. SizeOf sizes a local path the same.
func TestSizesOneRequestManyTrees(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]testFile{
		"home/alice/public_html/index.php": {data: []byte("<?php echo 1;")},
		"home/alice/mail/cur/1":            {data: []byte(strings.Repeat("m", 5000))},
		"home/alice/link":                  {symlink: "../big/blob"},
		"home/alice/public_html/dirlink":   {symlink: "../../../big"},
		"home/bob/a":                       {data: []byte("abc")},
		"big/blob":                         {data: make([]byte, 1<<20)},
	})
	if err := os.Link(filepath.Join(root, "home/alice/mail/cur/1"), filepath.Join(root, "home/alice/mail/cur/1.hard")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "home/empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := PipeDialer{Config: ServerConfig{Root: root, Version: "srv"}}
	paths := []string{"/home/alice", "/home/bob/a", "/home/empty", "/home/nobody", "/../etc"}
	got, err := Sizes(testContext(t), d, paths, "test", Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	want := []PathSize{{Bytes: 13 + 5000, Files: 2}, {Bytes: 3, Files: 1}, {}, {}, {}}
	for i, w := range want {
		g := got[i]
		if g.Bytes != w.Bytes || g.Files != w.Files {
			t.Errorf("%s: %d bytes, %d files; want %d, %d", paths[i], g.Bytes, g.Files, w.Bytes, w.Files)
		}
		if wantErr := i >= 3; (g.Error != "") != wantErr {
			t.Errorf("%s: error %q, want one: %v", paths[i], g.Error, wantErr)
		}
	}
	if !strings.Contains(got[4].Error, "leaves the served root") {
		t.Errorf("/../etc: error %q, want the served root's refusal", got[4].Error)
	}
	n, files, err := SizeOf(testContext(t), filepath.Join(root, "home/alice"))
	if err != nil || n != want[0].Bytes || files != want[0].Files {
		t.Errorf("SizeOf = %d, %d, %v; want %d, %d", n, files, err, want[0].Bytes, want[0].Files)
	}
}
