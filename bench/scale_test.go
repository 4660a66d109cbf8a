package bench

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A row's figures are the median, min and max of its good runs only; a
// failed run is counted and its error kept; a run that saw no first file
// adds no first-file time; the ratios compare each round's wall time
// with rsync's and tar's of the same round and destination.
func TestScaleAggregate(t *testing.T) {
	s := func(tool string, round int, wall, first float64, crss, frss int64, cmd, err string) ScaleSample {
		return ScaleSample{Tool: tool, Dst: "/dev/shm", Round: round, WallSeconds: wall, FirstFileSeconds: first,
			ClientPeakRSSBytes: crss << 20, FarPeakRSSBytes: frss << 20, FarPeakCommand: cmd,
			FarCPUSeconds: wall / 2, FarTotalCPUSeconds: -1, Error: err}
	}
	r := &ScaleResults{
		Tools: []string{ScaleToolRestoresync, ScaleToolRsync, ScaleToolTar},
		Dsts:  []string{"/dev/shm"}, DstKind: []string{"tmpfs"}, SourceFiles: 200000, SourceBytes: 10 << 20,
		Samples: []ScaleSample{
			s(ScaleToolRestoresync, 1, 8, 2, 240, 170, "restoresync", ""),
			s(ScaleToolRsync, 1, 4, 0.5, 15, 8, "rsync", ""),
			s(ScaleToolTar, 1, 2, -1, 16, 2, "tar", ""),
			s(ScaleToolRestoresync, 2, 9, 3, 250, 180, "restoresync", ""),
			s(ScaleToolRsync, 2, 6, 0.6, 15, 8, "rsync", ""),
			s(ScaleToolTar, 2, 3, 0.4, 16, 2, "tar", ""),
			s(ScaleToolRestoresync, 3, 1, 1, 1, 1, "", "exit status 23: partial"),
			s(ScaleToolRsync, 3, 5, 0.7, 15, 8, "rsync", ""),
			s(ScaleToolTar, 3, 4, 0.3, 16, 2, "tar", ""),
		},
	}
	r.aggregate()
	if len(r.Rows) != 3 {
		t.Fatalf("%d rows, want 3", len(r.Rows))
	}
	rs, rsync, tar := r.Rows[0], r.Rows[1], r.Rows[2]
	if rs.Tool != ScaleToolRestoresync || rs.Runs != 3 || rs.Failed != 1 || len(rs.Errors) != 1 {
		t.Errorf("restoresync row: %+v", rs)
	}
	if got, want := rs.WallSeconds, (ScaleStat{Median: 8.5, Min: 8, Max: 9, N: 2}); got != want {
		t.Errorf("restoresync wall %+v, want %+v", got, want)
	}
	if got, want := rs.ClientPeakRSSMiB, (ScaleStat{Median: 245, Min: 240, Max: 250, N: 2}); got != want {
		t.Errorf("restoresync client RSS %+v, want %+v", got, want)
	}
	// Rounds 1 and 2: 8/4 and 9/6 against rsync, 8/2 and 9/3 against tar.
	if got, want := rs.VsRsync, (ScaleStat{Median: 1.75, Min: 1.5, Max: 2, N: 2}); got != want {
		t.Errorf("restoresync vs rsync %+v, want %+v", got, want)
	}
	if got, want := rs.VsTar, (ScaleStat{Median: 3.5, Min: 3, Max: 4, N: 2}); got != want {
		t.Errorf("restoresync vs tar %+v, want %+v", got, want)
	}
	if got, want := tar.FirstFileSeconds, (ScaleStat{Median: 0.35, Min: 0.3, Max: 0.4, N: 2}); got != want {
		t.Errorf("tar first file %+v, want %+v", got, want)
	}
	if rsync.VsRsync.N != 0 || tar.VsTar.N != 0 {
		t.Errorf("a tool compared with itself: %+v %+v", rsync.VsRsync, tar.VsTar)
	}
	if got, want := rsync.VsTar, (ScaleStat{Median: 2, Min: 1.25, Max: 2, N: 3}); got != want {
		t.Errorf("rsync vs tar %+v, want %+v", got, want)
	}
	if rs.FarTotalCPUSeconds.N != 0 || rs.FarPeakCommand != "restoresync" {
		t.Errorf("restoresync far side: %+v, %q", rs.FarTotalCPUSeconds, rs.FarPeakCommand)
	}

	var b strings.Builder
	if err := WriteScaleMarkdown(&b, r); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"200,000 regular files, 10.0 MiB.",
		"DST in /dev/shm (tmpfs), median of 3 (min–max):",
		"| | restoresync | rsync -aH | tar\\|ssh\\|tar |",
		"| wall, s | 8.50 (8.00–9.00) | 5.00 (4.00–6.00) | 3.00 (2.00–4.00) |",
		"| far side's largest command, peak RSS MiB | 175 (170–180) restoresync | 8 (8–8) rsync | 2 (2–2) tar |",
		"| far-side CPU, sshd included, s | - | - | - |",
		"| wall vs rsync -aH (same round) | 1.75 (1.50–2.00) | 1 | 0.50 (0.50–0.80) |",
		"restoresync in /dev/shm: 1 of 3 runs failed (left out above): exit status 23: partial",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

// The first regular file is the first to have its final name: a
// temporary name (rsync's, restoresync's) does not count until it is
// renamed, in a directory made after the watch began or before it.
func TestFirstFileWatch(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "early", "empty"), 0o755))
	w, err := watchFirstFile(root)
	must(err)
	deep := filepath.Join(root, "files", "000", "00")
	must(os.MkdirAll(deep, 0o755))
	must(os.WriteFile(filepath.Join(deep, ".a.php.Xy12Zq"), []byte("x"), 0o644))
	must(os.WriteFile(filepath.Join(root, "early", ".restoresync-0123456789abcdef.tmp"), []byte("x"), 0o644))
	must(os.Mkdir(filepath.Join(deep, "d"), 0o755))
	must(os.Rename(filepath.Join(deep, ".a.php.Xy12Zq"), filepath.Join(deep, "a.php")))
	<-w.done // the watch ends by itself at the first placed file
	at, ok, err := w.Stop()
	if err != nil || !ok || at.IsZero() {
		t.Fatalf("Stop: %v, %v, %v", at, ok, err)
	}
	if want := filepath.Join(deep, "a.php"); w.path != want {
		t.Errorf("first file %s, want %s", w.path, want)
	}

	// Already there when the watch begins.
	w, err = watchFirstFile(root)
	must(err)
	if _, ok, _ := w.Stop(); !ok || w.path != filepath.Join(deep, "a.php") {
		t.Errorf("a tree with a file in it: ok %v, %s", ok, w.path)
	}

	// Nothing placed: Stop says so.
	empty := t.TempDir()
	w, err = watchFirstFile(empty)
	must(err)
	must(os.WriteFile(filepath.Join(empty, ".b.txt.abcDEF"), nil, 0o644))
	if _, ok, err := w.Stop(); ok || err != nil {
		t.Errorf("only a temporary name: ok %v, %v", ok, err)
	}
}

// GNU time's report: the last line, after the line time adds for a
// command that failed.
func TestParseTimeReport(t *testing.T) {
	for in, want := range map[string]Usage{
		"tar 0.41 1.20 2048\n": {Command: "tar", CPUSeconds: 1.61, PeakRSSBytes: 2 << 20},
		"Command exited with non-zero status 23\nrsync 1.00 0.50 15360\n": {Command: "rsync", CPUSeconds: 1.5, PeakRSSBytes: 15 << 20},
		"Command terminated by signal 9\nrestoresync 0.00 0.01 1\n":       {Command: "restoresync", CPUSeconds: 0.01, PeakRSSBytes: 1 << 10},
	} {
		got, err := parseTimeReport([]byte(in))
		if err != nil || got.Command != want.Command || got.PeakRSSBytes != want.PeakRSSBytes ||
			got.CPUSeconds < want.CPUSeconds-1e-9 || got.CPUSeconds > want.CPUSeconds+1e-9 {
			t.Errorf("parseTimeReport(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "Command exited with non-zero status 1\n", "tar x 0.1 12\n", "tar 0.1 0.2\n"} {
		if u, err := parseTimeReport([]byte(in)); err == nil {
			t.Errorf("parseTimeReport(%q) = %+v, want an error", in, u)
		}
	}
}

// The tar baseline of the scale table writes GNU tar's default format,
// with no PAX extended header per file.
func TestScaleTarBaselineIsPlainTar(t *testing.T) {
	tarPath, err := exec.LookPath("tar")
	if err != nil {
		t.Skip("no tar")
	}
	src := t.TempDir()
	for _, name := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte("small "+name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	words := scaleTarCreate(src)
	out, err := exec.Command(tarPath, words[1:]...).Output()
	if err != nil {
		t.Fatalf("%q: %v", words, err)
	}
	tr := tar.NewReader(bytes.NewReader(out))
	files := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Format&tar.FormatPAX != 0 || len(h.PAXRecords) > 0 {
			t.Errorf("%s: a PAX header (%v, %v) in the baseline's archive", h.Name, h.Format, h.PAXRecords)
		}
		if h.Typeflag == tar.TypeReg {
			files++
		}
	}
	if files != 2 {
		t.Errorf("%d regular files in the archive, want 2", files)
	}
}
