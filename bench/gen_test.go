package bench

import (
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/restoresync/restoresync/treewalk"
)

// testScale makes a hosting tree of a few hundred files and ~10 MiB.
const testScale = 0.02

func generate(t testing.TB, dir string, o GenOptions) GenStats {
	t.Helper()
	st, err := Generate(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestGenerateIsDeterministic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := GenOptions{Profile: "hosting", Scale: testScale / 2, Seed: 7}
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	sa := generate(t, a, o)
	// As root, b also gets Owners, which must change nothing but owners.
	ob := o
	ob.Owners = os.Geteuid() == 0
	sb := generate(t, b, ob)
	if sb.Chowned == 0 && ob.Owners {
		t.Errorf("Owners chowned nothing: %+v", sb)
	}
	sb.Chowned = 0
	if sa != sb {
		t.Errorf("stats differ: %+v != %+v", sa, sb)
	}
	diffs, err := treewalk.Compare(context.Background(), a, b, treewalk.CompareOptions{IgnoreOwner: ob.Owners})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Errorf("same seed: %s", d)
	}
	if ob.Owners {
		checkOwners(t, a, b)
	}

	o.Seed = 8
	generate(t, c, o)
	diffs, err = treewalk.Compare(context.Background(), a, c, treewalk.CompareOptions{MaxDiffs: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) == 0 {
		t.Error("different seeds made identical trees")
	}
}

// checkOwners checks that tree b, made with Owners, differs from a only in
// owners, and that uploads went to the web server's account.
func checkOwners(t *testing.T, a, b string) {
	t.Helper()
	web := lookupUID("www-data", "daemon")
	if web < 0 {
		t.Fatal("neither www-data nor daemon exists")
	}
	fi, err := os.Lstat(filepath.Join(b, "public_html/wp-content/uploads"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; int(uid) != web {
		u, _ := user.LookupId(strconv.Itoa(int(uid)))
		t.Errorf("uploads owned by %d (%v), want %d", uid, u, web)
	}
	diffs, err := treewalk.Compare(context.Background(), a, b, treewalk.CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) == 0 {
		t.Error("Owners changed no owner")
	}
	for _, d := range diffs {
		if d.What != treewalk.DiffUID && d.What != treewalk.DiffGID {
			t.Errorf("Owners changed more than owners: %s", d)
		}
	}
}

// treeFacts is what a walk of a generated tree found.
type treeFacts struct {
	files, dirs, symlinks, extraLinks int
	bytes                             int64
	maxLinks                          uint64 // largest link count of a file
	emptyFiles, emptyDirs             []string
	modes                             map[string]uint32 // path → mode & 07777
	dangling, absolute                int
	bigRandom                         []string // over 1 MiB and incompressible
	maxDepth                          int      // directories above the deepest entry
	spaces, nonASCII                  bool
}

func walkFacts(t *testing.T, root string) treeFacts {
	t.Helper()
	f := treeFacts{modes: map[string]uint32{}}
	seen := map[uint64]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		f.modes[rel] = st.Mode & 0o7777
		f.maxDepth = max(f.maxDepth, strings.Count(rel, "/"))
		f.spaces = f.spaces || strings.Contains(d.Name(), " ")
		for _, r := range d.Name() {
			f.nonASCII = f.nonASCII || r >= utf8.RuneSelf
		}
		switch {
		case fi.Mode().IsRegular():
			if seen[st.Ino] {
				f.extraLinks++
				return nil
			}
			seen[st.Ino] = true
			f.files++
			f.bytes += st.Size
			f.maxLinks = max(f.maxLinks, uint64(st.Nlink))
			if st.Size == 0 {
				f.emptyFiles = append(f.emptyFiles, rel)
			}
			if st.Size > 1<<20 && incompressible(t, p) {
				f.bigRandom = append(f.bigRandom, rel)
			}
		case fi.IsDir():
			f.dirs++
			if ents, _ := os.ReadDir(p); len(ents) == 0 {
				f.emptyDirs = append(f.emptyDirs, rel)
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			f.symlinks++
			target, _ := os.Readlink(p)
			if filepath.IsAbs(target) {
				f.absolute++
			}
			if _, err := os.Stat(p); err != nil {
				f.dangling++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// incompressible reports whether the first MiB of a file does not shrink
// under deflate.
func incompressible(t *testing.T, name string) bool {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return compressedRatio(data[:1<<20]) < 1.01
}

// compressedRatio returns len(data) over its deflated length.
func compressedRatio(data []byte) float64 {
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestSpeed)
	w.Write(data)
	w.Close()
	return float64(len(data)) / float64(buf.Len())
}

func TestGenerateHostingHasWhatItPromises(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	st := generate(t, root, GenOptions{Scale: testScale, Seed: 1}) // "" means hosting
	f := walkFacts(t, root)

	if st.Files != f.files || st.Dirs != f.dirs || st.Symlinks != f.symlinks || st.Hardlinks != f.extraLinks || st.Bytes != f.bytes {
		t.Errorf("stats %+v, walk found files %d dirs %d symlinks %d extra links %d bytes %d",
			st, f.files, f.dirs, f.symlinks, f.extraLinks, f.bytes)
	}
	if f.files < 200 || f.files > 1000 || f.bytes < 4<<20 || f.bytes > 24<<20 {
		t.Errorf("scale %v: %d files, %d bytes; want a few hundred files, about 10 MiB", testScale, f.files, f.bytes)
	}
	if f.symlinks < 3 || f.dangling < 1 || f.absolute < 1 {
		t.Errorf("symlinks %d (dangling %d, absolute %d); want several, one dangling, one absolute", f.symlinks, f.dangling, f.absolute)
	}
	if f.maxLinks < 3 || f.extraLinks < 3 {
		t.Errorf("largest hardlink group %d, extra names %d; want a group of 3 and a pair", f.maxLinks, f.extraLinks)
	}
	if len(f.emptyFiles) == 0 || len(f.emptyDirs) == 0 {
		t.Errorf("empty files %v, empty dirs %v; want some of each", f.emptyFiles, f.emptyDirs)
	}
	if len(f.bigRandom) == 0 {
		t.Error("no incompressible file over 1 MiB")
	}
	for p, want := range map[string]uint32{
		"public_html/wp-config.php":           0o600,
		"public_html/wp-content/uploads":      0o2775,
		"public_html/cgi-bin/php-wrapper.cgi": 0o4755,
		"mail/example.com/info/cur":           0o700,
	} {
		if f.modes[p] != want {
			t.Errorf("%s: mode %04o, want %04o", p, f.modes[p], want)
		}
	}
	for _, sub := range []string{"cur", "new", "tmp"} {
		if fi, err := os.Stat(filepath.Join(root, "mail/example.com/info", sub)); err != nil || !fi.IsDir() {
			t.Errorf("maildir: %v", err)
		}
	}
	if msgs, _ := os.ReadDir(filepath.Join(root, "mail/example.com/info/cur")); len(msgs) == 0 || !strings.Contains(msgs[0].Name(), ".host:2,") {
		t.Errorf("maildir cur holds %d messages, want some named like 1700000000.M1P2.host:2,S", len(msgs))
	}
	if f.maxDepth != 8 {
		t.Errorf("deepest entry below %d directories, want 8", f.maxDepth)
	}
	if !f.spaces || !f.nonASCII {
		t.Errorf("names with spaces %v, non-ASCII names %v; want both", f.spaces, f.nonASCII)
	}
	for _, name := range []string{"backups/db.sql", "logs/access.log"} {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if r := compressedRatio(data); r < 3 {
			t.Errorf("%s compresses %.1fx, want text that compresses well", name, r)
		}
	}
	checkCodeCompression(t, root)
}

// checkCodeCompression checks that the generated source code compresses
// about as real PHP does: neither like random bytes (1x) nor like a repeated
// template (10x and more). zstd -1 gets a little more than deflate.
func checkCodeCompression(t *testing.T, root string) {
	t.Helper()
	var all []byte
	err := filepath.WalkDir(filepath.Join(root, "public_html"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "uploads" {
			return filepath.SkipDir // media stand-ins, not code
		}
		if ext := filepath.Ext(p); d.Type().IsRegular() && (ext == ".php" || ext == ".js" || ext == ".css") {
			data, err := os.ReadFile(p)
			all = append(all, data...)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := compressedRatio(all); r < 2.5 || r > 5 {
		t.Errorf("%d bytes of code compress %.2fx with deflate, want 2.5-5", len(all), r)
	}
}

func TestGenerateOtherProfiles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		profile string
		scale   float64
		check   func(t *testing.T, root string, st GenStats)
	}{
		{"media", 0.002, func(t *testing.T, root string, st GenStats) {
			if st.Files != 1 || st.Bytes < 1<<20 {
				t.Errorf("media: %+v, want one file of ~2 MiB", st)
			}
		}},
		{"smallfiles", 0.002, func(t *testing.T, root string, st GenStats) {
			if st.Files != 200 || st.Bytes > 200*8192 {
				t.Errorf("smallfiles: %+v, want 200 files under 8 KiB", st)
			}
			filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if fi, _ := d.Info(); d.Type().IsRegular() && fi.Size() >= 8192 {
					t.Errorf("%s: %d bytes, want < 8 KiB", p, fi.Size())
				}
				return err
			})
		}},
		{"bigfile", 0.001, func(t *testing.T, root string, st GenStats) {
			data, err := os.ReadFile(filepath.Join(root, "bigfile.dat"))
			if err != nil {
				t.Fatal(err)
			}
			half, want := len(data)/2, int64(math.Round(2<<30*0.001))
			if int64(len(data)) != want || st.Bytes != want {
				t.Errorf("bigfile: %d bytes, stats %+v; want %d", len(data), st, want)
			}
			if text, random := compressedRatio(data[:half]), compressedRatio(data[half:]); text < 3 || random > 1.01 {
				t.Errorf("bigfile halves compress %.2fx and %.2fx; want text then random", text, random)
			}
		}},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			o := GenOptions{Profile: tc.profile, Scale: tc.scale, Seed: 5}
			st := generate(t, a, o)
			tc.check(t, a, st)
			generate(t, b, o)
			diffs, err := treewalk.Compare(context.Background(), a, b, treewalk.CompareOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range diffs {
				t.Errorf("same seed: %s", d)
			}
		})
	}
}

func TestGenerateErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()

	_, err := Generate(ctx, filepath.Join(dir, "x"), GenOptions{Profile: "wordpress"})
	if !errors.Is(err, ErrUnknownProfile) || !strings.Contains(err.Error(), "hosting, media, smallfiles, bigfile") {
		t.Errorf("unknown profile: got %v, want ErrUnknownProfile listing the valid ones", err)
	}
	for _, s := range []float64{-1, 1e6} {
		if _, err := Generate(ctx, filepath.Join(dir, "x"), GenOptions{Scale: s}); err == nil {
			t.Errorf("scale %v: no error", s)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(ctx, dir, GenOptions{Scale: testScale}); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("non-empty dir: got %v, want ErrNotEmpty", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Generate(cancelled, filepath.Join(dir, "c"), GenOptions{Scale: testScale}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: got %v, want context.Canceled", err)
	}
}

func BenchmarkGenerateHosting(b *testing.B) {
	for b.Loop() {
		st := generate(b, filepath.Join(b.TempDir(), "t"), GenOptions{Scale: 0.05, Seed: 1})
		b.SetBytes(st.Bytes)
	}
}
