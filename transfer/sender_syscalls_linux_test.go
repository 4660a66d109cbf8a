package transfer

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testenv"
)

// The sender's system calls per small file, counted with strace beside GNU
// tar's archiving of the same tree (tar -cf). The counted child is the
// agent's sender role in-process: LocalSource lists the tree (the walk,
// its stats and xattr lists) and each file's data goes out through
// sendItemData into frames, written nowhere (the wire's writes are not
// the sender's file system work; tar's writes of its archive are left out
// of its count likewise). A run on an empty tree is subtracted.
//
// RESTORESYNC_SYSCALLS_SRC=DIR counts a tree of DIR instead of the
// generated one, and -v prints both tables:
//
//	RESTORESYNC_SYSCALLS_SRC=/tmp/sf go test -count=1 -v -run 'TestSenderSyscallsPerSmallFile' ./transfer/
const senderSyscallsChildEnv = "RESTORESYNC_SENDER_SYSCALLS_CHILD"

// senderSyscallsChild sends the tree dir as the agent's sender role does,
// on one goroutine, and returns how many files it sent.
func senderSyscallsChild(t *testing.T, dir string) int {
	src, err := OpenLocalSource(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	list, err := src.List(t.Context())
	if err != nil || len(list.Errors) > 0 {
		t.Fatal(err, list.Errors)
	}
	fw, err := newFrameWriter(io.Discard, Compression{Codec: CodecNone})
	if err != nil {
		t.Fatal(err)
	}
	enc := &encoder{fw: fw}
	// Read requests of senderBatchItems items, in list order, as the
	// receiver's batches of small files ask for them.
	var items []Item
	for _, e := range list.Entries {
		if e.HasData() {
			items = append(items, Item{Entry: e, Length: e.Size})
		}
	}
	for i := 0; i < len(items); i += senderBatchItems {
		sendItems(t.Context(), enc, src, items[i:min(i+senderBatchItems, len(items))], 256<<10)
	}
	n := len(items)
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	return n
}

// senderBatchItems is how many items the counted sender gets in each read
// request.
const senderBatchItems = 64

// makeSenderTree writes n small files (200 bytes to 8 KiB) in directories
// of 50, as restore/dest's receiver count does.
func makeSenderTree(t testing.TB, dir string, n int) {
	rng := rand.New(rand.NewPCG(5, 11))
	mtime := time.Date(2024, 3, 4, 5, 6, 7, 890123456, time.UTC)
	for i := 0; i < n; i++ {
		d := filepath.Join(dir, fmt.Sprintf("d%02d", i/100), fmt.Sprintf("s%d", i/50%2))
		must(t, os.MkdirAll(d, 0o755))
		p := filepath.Join(d, fmt.Sprintf("f%05d.php", i))
		must(t, os.WriteFile(p, bytes.Repeat([]byte{byte('a' + i%26)}, 200+rng.IntN(8000)), 0o644))
		must(t, os.Chtimes(p, mtime, mtime.Add(time.Duration(i)*time.Second)))
	}
}

var straceCallLine = regexp.MustCompile(`^\d+\s+([a-z0-9_]+)\(`)

// straceCallNames names the system calls this strace does not know yet.
var straceCallNames = map[string]string{"syscall_0x1d1": "listxattrat", "syscall_0x1d0": "getxattrat"}

// straceCalls runs cmd under strace -f and counts its system calls by
// name, from the full trace (an unfinished call and its resumption count
// once).
func straceCalls(t *testing.T, cmd *exec.Cmd) map[string]int {
	t.Helper()
	out := filepath.Join(t.TempDir(), "strace.out")
	c := exec.Command("strace", append([]string{"-f", "-qq", "-o", out, cmd.Path}, cmd.Args[1:]...)...)
	c.Env, c.Dir, c.Stdout = cmd.Env, cmd.Dir, cmd.Stdout
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Run(); err != nil {
		t.Fatalf("strace %v: %v\n%s", cmd.Args, err, stderr.Bytes())
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, " resumed>") {
			continue
		}
		if m := straceCallLine.FindStringSubmatch(line); m != nil {
			name := m[1]
			if known, ok := straceCallNames[name]; ok {
				name = known
			}
			counts[name]++
		}
	}
	return counts
}

// senderRuntimeCalls are the Go runtime's and the C library's own calls,
// and the network's (the frames' writes), none of them file system work.
var senderRuntimeCalls = map[string]bool{"futex": true, "nanosleep": true, "mmap": true, "munmap": true,
	"madvise": true, "rt_sigaction": true, "rt_sigprocmask": true, "rt_sigreturn": true,
	"sched_yield": true, "sched_getaffinity": true, "clone": true, "clone3": true, "getpid": true,
	"tgkill": true, "gettid": true, "sigaltstack": true, "epoll_pwait": true, "brk": true,
	"mprotect": true, "set_robust_list": true, "rseq": true, "prlimit64": true, "write": true}

// callsPerFile is (a - base) / n per name and the sum of the file system
// calls.
func callsPerFile(a, base map[string]int, n int) (map[string]float64, float64) {
	out := map[string]float64{}
	sum := 0.0
	for name, c := range a {
		v := float64(c-base[name]) / float64(n)
		if v < 0.005 {
			continue
		}
		out[name] = v
		if !senderRuntimeCalls[name] {
			sum += v
		}
	}
	return out, sum
}

func callsTable(w io.Writer, title string, m map[string]float64, sum float64) {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		return m[names[i]] > m[names[j]] || m[names[i]] == m[names[j]] && names[i] < names[j]
	})
	fmt.Fprintf(w, "%s: %.2f file system calls per file\n", title, sum)
	for _, n := range names {
		note := ""
		if senderRuntimeCalls[n] {
			note = " (not counted)"
		}
		fmt.Fprintf(w, "  %-16s %6.2f%s\n", n, m[n], note)
	}
}

// A small file costs the sender no more system calls than GNU tar's
// archiving of it: the walk's lstat (statx) and directory reads, then
// open beneath the tree without following symlinks, one fstat that it is
// still a regular file, one pread, one fstat that it did not change while
// read, close; no fcntl, no poller registration, no seek.
func TestSenderSyscallsPerSmallFile(t *testing.T) {
	if dir := os.Getenv(senderSyscallsChildEnv); dir != "" {
		fmt.Fprintf(os.Stderr, "sent %d files\n", senderSyscallsChild(t, dir))
		return
	}
	testenv.RequireTool(t, "strace", "tar")
	tmp := t.TempDir()
	src := os.Getenv("RESTORESYNC_SYSCALLS_SRC")
	if src == "" {
		src = filepath.Join(tmp, "src")
		makeSenderTree(t, src, 2000)
	}
	empty := filepath.Join(tmp, "empty")
	must(t, os.Mkdir(empty, 0o755))
	n := 0
	must(t, filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return err
	}))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := func(dir string) map[string]int {
		cmd := exec.Command(self, "-test.run=^TestSenderSyscallsPerSmallFile$", "-test.count=1")
		cmd.Env = append(os.Environ(), senderSyscallsChildEnv+"="+dir)
		return straceCalls(t, cmd)
	}
	ours, sum := callsPerFile(child(src), child(empty), n)

	tarPath, err := exec.LookPath("tar")
	if err != nil {
		t.Fatal(err)
	}
	tar := func(dir, archive string, flags ...string) map[string]int {
		return straceCalls(t, exec.Command(tarPath, append(flags, "-cf", archive, "-C", dir, ".")...))
	}
	tars, tarSum := callsPerFile(tar(src, filepath.Join(tmp, "tree.tar")), tar(empty, filepath.Join(tmp, "empty.tar")), n)
	// The file list carries xattrs, which tar lists only with --xattrs.
	tarx, tarxSum := callsPerFile(tar(src, filepath.Join(tmp, "treex.tar"), "--xattrs"), tar(empty, filepath.Join(tmp, "emptyx.tar"), "--xattrs"), n)

	var b strings.Builder
	callsTable(&b, fmt.Sprintf("restoresync's sender (LocalSource: List, then sendItemData per file), %d files", n), ours, sum)
	callsTable(&b, "tar -cf of the same tree (its archive's writes not counted)", tars, tarSum)
	callsTable(&b, "tar --xattrs -cf", tarx, tarxSum)
	t.Log("\n" + b.String())
	if sum > tarxSum+0.05 {
		t.Errorf("the sender makes %.2f file system calls per small file, tar --xattrs -c %.2f\n%s", sum, tarxSum, b.String())
	}
	for _, name := range []string{"epoll_ctl", "fcntl", "lseek"} {
		if v := ours[name]; v > 0.05 {
			t.Errorf("%s: %.2f calls per file, want none per file", name, v)
		}
	}
}

// openBeneathLine is an open relative to a directory descriptor in strace's
// output: openat2 for a path, openat for a single name (OpenBeneath's two
// ways); opens relative to the working directory are not the sender's.
var openBeneathLine = regexp.MustCompile(`^\d+\s+openat2?\(\d+, "([^"]*)", (?:\{flags=)?([A-Z0-9_|]+)`)

// Like tar, the sender opens each file by its name beneath a descriptor of
// its directory, which it resolves once for the consecutive files of that
// directory in a read request (with openat2's no-symlink, beneath-the-tree
// rules), not the whole path from the tree's top for every file: the
// kernel walks one component per file instead of every directory on the
// way. Counted in the trace of the sender's openat and openat2 calls.
func TestSenderOpensEachFileBeneathItsDirectory(t *testing.T) {
	testenv.RequireTool(t, "strace")
	src := filepath.Join(t.TempDir(), "src")
	const files = 600
	makeSenderTree(t, src, files)
	dirs := 0
	must(t, filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs++
		}
		return err
	}))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "strace.out")
	cmd := exec.Command("strace", "-f", "-qq", "-e", "trace=openat,openat2", "-o", out, self, "-test.run=^TestSenderSyscallsPerSmallFile$", "-test.count=1")
	cmd.Env = append(os.Environ(), senderSyscallsChildEnv+"="+src)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, b)
	}
	trace, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	fileOpens, wholePaths, dirOpens := 0, 0, 0
	for _, line := range strings.Split(string(trace), "\n") {
		m := openBeneathLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if strings.Contains(m[2], "O_DIRECTORY") || m[1] == "." {
			dirOpens++
			continue
		}
		fileOpens++
		if strings.Contains(m[1], "/") {
			wholePaths++
		}
	}
	if fileOpens != files {
		t.Fatalf("%d opens of files, want %d\n%s", fileOpens, files, trace)
	}
	if wholePaths > 0 {
		t.Errorf("%d of %d files opened by a path with directories in it, want each by its name beneath its directory", wholePaths, files)
	}
	// The walk opens each directory once; each read request resolves
	// each directory it reads from once.
	batches := (files + senderBatchItems - 1) / senderBatchItems
	if limit := 2*dirs + batches; dirOpens > limit {
		t.Errorf("%d directory opens for %d directories in %d read requests, want at most %d", dirOpens, dirs, batches, limit)
	}
	t.Logf("%d files in %d directories: %d file opens, %d directory opens", files, dirs, fileOpens, dirOpens)
}

// BenchmarkPullSmallFiles pulls 5,000 small files (200 bytes to 8 KiB, 50
// a directory) through the in-process server on one stream with
// --compress none, both ends in this process: the walk, the list, the
// read requests, the sender's reads and frames, the receiver's decoding
// (the data discarded). Beside the time it reports per file the CPU time
// of the process (user + system, from getrusage: both ends' work and the
// runtime's), allocations and bytes allocated.
//
//	go test -run '^$' -bench PullSmallFiles -count 6 ./transfer/
func BenchmarkPullSmallFiles(b *testing.B) {
	const files = 5000
	dir := b.TempDir()
	makeSenderTree(b, dir, files)
	var total int64
	must(b, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			total += fi.Size()
		}
		return err
	}))
	c := Compression{Codec: CodecNone}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.ReportAllocs()
	b.SetBytes(total)
	b.ResetTimer()
	start := cpu()
	for range b.N {
		pullOnce(b, dir, c, 1, total)
	}
	used := cpu() - start
	b.ReportMetric(float64(used.Nanoseconds())/float64(b.N*files), "cpu-ns/file")
}
