package dest

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// sparseWriter leaves holes for zero blocks, writes everything else, and,
// in punch mode, zeroes what an earlier attempt wrote where zeros belong.
func TestSparseWriter(t *testing.T) {
	want := make([]byte, 10*sparseBlock+100)
	copy(want[sparseBlock+10:], "data in block 1")
	copy(want[7*sparseBlock-3:], "straddles blocks 6 and 7")
	want[len(want)-1] = 'z'
	for _, punch := range []bool{false, true} {
		p := filepath.Join(t.TempDir(), "f")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if punch { // an earlier attempt left garbage everywhere
			f.Write(bytes.Repeat([]byte{0xee}, len(want)))
		}
		w := &sparseWriter{f: fdFile(f.Fd()), punch: punch}
		size := 3000 // odd write sizes
		if punch {
			size = 2 * sparseBlock // aligned, as bufio's writes of a block are: partial punches free nothing
		}
		for rest := want; len(rest) > 0; {
			k := min(len(rest), size)
			if _, err := w.Write(rest[:k]); err != nil {
				t.Fatal(err)
			}
			rest = rest[k:]
		}
		f.Truncate(int64(len(want)))
		got, _ := io.ReadAll(io.NewSectionReader(f, 0, int64(len(want))+1))
		if !bytes.Equal(got, want) {
			t.Errorf("punch %v: contents differ", punch)
		}
		var st unix.Stat_t
		unix.Fstat(int(f.Fd()), &st)
		if st.Blocks*512 > 5*sparseBlock {
			t.Errorf("punch %v: %d bytes allocated for 4 blocks of data", punch, st.Blocks*512)
		}
		f.Close()
	}
	// digHoles turns a fully written file's zero blocks into holes.
	p := filepath.Join(t.TempDir(), "full")
	if err := os.WriteFile(p, want, 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(p, unix.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := digHoles(fd, int64(len(want))); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	var st unix.Stat_t
	unix.Fstat(fd, &st)
	if !bytes.Equal(got, want) || st.Blocks*512 > 5*sparseBlock {
		t.Errorf("digHoles: same contents %v, %d bytes allocated", bytes.Equal(got, want), st.Blocks*512)
	}
}
