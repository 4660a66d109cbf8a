package transfer

import (
	"fmt"
	"slices"
	"testing"

	"github.com/zeebo/xxh3"
)

// The agent expands a pattern beneath its served root, component by
// component, and no match is reached through a symlink that leaves the
// root; a pattern that climbs out of it is refused.
func TestGlobBeneathServedRoot(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]testFile{
		"snapshots/daily.0/alice/wp-config.php":  {data: []byte("new")},
		"snapshots/daily.1/alice/wp-config.php":  {data: []byte("old")},
		"snapshots/daily.2/alice/index.php":      {data: []byte("<?php")},
		"snapshots/weekly.0/alice/wp-config.php": {data: []byte("old")},
		"snapshots/daily.9":                      {symlink: "/etc"},
		"escape":                                 {symlink: "/"},
	})
	d := PipeDialer{Config: ServerConfig{Root: root, Version: "srv"}}
	ctx := testContext(t)
	for _, c := range []struct {
		pattern string
		want    []string
	}{
		{"/snapshots/daily.*/alice/wp-config.php", []string{"/snapshots/daily.0/alice/wp-config.php", "/snapshots/daily.1/alice/wp-config.php"}},
		{"snapshots/daily.[01]/alice/", []string{"snapshots/daily.0/alice/", "snapshots/daily.1/alice/"}},
		{"/snapshots/daily.9/pass*", nil},
		{"/escape/etc/pass*", nil},
		{"/snapshots/*/nothing", nil},
	} {
		got, err := Glob(ctx, d, c.pattern, "test", Timeouts{})
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Glob(%q) = %q, %v; want %q", c.pattern, got, err, c.want)
		}
	}
	if _, err := Glob(ctx, d, "/../*", "test", Timeouts{}); err == nil {
		t.Errorf("Glob(\"/../*\") succeeded; want the pattern refused, as it leaves the served root")
	}
}

// The agent hashes the files of a selection where they are: the xxh3-64
// of each regular file's bytes, by file-list path.
func TestSumsOfASelection(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]testFile{
		"alice/wp-config.php": {data: []byte("<?php define('DB', 'x');\n")},
		"alice/empty":         {data: []byte{}},
		"alice/link":          {symlink: "wp-config.php"},
	})
	d := PipeDialer{Config: ServerConfig{Root: root, Version: "srv"}}
	sums, err := Sums(testContext(t), d, Selection{Roots: []SourceRoot{{Base: "/alice", Rel: "."}}}, "test", Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"wp-config.php": fmt.Sprintf("%016x", xxh3.Hash([]byte("<?php define('DB', 'x');\n"))),
		"empty":         fmt.Sprintf("%016x", xxh3.Hash(nil)),
	}
	if len(sums) != len(want) || sums["wp-config.php"] != want["wp-config.php"] || sums["empty"] != want["empty"] {
		t.Errorf("Sums = %v, want %v", sums, want)
	}
	if _, err := Sums(testContext(t), d, Selection{Roots: []SourceRoot{{Base: "/nobody", Rel: "."}}}, "test", Timeouts{}); err == nil {
		t.Errorf("Sums of a missing root succeeded")
	}
}
