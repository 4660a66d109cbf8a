package restore_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
)

// When every SRC is missing there is nothing to restore: the run fails as
// with one missing SRC (a file I/O error, exit 11, naming a missing one),
// DST is not created, and no per-file errors are reported. Several SRCs,
// -R and --files-from, local and pulled through the agent's code. With
// one SRC of several there, the others are per-file errors as before.
func TestAllSrcsMissing(t *testing.T) {
	t.Parallel()
	tree := t.TempDir()
	writeFiles(t, tree, map[string]string{"site/index.php": "x"})
	pipe := transfer.PipeDialer{Config: transfer.ServerConfig{NewSink: restore.NewSink, Version: "test"}}
	for _, remote := range []bool{false, true} {
		loc := func(p string) string {
			if remote {
				return "backup:" + p
			}
			return p
		}
		for _, c := range []struct {
			name string
			o    restore.Options
		}{
			{"several", restore.Options{Src: loc(tree + "/gone1"), MoreSrc: []string{loc(tree + "/gone2")}}},
			{"relative", restore.Options{Src: loc(tree + "/./site/gone1"), MoreSrc: []string{loc(tree + "/./gone2")}, Relative: true}},
			{"files-from", restore.Options{Src: loc(tree), FilesFrom: []string{"gone1", "site/gone2"}}},
		} {
			o := c.o
			o.Dst = filepath.Join(t.TempDir(), "dst")
			o.Dialer = pipe
			o.Compression = transfer.DefaultCompression
			rep, err := restore.Run(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), "nothing to restore") || !strings.Contains(err.Error(), "gone") ||
				!errors.Is(err, os.ErrNotExist) && !strings.Contains(err.Error(), "no such file") {
				t.Errorf("%s (remote %v): got %v, want an error naming a missing SRC", c.name, remote, err)
			}
			if errors.Is(err, restore.ErrUsage) || errors.Is(err, transfer.ErrProtocol) || errors.Is(err, transport.ErrConnect) ||
				errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("%s (remote %v): %v is not a file I/O error", c.name, remote, err)
			}
			if len(rep.Errors) > 0 {
				t.Errorf("%s (remote %v): per-file errors %+v", c.name, remote, rep.Errors)
			}
			if _, err := os.Lstat(o.Dst); !os.IsNotExist(err) {
				t.Errorf("%s (remote %v): DST was created (%v)", c.name, remote, err)
			}
		}
		// One of them there: a restore with a per-file error.
		dst := filepath.Join(t.TempDir(), "dst")
		rep, err := restore.Run(context.Background(), restore.Options{Src: loc(tree + "/gone1"), MoreSrc: []string{loc(tree + "/site")},
			Dst: dst, Dialer: pipe, Compression: transfer.DefaultCompression})
		if err != nil || len(rep.Errors) != 1 || rep.Errors[0].Path != "gone1" {
			t.Errorf("one SRC missing of two (remote %v): %v %+v, want one per-file error", remote, err, rep.Errors)
		}
		if _, err := os.Stat(filepath.Join(dst, "site", "index.php")); err != nil {
			t.Errorf("one SRC missing of two (remote %v): the other was not restored: %v", remote, err)
		}
	}
}
