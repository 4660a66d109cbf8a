package dest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// The receiver's system calls per small file, counted with strace beside
// GNU tar's extraction of the same tree. The tree's file list and data are
// loaded before the counted part (the sender's work is not the receiver's),
// and a run on an empty tree is subtracted, so what remains is the
// Writer's own cost of Plan, WriteItem and Finish per file.
//
// RESTORESYNC_SYSCALLS_SRC=DIR counts a tree of DIR instead of the
// generated one (for instance `restoresync bench gen --profile smallfiles
// --scale 0.2 --seed 5 DIR`), and -v prints both tables:
//
//	RESTORESYNC_SYSCALLS_SRC=/tmp/sf go test -count=1 -v -run 'TestReceiverSyscallsPerSmallFile' ./restore/dest/

const (
	syscallsChildEnv = "RESTORESYNC_SYSCALLS_CHILD" // "LOAD DST": the counted child
	syscallsSrcEnv   = "RESTORESYNC_SYSCALLS_SRC"
)

// syscallsLoad is what the counted child restores: the file list and
// every regular file's data, back to back.
type syscallsLoad struct {
	Entries []treewalk.Entry
	Data    []byte
}

func TestMain(m *testing.M) {
	if v := os.Getenv(syscallsChildEnv); v != "" {
		load, dst, _ := strings.Cut(v, " ")
		if err := syscallsChild(load, dst); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// syscallsChild restores load into dst through a Writer, on one goroutine.
func syscallsChild(load, dst string) error {
	f, err := os.Open(load)
	if err != nil {
		return err
	}
	var l syscallsLoad
	err = gob.NewDecoder(bufio.NewReaderSize(f, 1<<20)).Decode(&l)
	f.Close()
	if err != nil {
		return err
	}
	ctx := context.Background()
	w, err := NewWriter(dst, WriterOptions{})
	if err != nil {
		return err
	}
	plan, err := w.Plan(ctx, l.Entries)
	if err != nil || len(plan.Errors) > 0 {
		return fmt.Errorf("plan: %v %v", err, plan.Errors)
	}
	var off int64
	for _, e := range l.Entries {
		if !e.HasData() {
			continue
		}
		it := &transfer.Item{Entry: e, Length: e.Size}
		if err := w.WriteItem(ctx, it, bytes.NewReader(l.Data[off:off+e.Size])); err != nil {
			return fmt.Errorf("%s: %w", e.Path, err)
		}
		off += e.Size
	}
	errs, err := w.Finish(ctx, l.Entries)
	if err != nil || len(errs) > 0 {
		return fmt.Errorf("finish: %v %v", err, errs)
	}
	return w.Close()
}

// writeSyscallsLoad walks src and writes its list and data to load.
func writeSyscallsLoad(t *testing.T, src, load string) (files, dirs int) {
	t.Helper()
	list, err := treewalk.Walk(t.Context(), src)
	if err != nil || len(list.Errors) > 0 {
		t.Fatal(err, list.Errors)
	}
	l := syscallsLoad{Entries: list.Entries}
	for _, e := range list.Entries {
		if e.Kind == treewalk.KindDir {
			dirs++
		}
		if !e.HasData() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Path))
		if err != nil || int64(len(b)) != e.Size {
			t.Fatalf("%s: %d bytes, %v", e.Path, len(b), err)
		}
		l.Data = append(l.Data, b...)
		files++
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(&l); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(load, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return files, dirs
}

// makeSmallTree writes n small files (a few hundred bytes to 8 KiB) in
// directories of 100, with the modes and mtimes of an account's files.
func makeSmallTree(t *testing.T, dir string, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 11))
	mtime := time.Date(2024, 3, 4, 5, 6, 7, 890123456, time.UTC)
	for i := 0; i < n; i++ {
		d := filepath.Join(dir, fmt.Sprintf("d%02d", i/100), fmt.Sprintf("s%d", i/50%2))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(d, fmt.Sprintf("f%05d.php", i))
		data := bytes.Repeat([]byte{byte('a' + i%26)}, 200+rng.IntN(8000))
		mode := os.FileMode(0o644)
		if i%7 == 0 {
			mode = 0o600
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
}

// syscallCounts is calls and failures per system call name.
type syscallCounts map[string][2]int

var (
	straceCall    = regexp.MustCompile(`^\d+\s+([a-z0-9_]+)\(`)
	straceResumed = regexp.MustCompile(`^\d+\s+<\.\.\. ([a-z0-9_]+) resumed>`)
	straceFailed  = regexp.MustCompile(`= -1 E[A-Z0-9]+ `)
)

// straceNames names the system calls this strace does not know yet.
var straceNames = map[string]string{"syscall_0x1d1": "listxattrat", "syscall_0x1d0": "getxattrat",
	"syscall_0x1cf": "setxattrat", "syscall_0x1d2": "removexattrat"}

// straceCount runs cmd under `strace -f` and counts its system calls from
// the full trace (strace -c leaves out the calls it has no name for, such
// as listxattrat).
func straceCount(t *testing.T, cmd *exec.Cmd) syscallCounts {
	t.Helper()
	out := filepath.Join(t.TempDir(), "strace.out")
	args := append([]string{"-f", "-qq", "-o", out, cmd.Path}, cmd.Args[1:]...)
	c := exec.Command("strace", args...)
	c.Env, c.Dir = cmd.Env, cmd.Dir
	if b, err := c.CombinedOutput(); err != nil {
		t.Fatalf("strace %v: %v\n%s", cmd.Args, err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	counts := syscallCounts{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name := ""
		if m := straceResumed.FindStringSubmatch(line); m != nil {
			name = m[1]
		} else if m := straceCall.FindStringSubmatch(line); m != nil {
			name = m[1]
			c := counts[name]
			c[0]++
			counts[name] = c
		}
		if name == "" || strings.HasSuffix(line, "<unfinished ...>") {
			continue
		}
		if straceFailed.MatchString(line) {
			c := counts[name]
			c[1]++
			counts[name] = c
		}
	}
	for raw, name := range straceNames {
		if c, ok := counts[raw]; ok {
			counts[name] = c
			delete(counts, raw)
		}
	}
	return counts
}

// runtimeCalls are the Go runtime's and the C library's own: scheduling,
// memory, signals, start-up. They do not depend on the files written.
var runtimeCalls = map[string]bool{"futex": true, "nanosleep": true, "mmap": true, "munmap": true,
	"madvise": true, "rt_sigaction": true, "rt_sigprocmask": true, "rt_sigreturn": true,
	"sched_yield": true, "sched_getaffinity": true, "clone": true, "clone3": true, "getpid": true,
	"tgkill": true, "gettid": true, "sigaltstack": true, "epoll_pwait": true, "brk": true,
	"mprotect": true, "set_robust_list": true, "rseq": true, "prlimit64": true}

// perFile is (a - base) / n per name, and the sum over the calls that
// touch files (runtimeCalls left out).
func perFile(a, base syscallCounts, n int) (map[string][2]float64, float64) {
	out := map[string][2]float64{}
	sum := 0.0
	for name, c := range a {
		b := base[name]
		v := [2]float64{float64(c[0]-b[0]) / float64(n), float64(c[1]-b[1]) / float64(n)}
		if v[0] < 0.005 {
			continue
		}
		out[name] = v
		if !runtimeCalls[name] {
			sum += v[0]
		}
	}
	return out, sum
}

func syscallTable(w io.Writer, title string, m map[string][2]float64, sum float64) {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return m[names[i]][0] > m[names[j]][0] })
	fmt.Fprintf(w, "%s: %.2f file system calls per file\n", title, sum)
	for _, n := range names {
		note := ""
		if runtimeCalls[n] {
			note = " (runtime)"
		}
		fmt.Fprintf(w, "  %-16s %6.2f calls %6.2f failed%s\n", n, m[n][0], m[n][1], note)
	}
}

// A small file new to DST costs the receiver no more system calls than
// tar's extraction of it and the one call that puts it in place: its
// directory is resolved once for all its files, an unnamed temporary file
// is linked into place, its metadata is set on the descriptor, nothing
// lists the xattrs of a file just made, nothing stats a name in a
// directory this run made or lists such a directory for stale temporary
// files, and nothing registers a file with Go's poller.
func TestReceiverSyscallsPerSmallFile(t *testing.T) {
	testenv.RequireTool(t, "strace", "tar")
	if os.Geteuid() != 0 {
		t.Skip("counts the calls of a restore as root (owners set)")
	}
	tmp := t.TempDir()
	src := os.Getenv(syscallsSrcEnv)
	if src == "" {
		src = filepath.Join(tmp, "src")
		makeSmallTree(t, src, 2000)
	}
	empty := filepath.Join(tmp, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	load, emptyLoad := filepath.Join(tmp, "load"), filepath.Join(tmp, "empty.load")
	n, dirs := writeSyscallsLoad(t, src, load)
	writeSyscallsLoad(t, empty, emptyLoad)

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := func(load, dst string) syscallCounts {
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(os.Environ(), syscallsChildEnv+"="+load+" "+dst)
		return straceCount(t, cmd)
	}
	dst := filepath.Join(tmp, "dst")
	ours, sum := perFile(child(load, dst), child(emptyLoad, filepath.Join(tmp, "dst0")), n)
	diffs, err := treewalk.Compare(t.Context(), src, dst, treewalk.CompareOptions{})
	if err != nil || len(diffs) > 0 {
		t.Fatalf("restored tree differs from its source: %v %v", err, diffs)
	}

	tarFile, emptyTar := filepath.Join(tmp, "tree.tar"), filepath.Join(tmp, "empty.tar")
	for _, a := range [][]string{{tarFile, src}, {emptyTar, empty}} {
		if b, err := exec.Command("tar", "-cf", a[0], "-C", a[1], ".").CombinedOutput(); err != nil {
			t.Fatalf("tar -c: %v\n%s", err, b)
		}
	}
	untar := func(archive, dst string) syscallCounts {
		if err := os.Mkdir(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		return straceCount(t, exec.Command(mustLookPath(t, "tar"), "-xpf", archive, "-C", dst))
	}
	tars, tarSum := perFile(untar(tarFile, filepath.Join(tmp, "tar")), untar(emptyTar, filepath.Join(tmp, "tar0")), n)

	var b strings.Builder
	syscallTable(&b, "restoresync's receiver (dest.Writer: Plan, WriteItem, Finish), "+strconv.Itoa(n)+" files", ours, sum)
	syscallTable(&b, "tar -xpf of the same tree", tars, tarSum)
	t.Log("\n" + b.String())

	// tar's reads of its archive stand for the receiver's reads of the
	// wire, which the Writer does not do.
	tarFiles := tarSum - tars["read"][0]
	if sum > tarFiles+1.05 {
		t.Errorf("the receiver makes %.2f file system calls per small file; tar -x makes %.2f besides reading its archive, and the receiver may add one (the call that puts the file in place)\n%s", sum, tarFiles, b.String())
	}
	for _, name := range []string{"epoll_ctl", "fcntl", "flistxattr", "listxattrat", "newfstatat", "fstat", "renameat", "openat2", "getdents64"} {
		limit := 0.05
		if name == "getdents64" {
			limit = 0.01
		}
		if name == "openat2" || name == "listxattrat" {
			// Directories: once per pass (Plan, the writes, Finish's
			// cursor and its directory metadata).
			limit = 4*float64(dirs)/float64(n) + 0.01
		}
		if v := ours[name][0]; v > limit {
			t.Errorf("%s: %.2f calls per file, want at most %.2f (none per file)", name, v, limit)
		}
	}
}

func mustLookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
