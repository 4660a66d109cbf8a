package dest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/treewalk"
)

func TestChmodApply(t *testing.T) {
	const file, dir = false, true
	tests := []struct {
		specs []string
		umask uint32
		mode  uint32
		isDir bool
		want  uint32
	}{
		{nil, 0o22, 0o4755, file, 0o4755},
		{[]string{"D755,F644"}, 0o22, 0o4755, file, 0o644},
		{[]string{"D755,F644"}, 0o22, 0o2700, dir, 0o755},
		{[]string{"u+rwX,go-w"}, 0o22, 0o600, file, 0o600},
		{[]string{"u+rwX,go-w"}, 0o22, 0o500, dir, 0o700},
		{[]string{"u+rwX,go-w"}, 0o22, 0o1777, dir, 0o1755},
		{[]string{"Fgo-rwx"}, 0o22, 0o4755, file, 0o4700},
		{[]string{"Fgo-rwx"}, 0o22, 0o775, dir, 0o775},
		{[]string{"a+X"}, 0o22, 0o700, file, 0o711},
		{[]string{"a+X"}, 0o22, 0o644, file, 0o644},
		{[]string{"a+X"}, 0o22, 0o700, dir, 0o711},
		{[]string{"D2775"}, 0o22, 0o700, dir, 0o2775},
		{[]string{"D2775"}, 0o22, 0o700, file, 0o700},
		{[]string{"o="}, 0o22, 0o1777, dir, 0o1770},
		// No class: bits in the umask are left alone.
		{[]string{"+w"}, 0o22, 0, file, 0o200},
		{[]string{"+w"}, 0, 0, file, 0o222},
		{[]string{"=rwx"}, 0o22, 0o2644, file, 0o2755},
		{[]string{"=rwx"}, 0o77, 0o644, file, 0o700},
		{[]string{"-w"}, 0o77, 0o644, file, 0o444},
		// rsync's "s": the named classes' set-id bits, else setuid only.
		{[]string{"+s"}, 0o22, 0o755, file, 0o4755},
		{[]string{"a+s"}, 0o22, 0o755, file, 0o4755},
		{[]string{"o+s"}, 0o22, 0o755, file, 0o4755},
		{[]string{"g+s"}, 0o22, 0o755, file, 0o2755},
		{[]string{"ug+s"}, 0o22, 0o755, file, 0o6755},
		// "=" clears set-id bits only when it sets some.
		{[]string{"u=rw"}, 0o22, 0o4755, file, 0o4655},
		{[]string{"u=rws"}, 0o22, 0o755, file, 0o4655},
		// X looks at the mode before the first item.
		{[]string{"a-x,+X"}, 0o22, 0o755, file, 0o755},
		{[]string{"Fu+x,+X"}, 0o22, 0o644, file, 0o744},
		{[]string{"a+xX"}, 0o22, 0o600, file, 0o600},
		{[]string{"a+xX"}, 0o22, 0o700, dir, 0o711},
		{[]string{"+t"}, 0o22, 0o4755, file, 0o5755},
		{[]string{"07777"}, 0o22, 0, dir, 0o7777},
		{[]string{"0"}, 0o22, 0o7777, file, 0},
		// Repeated options append.
		{[]string{"F600", "u+x"}, 0o22, 0o644, file, 0o700},
		{[]string{"Dg+s,ug+w,Fo-w,+X"}, 0o22, 0o500, dir, 0o2731},
		// Bits above 07777 pass through.
		{[]string{"644"}, 0o22, 0o100755, file, 0o100644},
	}
	for _, tt := range tests {
		r, err := ParseChmodUmask(tt.specs, tt.umask)
		if err != nil {
			t.Errorf("ParseChmodUmask(%q, %03o): %v", tt.specs, tt.umask, err)
			continue
		}
		if got := r.Apply(tt.mode, tt.isDir); got != tt.want {
			t.Errorf("%q umask %03o: Apply(%04o, dir=%v) = %04o, want %04o",
				tt.specs, tt.umask, tt.mode, tt.isDir, got, tt.want)
		}
	}
}

// chmodBadSpecs are rejected by rsync 3.2.7 ("Invalid argument passed to
// --chmod") and by ParseChmod.
var chmodBadSpecs = []string{
	"", "g=u", "go=u", "u+r-w", "644x", "u644", "D", "17777", "8", "DFu+x",
	"u+q", "x+r", ",", "u+r,", "rw", "a+X,u=g",
}

func TestChmodParseErrors(t *testing.T) {
	for _, spec := range chmodBadSpecs {
		_, err := ParseChmod([]string{"u+r", spec})
		var se *SpecError
		if !errors.As(err, &se) {
			t.Errorf("ParseChmod(%q) = %v, want a *SpecError", spec, err)
			continue
		}
		if se.Flag != "--chmod" || !strings.Contains(spec, se.Item) {
			t.Errorf("ParseChmod(%q): SpecError{Flag: %q, Item: %q}", spec, se.Flag, se.Item)
		}
		if !strings.Contains(err.Error(), "--chmod") {
			t.Errorf("ParseChmod(%q): error %q does not name the flag", spec, err)
		}
	}
	r, err := ParseChmod(nil)
	if err != nil || r.Len() != 0 || r.Apply(0o4755, false) != 0o4755 {
		t.Errorf("ParseChmod(nil) = %v, %v; want no-op rules", r, err)
	}
}

func TestProcessUmask(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc/self/status:", err)
	}
	out, err := exec.Command("sh", "-c", "umask").Output()
	if err != nil {
		t.Skip("sh:", err)
	}
	want, err := strconv.ParseUint(strings.TrimSpace(string(out)), 8, 32)
	if err != nil {
		t.Fatalf("sh printed umask %q: %v", out, err)
	}
	if got := processUmask(); got != uint32(want) {
		t.Errorf("processUmask() = %03o, sh says %03o", got, want)
	}
}

// OwnerOptions.ChmodUmask is the umask the items naming no class use,
// whatever this process's umask: the client's, sent to the receiver of a
// push. Items naming a class and octal modes ignore it; without it the
// process's umask applies; above 0777 it is refused.
func TestOwnerPolicyChmodUmask(t *testing.T) {
	umask := func(u uint32) *uint32 { return &u }
	dir := treewalk.Entry{Path: "public_html", Kind: treewalk.KindDir, Mode: 0o755, User: "root", Group: "root"}
	file := treewalk.Entry{Path: "public_html/index.php", Kind: treewalk.KindFile, Mode: 0o644, User: "root", Group: "root"}
	shared := treewalk.Entry{Path: "tmp/sess_abc", Kind: treewalk.KindFile, Mode: 0o666, User: "root", Group: "root"}
	proc := processUmask()
	tests := []struct {
		chmod []string
		umask *uint32
		e     treewalk.Entry
		want  uint32
	}{
		{[]string{"ug-s,a+rX,D+w"}, umask(0o002), dir, 0o775},
		{[]string{"ug-s,a+rX,D+w"}, umask(0o022), dir, 0o755},
		{[]string{"ug-s,a+rX,D+w"}, umask(0o077), dir, 0o755},
		{[]string{"ug-s,a+rX,D+w"}, umask(0), dir, 0o777},
		{[]string{"=rwX"}, umask(0o002), file, 0o664},
		{[]string{"=rwX"}, umask(0o077), file, 0o600},
		{[]string{"-w"}, umask(0o002), shared, 0o446},
		{[]string{"-w"}, umask(0o022), shared, 0o466},
		{[]string{"a+w"}, umask(0o077), file, 0o666},
		{[]string{"F600"}, umask(0), file, 0o600},
		{[]string{"+w"}, nil, file, 0o644 | 0o222&^proc},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%q umask %v", tt.chmod, tt.umask)
		if tt.umask != nil {
			name = fmt.Sprintf("%q umask %03o", tt.chmod, *tt.umask)
		}
		p, err := NewOwnerPolicy(OwnerOptions{Chmod: tt.chmod, ChmodUmask: tt.umask}, hostIDs)
		if err != nil {
			t.Errorf("%s: NewOwnerPolicy: %v", name, err)
			continue
		}
		if _, _, got := p.Resolve(&tt.e); got != tt.want {
			t.Errorf("%s: %s gets %04o, want %04o", name, tt.e.Path, got, tt.want)
		}
	}
	_, err := NewOwnerPolicy(OwnerOptions{Chmod: []string{"+w"}, ChmodUmask: umask(0o1000)}, hostIDs)
	var se *SpecError
	if !errors.As(err, &se) || se.Flag != "--chmod" || !errors.Is(err, errChmodUmask) {
		t.Errorf("ChmodUmask 01000: NewOwnerPolicy error %v; want a --chmod *SpecError", err)
	}
}

// unixPerm turns an fs.FileMode's permission and set-id bits into 07777 form.
func unixPerm(m fs.FileMode) uint32 {
	p := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		p |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		p |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		p |= 0o1000
	}
	return p
}

// chmodFixtureDirModes are the modes of the fixture's directories; its root
// is 0755.
var chmodFixtureDirModes = []uint32{0o700, 0o775, 0o755, 0o2775, 0o1777, 0o500, 0o711, 0o3755}

// chmodFixture builds a source tree of files and directories in many modes
// and returns its root.
func chmodFixture(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	fileModes := []uint32{0o600, 0o644, 0o755, 0o700, 0o4755, 0o2755, 0o6755, 0o1777, 0o640, 0o711, 0o604, 0o444, 0o400}
	if os.Geteuid() == 0 { // rsync cannot read these as anyone else
		fileModes = append(fileModes, 0, 0o100, 0o010, 0o001, 0o4000)
	}
	for _, m := range fileModes {
		p := filepath.Join(src, fmt.Sprintf("f%04o.php", m))
		if err := os.WriteFile(p, []byte("<?php\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		chmodUnix(t, p, m)
	}
	for _, m := range chmodFixtureDirModes {
		p := filepath.Join(src, fmt.Sprintf("d%04o", m))
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		chmodUnix(t, p, m)
	}
	chmodUnix(t, src, 0o755)
	return src
}

// chmodUnix sets p's mode from 07777 form, set-id bits included.
func chmodUnix(t *testing.T, p string, m uint32) {
	t.Helper()
	fm := fs.FileMode(m & 0o777)
	if m&0o4000 != 0 {
		fm |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		fm |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		fm |= fs.ModeSticky
	}
	if err := os.Chmod(p, fm); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := unixPerm(fi.Mode()); got != m {
		t.Skipf("filesystem keeps %s as %04o, not %04o", p, got, m)
	}
}

// runRsyncChmod copies src to a new directory with rsync -r --perms and the
// given --chmod values under umask, and returns the destination. When rsync
// exits with an error, it returns "" and the error.
func runRsyncChmod(t *testing.T, rsync, src string, umask uint32, specs []string) (string, error) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "dst")
	t.Cleanup(func() { makeRemovable(dst) })
	args := []string{"-c", fmt.Sprintf(`umask %03o && exec "$0" "$@"`, umask), rsync, "-r", "--perms"}
	for _, s := range specs {
		args = append(args, "--chmod="+s)
	}
	args = append(args, src+"/", dst+"/")
	out, err := exec.Command("sh", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("rsync %q: %w: %s", specs, err, out)
	}
	return dst, nil
}

// makeRemovable gives the owner full access to every directory under root, so
// that t.TempDir's cleanup can remove what --chmod made read-only.
func makeRemovable(root string) {
	_ = os.Chmod(root, 0o700)
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
}

// TestChmodInteropRsync checks ChmodRules.Apply against the modes the real
// rsync produces for the same --chmod values, source modes and umask.
func TestChmodInteropRsync(t *testing.T) {
	rsync := testenv.RequireTool(t, "rsync")
	src := chmodFixture(t)
	specs := [][]string{
		{"D755,F644"}, {"u+rwX,go-w"}, {"Fgo-rwx"}, {"a+X"}, {"D2775"}, {"o="},
		{"+w"}, {"-w"}, {"=rwx"}, {"+rX"}, {"a=rX"}, {"a="}, {"Fa+x"},
		{"+s"}, {"a+s"}, {"o+s"}, {"g+s"}, {"ug+s"}, {"g-s"}, {"u-s"}, {"Dg-s"},
		{"u=rw"}, {"u=rws"}, {"g=s"}, {"=s"}, {"+t"}, {"o+t"}, {"o=t"}, {"-t"},
		{"a-x,+X"}, {"Fu+x,+X"}, {"a+xX"}, {"uD+x"}, {"Fa-X"},
		{"Dg+s,ug+w,Fo-w,+X"}, {"07777"}, {"0"}, {"F600,D700"}, {"00644"},
		{"F600", "u+x"}, {"D2775,F664", "o-rwx", "Fu+X"},
	}
	for _, umask := range []uint32{0o022, 0o077, 0o002, 0} {
		for _, spec := range specs {
			name := fmt.Sprintf("umask%03o/%s", umask, strings.Join(spec, "+"))
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				rules, err := ParseChmodUmask(spec, umask)
				if err != nil {
					t.Fatalf("ParseChmodUmask(%q): %v", spec, err)
				}
				// The other directories are empty, but rsync must write
				// into the root after giving it its new mode.
				if root := rules.Apply(0o755, true); os.Geteuid() != 0 && root&0o300 != 0o300 {
					t.Skipf("the root becomes %04o: only root can fill it", root)
				}
				dst, err := runRsyncChmod(t, rsync, src, umask, spec)
				if err != nil {
					t.Fatal(err)
				}
				compareTrees(t, rules, src, dst)
			})
		}
	}
}

// compareTrees checks that every entry of dst has the mode rules give its
// source in src.
func compareTrees(t *testing.T, rules ChmodRules, src, dst string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		sfi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		dfi, err := os.Lstat(filepath.Join(dst, rel))
		if err != nil {
			return err
		}
		from := unixPerm(sfi.Mode())
		want, got := unixPerm(dfi.Mode()), rules.Apply(from, sfi.IsDir())
		if got != want {
			t.Errorf("%s: source %04o: Apply = %04o, rsync made %04o", rel, from, got, want)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("compared only %d entries", n)
	}
}

// TestChmodInteropRsyncRejects checks that rsync and ParseChmod reject the
// same malformed values.
func TestChmodInteropRsyncRejects(t *testing.T) {
	rsync := testenv.RequireTool(t, "rsync")
	src := chmodFixture(t)
	for _, spec := range chmodBadSpecs {
		t.Run(strconv.Quote(spec), func(t *testing.T) {
			t.Parallel()
			if _, err := runRsyncChmod(t, rsync, src, 0o022, []string{spec}); err == nil {
				t.Errorf("rsync accepted --chmod=%q", spec)
			}
			if _, err := ParseChmodUmask([]string{spec}, 0o022); err == nil {
				t.Errorf("ParseChmodUmask accepted %q", spec)
			}
		})
	}
}
