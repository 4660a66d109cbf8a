package restore

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/internal/testenv"
)

// The exclude rule of a held file matches that file alone in the real
// rsync, whatever wildcard characters or backslashes its name holds.
func TestRsyncLiteralPatternMatchesOnlyItsPath(t *testing.T) {
	bin := testenv.RequireTool(t, "rsync")
	names := []string{`a[1]*.txt`, `a1x.txt`, `b?.php`, `bb.php`, `c\*d`, `c\xd`, `e\f`, `plain.txt`}
	for _, held := range names {
		src := t.TempDir()
		for _, n := range names {
			if err := os.MkdirAll(filepath.Join(src, "d"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(src, "d", n), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		out, err := exec.Command(bin, "-rn", "--out-format=%n", "--exclude=/"+rsyncLiteralPattern("d/"+held), src+"/", t.TempDir()+"/").CombinedOutput()
		if err != nil {
			t.Fatalf("rsync: %v\n%s", err, out)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if n, ok := strings.CutPrefix(l, "d/"); ok && n != "" {
				got = append(got, n)
			}
		}
		want := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == held })
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("exclude %q (pattern %q): rsync sends %q, want %q", held, rsyncLiteralPattern("d/"+held), got, want)
		}
	}
}

// The sender's error messages are taken out of the stream and kept; the
// words before the multiplexing, data and info messages pass unchanged.
func TestSenderMessagesTakesOutErrors(t *testing.T) {
	msg := func(tag byte, payload string) []byte {
		var h [4]byte
		binary.LittleEndian.PutUint32(h[:], uint32(tag+rsyncMplexBase)<<24|uint32(len(payload)))
		return append(h[:], payload...)
	}
	var in, want bytes.Buffer
	raw := []byte{27, 0, 0, 0, 1, 2, 3, 4}
	in.Write(raw)
	want.Write(raw)
	for _, m := range [][]byte{msg(0, "file list"), msg(2, "an info line\n"), msg(0, "")} {
		in.Write(m)
		want.Write(m)
	}
	in.Write(msg(1, "filename overflows max-path len by 2: deep/x\n"))
	in.Write(msg(3, "rsync: [sender] send_files failed to open \"x\": Permission denied (13)\n"))
	in.Write(msg(0, "more data"))
	want.Write(msg(0, "more data"))
	m := newSenderMessages(struct {
		io.Reader
		io.Writer
		io.Closer
	}{&in, io.Discard, io.NopCloser(nil)})
	var got bytes.Buffer
	buf := make([]byte, 3) // short reads, as gokrazy's may be
	for {
		n, err := m.Read(buf)
		got.Write(buf[:n])
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Errorf("passed %q, want %q", got.Bytes(), want.Bytes())
	}
	wantMsgs := []string{"filename overflows max-path len by 2: deep/x", `rsync: [sender] send_files failed to open "x": Permission denied (13)`}
	if msgs := m.Messages(); !slices.Equal(msgs, wantMsgs) {
		t.Errorf("messages %q, want %q", msgs, wantMsgs)
	}
}
