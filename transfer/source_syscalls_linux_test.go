package transfer

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/restoresync/restoresync/internal/testenv"
)

const sourceSyscallsChildEnv = "RESTORESYNC_SOURCE_SYSCALLS_CHILD"

// Reading a small file costs the sender no fcntl and no attempt to
// register it with Go's poller (a regular file cannot be polled, so each
// attempt is a failed epoll_ctl): LocalSource reads it with pread on a
// plain descriptor. Counted with strace in a child that reads n files.
func TestLocalSourceReadsOutsideThePoller(t *testing.T) {
	const n = 300
	if dir := os.Getenv(sourceSyscallsChildEnv); dir != "" {
		src, err := OpenLocalSource(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		list, err := src.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		read := 0
		for _, e := range list.Entries {
			if !e.HasData() {
				continue
			}
			r, err := src.Open(t.Context(), &Item{Entry: e, Length: e.Size})
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(r)
			r.Close()
			if err != nil || int64(len(b)) != e.Size {
				t.Fatalf("%s: %d bytes, %v", e.Path, len(b), err)
			}
			read++
		}
		if read != n {
			t.Fatalf("read %d files, want %d", read, n)
		}
		return
	}
	testenv.RequireTool(t, "strace")
	dir := t.TempDir()
	for i := 0; i < n; i++ {
		must(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i)), []byte(fmt.Sprintf("file %d", i)), 0o644))
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "strace.out")
	cmd := exec.Command("strace", "-f", "-qq", "-o", out, self, "-test.run=^TestLocalSourceReadsOutsideThePoller$", "-test.count=1")
	cmd.Env = append(os.Environ(), sourceSyscallsChildEnv+"="+dir)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, b)
	}
	trace, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"epoll_ctl", "fcntl"} {
		calls := len(regexp.MustCompile(`(?m)^\d+\s+`+name+`\(`).FindAll(trace, -1))
		if calls > n/10 {
			t.Errorf("%d %s calls for %d files read, want none per file", calls, name, n)
		}
	}
}
