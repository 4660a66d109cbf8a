package restore_test

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/transfer"
)

// --method tar, pulled from the in-process agent (the real tar-sender over
// pipes), with every codec, one stream or four shards, and local → local.
func TestTarPullAccountFixture(t *testing.T) {
	src := filepath.Join(t.TempDir(), "alice")
	accountFixture().build(t, src)
	for _, codec := range []string{"none", "lz4", "zstd", "gzip"} {
		for _, jobs := range []int{1, 4} {
			for _, mode := range []string{"pull", "local"} {
				if mode == "local" && (codec != "zstd" || jobs != 4) {
					continue
				}
				name := codec + "/" + mode + "/jobs=" + string(rune('0'+jobs))
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					dst := filepath.Join(t.TempDir(), "restored", "alice")
					o := options(mode, src, dst)
					o.Method = restore.MethodTar
					c, err := transfer.ParseCompression(codec)
					if err != nil {
						t.Fatal(err)
					}
					o.Compression, o.Jobs = c, jobs
					rep := run(t, o)
					assertSameTree(t, src, dst)
					assertNoTempFiles(t, dst)
					if rep.Method != "tar" || rep.Jobs != jobs || rep.Symlinks != 3 || rep.Hardlinks != 2 {
						t.Errorf("report: method %s, jobs %d, %d symlinks, %d hardlinks; want tar, %d, 3, 2", rep.Method, rep.Jobs, rep.Symlinks, rep.Hardlinks, jobs)
					}
					if want := fixturePayload(t, src); rep.Bytes != want {
						t.Errorf("report says %d payload bytes; the tree holds %d", rep.Bytes, want)
					}
					if mode == "pull" && (rep.WireBytes <= 0 || codec != "none" && rep.WireBytes >= rep.Bytes) {
						t.Errorf("%s: %d wire bytes for %d payload bytes", codec, rep.WireBytes, rep.Bytes)
					}
					// A rerun re-sends the archive, writes nothing, and the tree
					// stays the same.
					again := run(t, o)
					if again.Files != 0 || again.Skipped != rep.Files {
						t.Errorf("rerun: %d files written, %d up to date; want 0, %d", again.Files, again.Skipped, rep.Files)
					}
					assertSameTree(t, src, dst)
				})
			}
		}
	}
}

// fixturePayload is the bytes of the regular files of the account fixture,
// each hardlink group once.
func fixturePayload(t *testing.T, root string) int64 {
	t.Helper()
	var n int64
	seen := map[uint64]bool{}
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		if ino := fi.Sys().(*syscall.Stat_t).Ino; !seen[ino] {
			seen[ino] = true
			n += fi.Size()
		}
		return nil
	})
	return n
}

// Archives made by the real GNU tar (pax format, so mtimes keep their
// nanoseconds), plain and compressed by the real gzip, zstd and lz4, read
// from a file (whatever its name) and from standard input.
func TestTarArchiveInput(t *testing.T) {
	testenv.RequireTool(t, "tar")
	src := filepath.Join(t.TempDir(), "alice")
	accountFixture().build(t, src)
	dir := t.TempDir()
	plain := filepath.Join(dir, "alice.tar")
	tarCmd := exec.Command("tar", "--format=posix", "-C", src, "-cf", plain, ".")
	if out, err := tarCmd.CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	archives := map[string]string{"alice.tar": "none"}
	for _, c := range []struct{ tool, ext, codec string }{
		{"gzip", "alice.tar.gz", "gzip"}, {"gzip", "alice.tgz", "gzip"},
		{"zstd", "alice.tar.zst", "zstd"}, {"lz4", "alice.tar.lz4", "lz4"},
	} {
		testenv.RequireTool(t, c.tool)
		out := filepath.Join(dir, c.ext)
		cmd := exec.Command("sh", "-c", c.tool+" -c < \"$1\" > \"$2\"", "sh", plain, out)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", c.tool, err, b)
		}
		archives[c.ext] = c.codec
	}
	for name, codec := range archives {
		for _, stdin := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/file", true: "/stdin"}[stdin], func(t *testing.T) {
				t.Parallel()
				dst := filepath.Join(t.TempDir(), "alice")
				o := restore.Options{Src: filepath.Join(dir, name), Dst: dst}
				if stdin {
					f, err := os.Open(o.Src)
					if err != nil {
						t.Fatal(err)
					}
					defer f.Close()
					o.Src, o.Stdin = "-", f
				}
				rep := run(t, o)
				assertSameTree(t, src, dst)
				assertNoTempFiles(t, dst)
				if rep.Method != "tar" || rep.Compression != codec || rep.Symlinks != 3 || rep.Hardlinks != 2 {
					t.Errorf("report: %s, %s, %d symlinks, %d hardlinks; want tar, %s, 3, 2", rep.Method, rep.Compression, rep.Symlinks, rep.Hardlinks, codec)
				}
			})
		}
	}
}

// tarEntry is one entry of a test archive.
type tarEntry struct {
	hdr  tar.Header
	data string
}

func buildTar(t *testing.T, entries []tarEntry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := e.hdr
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.data))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.ModTime.IsZero() {
			h.ModTime = time.Unix(1700000000, 42)
		}
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatalf("tar header %q: %v", h.Name, err)
		}
		if _, err := tw.Write([]byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A hostile archive: each bad entry is reported on its own and skipped,
// the good ones are restored, and nothing appears outside DST (a canary
// directory beside it stays empty).
func TestTarHostileArchive(t *testing.T) {
	base := t.TempDir()
	canary := filepath.Join(base, "canary")
	must(t, os.Mkdir(canary, 0o755))
	dst := filepath.Join(base, "dst")
	must(t, os.Mkdir(dst, 0o755))
	// A symlink planted in DST before the restore is never followed.
	must(t, os.Symlink(canary, filepath.Join(dst, "planted")))
	long := strings.Repeat("x", 300)
	reg := func(name, data string) tarEntry {
		return tarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name}, data: data}
	}
	link := func(typ byte, name, target string) tarEntry {
		return tarEntry{hdr: tar.Header{Typeflag: typ, Name: name, Linkname: target}}
	}
	archive := buildTar(t, []tarEntry{
		{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755}},
		reg("ok/first.txt", "first"),
		reg("/abs/evil", "absolute"),
		reg("../evil", "dotdot"),
		reg("ok/../../evil2", "dotdot inside"),
		link(tar.TypeSymlink, "out", canary),
		reg("out/pwned", "through a symlink of the archive"),
		{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "out/sub/"}},
		link(tar.TypeSymlink, "up", "../canary"),
		reg("up/pwned2", "through a relative symlink"),
		reg("out", "replacing the symlink"),
		link(tar.TypeLink, "hl-outside", "../canary/x"),
		link(tar.TypeLink, "hl-abs", "/etc/passwd"),
		link(tar.TypeLink, "hl-missing", "not/there"),
		link(tar.TypeLink, "hl-symlink", "up"),
		reg("planted/through-dst-symlink", "a planted symlink is replaced, not followed"),
		reg(long, "name too long"),
		reg("ok/"+long+"/f", "directory name too long"),
		link(tar.TypeLink, "ok/second-link", "ok/first.txt"),
		reg("ok/last.txt", "last"),
	})
	o := restore.Options{Src: "-", Dst: dst, Stdin: bytes.NewReader(archive)}
	rep, err := restore.Run(context.Background(), o)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	got := map[string]string{}
	for _, fe := range rep.Errors {
		got[fe.Path] = fe.Error
	}
	wantErr := map[string]string{
		"/abs/evil":         "absolute",
		"../evil":           "..",
		"ok/../../evil2":    "..",
		"out/pwned":         "symlink earlier in the archive",
		"out/sub":           "symlink earlier in the archive",
		"up/pwned2":         "symlink earlier in the archive",
		"out":               "symlink earlier in the archive",
		"hl-outside":        "leaves the archive",
		"hl-abs":            "leaves the archive",
		"hl-missing":        "not an earlier regular file",
		"hl-symlink":        "not an earlier regular file",
		long:                "file name too long",
		"ok/" + long + "/f": "file name too long",
	}
	for p, frag := range wantErr {
		msg, ok := got[p]
		if !ok {
			t.Errorf("no error reported for %q", p)
		} else if !strings.Contains(msg, frag) {
			t.Errorf("error for %q is %q; want it to mention %q", p, msg, frag)
		}
		delete(got, p)
	}
	for p, msg := range got {
		t.Errorf("unexpected error for %q: %s", p, msg)
	}
	if names, _ := os.ReadDir(canary); len(names) != 0 {
		t.Errorf("something was written outside DST, in %s: %v", canary, names)
	}
	for _, p := range []string{"/abs/evil", filepath.Join(base, "evil"), filepath.Join(base, "evil2")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	for p, want := range map[string]string{"ok/first.txt": "first", "ok/last.txt": "last", "ok/second-link": "first",
		"planted/through-dst-symlink": "a planted symlink is replaced, not followed"} {
		b, err := os.ReadFile(filepath.Join(dst, p))
		if err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", p, b, err, want)
		}
	}
	if target, err := os.Readlink(filepath.Join(dst, "out")); err != nil || target != canary {
		t.Errorf("symlink out: %q, %v", target, err)
	}
	if fi, err := os.Lstat(filepath.Join(dst, "planted")); err != nil || !fi.IsDir() {
		t.Errorf("planted: %v, %v; want the directory that replaced the planted symlink", fi, err)
	}
	assertNoTempFiles(t, dst)
}

// Archives that are not tar, truncated or compressed with an unsupported
// codec fail the run with a message naming the problem.
func TestTarBadArchives(t *testing.T) {
	good := buildTar(t, []tarEntry{{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "f"}, data: strings.Repeat("x", 5000)}})
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"truncated": {good[:1024], "unexpected EOF"},
		"xz":        {[]byte{0xfd, '7', 'z', 'X', 'Z', 0, 1, 2}, "xz"},
		"garbage":   {bytes.Repeat([]byte("not a tar archive "), 100), "tar"},
	} {
		t.Run(name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "dst")
			_, err := restore.Run(context.Background(), restore.Options{Src: "-", Dst: dst, Stdin: bytes.NewReader(tc.data)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v; want one mentioning %q", err, tc.want)
			}
		})
	}
}

// Push is not supported by the tar method: a usage error says so.
func TestTarPushUnsupported(t *testing.T) {
	src := t.TempDir()
	o := options("push", src, filepath.Join(t.TempDir(), "dst"))
	o.Method = restore.MethodTar
	_, err := restore.Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "--method raw") {
		t.Fatalf("err = %v; want a usage error pointing to --method raw", err)
	}
}
