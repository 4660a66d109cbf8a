package restore_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/transfer"
)

// modes are the three ways a restore runs: local to local, pull (remote
// sender, local writer) and push (local sender, remote writer). The remote
// side here is the real server code over in-process pipes; the SSH tests
// in cmd/restoresync run the same over a real sshd.
var modes = []string{"local", "pull", "push"}

func options(mode, src, dst string) restore.Options {
	o := restore.Options{Src: src, Dst: dst, Compression: transfer.DefaultCompression}
	pipe := transfer.PipeDialer{Config: transfer.ServerConfig{NewSink: restore.NewSink, Version: "test"}}
	switch mode {
	case "pull":
		o.Src, o.Dialer = "backup:"+src, pipe
	case "push":
		o.Dst, o.Dialer = "web:"+dst, pipe
	}
	return o
}

func run(t testing.TB, o restore.Options) *restore.Report {
	t.Helper()
	rep, err := restore.Run(context.Background(), o)
	if err != nil {
		t.Fatalf("restore %s → %s: %v", o.Src, o.Dst, err)
	}
	if len(rep.Errors) > 0 {
		t.Fatalf("restore %s → %s: per-file errors: %+v", o.Src, o.Dst, rep.Errors)
	}
	return rep
}

func TestRestoreAccountFixture(t *testing.T) {
	src := filepath.Join(t.TempDir(), "alice")
	accountFixture().build(t, src)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "restored", "alice")
			o := options(mode, src, dst)
			o.Writer.BlockSizeBytes = 1 << 20 // big.mp4 (5 MiB) travels as 6 blocks
			rep := run(t, o)
			assertSameTree(t, src, dst)
			if rep.Symlinks != 3 || rep.Hardlinks != 2 {
				t.Errorf("report counts %d symlinks, %d hardlinks; want 3, 2", rep.Symlinks, rep.Hardlinks)
			}
			var payload int64
			filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
				if fi, _ := d.Info(); fi != nil && fi.Mode().IsRegular() && !strings.HasSuffix(p, "copy-of-index.php") && !strings.HasSuffix(p, "db-link.sql") {
					payload += fi.Size()
				}
				return nil
			})
			if rep.Bytes != payload {
				t.Errorf("report says %d payload bytes; the tree holds %d", rep.Bytes, payload)
			}
			if mode != "local" && rep.WireBytes <= 0 {
				t.Errorf("wire_bytes = %d for a %s restore", rep.WireBytes, mode)
			}
			// A rerun finds everything up to date and sends no file data.
			again := run(t, o)
			if again.Files != 0 || again.Bytes != 0 || again.Skipped != rep.Files {
				t.Errorf("rerun: %d files, %d bytes, %d skipped; want 0, 0, %d", again.Files, again.Bytes, again.Skipped, rep.Files)
			}
			assertSameTree(t, src, dst)
			assertNoTempFiles(t, dst)
		})
	}
}

func TestRestoreCodecsAndJobs(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	accountFixture().build(t, src)
	for _, codec := range []string{"none", "lz4", "zstd", "gzip", "zstd:9", "lz4:3", "gzip:6"} {
		for _, jobs := range []int{1, 8} {
			for _, mode := range []string{"pull", "push"} {
				t.Run(codec+"/"+mode+"/jobs="+string(rune('0'+jobs)), func(t *testing.T) {
					t.Parallel()
					dst := filepath.Join(t.TempDir(), "dst")
					o := options(mode, src, dst)
					c, err := transfer.ParseCompression(codec)
					if err != nil {
						t.Fatal(err)
					}
					o.Compression, o.Jobs = c, jobs
					o.Writer.BlockSizeBytes = 512 << 10
					rep := run(t, o)
					assertSameTree(t, src, dst)
					if rep.Compression != c.String() || rep.Jobs != jobs {
						t.Errorf("report says %s/%d", rep.Compression, rep.Jobs)
					}
					// The fixture's text (SQL, logs) compresses; its media does not.
					if codec != "none" && rep.WireBytes >= rep.Bytes {
						t.Errorf("%s: %d wire bytes for %d payload bytes: no compression happened", codec, rep.WireBytes, rep.Bytes)
					}
					if codec == "none" && rep.WireBytes < rep.Bytes {
						t.Errorf("none: %d wire bytes < %d payload bytes", rep.WireBytes, rep.Bytes)
					}
				})
			}
		}
	}
}

// A tree no one here wrote: Go's own source (about 11,000 files), pulled;
// push is covered by the SSH tests in cmd/restoresync.
func TestRestoreGoroot(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	src := filepath.Join(runtimeGOROOT(t), "src")
	for _, mode := range []string{"pull"} {
		t.Run(mode, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "goroot-src")
			run(t, options(mode, src, dst))
			assertSameTree(t, src, dst)
		})
	}
}

func assertNoTempFiles(t testing.TB, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".restoresync-") {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}

func runtimeGOROOT(t testing.TB) string {
	if r := os.Getenv("GOROOT"); r != "" {
		return r
	}
	out, err := execOutput("go", "env", "GOROOT")
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	return strings.TrimSpace(out)
}

// Type changes: whatever DST holds where the source has a file, a symlink or
// a directory is replaced, except a non-empty directory in the way of a
// file or symlink, which is kept and reported unless Force (rsync's
// --force): a restore does not delete data it was not asked to.
func TestRestoreTypeChanges(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	TestDir{
		"was-dir":       TestFile{Content: "now a file"},
		"was-full-dir":  TestFile{Content: "now a file too"},
		"was-file":      TestDir{"inside": TestFile{Content: "x"}},
		"was-symlink":   TestDir{"inside": TestFile{Content: "y"}},
		"link-was-dir":  TestSymlink{Target: "was-file"},
		"file-was-link": TestFile{Content: "z"},
	}.build(t, src)
	for _, force := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "force"}[force], func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "dst")
			outside := filepath.Join(t.TempDir(), "outside")
			must(t, os.MkdirAll(outside, 0o755))
			must(t, os.WriteFile(filepath.Join(outside, "canary"), []byte("keep"), 0o644))
			TestDir{
				"was-dir":       TestDir{},
				"was-full-dir":  TestDir{"precious": TestFile{Content: "do not lose me"}},
				"was-file":      TestFile{Content: "old"},
				"link-was-dir":  TestDir{},
				"file-was-link": TestSymlink{Target: filepath.Join(outside, "canary")},
			}.build(t, dst)
			must(t, os.Symlink(outside, filepath.Join(dst, "was-symlink")))
			o := options("pull", src, dst)
			o.Writer.Force = force
			rep, err := restore.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(outside, "canary")); err != nil || string(b) != "keep" {
				t.Fatalf("outside canary: %q, %v", b, err)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 1 {
				t.Fatalf("something was written outside DST: %v", ents)
			}
			if force {
				if len(rep.Errors) != 0 {
					t.Fatalf("errors with force: %+v", rep.Errors)
				}
				assertSameTree(t, src, dst)
				return
			}
			if len(rep.Errors) != 1 || rep.Errors[0].Path != "was-full-dir" || !strings.Contains(rep.Errors[0].Error, "non-empty directory") {
				t.Fatalf("errors: %+v; want one for was-full-dir", rep.Errors)
			}
			if b, err := os.ReadFile(filepath.Join(dst, "was-full-dir", "precious")); err != nil || string(b) != "do not lose me" {
				t.Fatalf("the non-empty directory was not kept: %q, %v", b, err)
			}
			for _, p := range []string{"was-dir", "was-file/inside", "was-symlink/inside", "file-was-link"} {
				if fi, err := os.Lstat(filepath.Join(dst, p)); err != nil || !fi.Mode().IsRegular() {
					t.Errorf("%s: %v, %v; want a regular file", p, fi, err)
				}
			}
			if target, err := os.Readlink(filepath.Join(dst, "link-was-dir")); err != nil || target != "was-file" {
				t.Errorf("link-was-dir: %q, %v", target, err)
			}
		})
	}
}
