package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/internal/testsshd"
)

// BenchmarkRestoreVsBaselines restores one generated hosting account over a
// real sshd on loopback with restoresync (built-in SSH client and through
// the system ssh with -e), and, in the same run, with `rsync -a` and
// `tar -cf - | ssh | tar -xf -`, the baselines the mission names. Each
// iteration restores into a fresh destination; removing it is not timed.
// Besides ns/op it reports MB/s of payload and the CPU seconds that the
// child processes (client, ssh and, through sshd, the far side) used.
//
//	RESTORESYNC_BENCH_SCALE=0.3 go test -run '^$' -bench RestoreVsBaselines -benchtime 1x -count 5 ./integration/
//
// The tree is `bench gen --profile hosting --seed 1` at that scale (default
// 0.2, about 120 MiB in 4,000 files). RESTORESYNC_BENCH_DST puts the
// destinations in another directory (e.g. /dev/shm, to take the disk's
// file-creation cost out of the comparison).
func BenchmarkRestoreVsBaselines(b *testing.B) {
	testenv.RequireTool(b, "rsync", "tar", "ssh")
	scale := os.Getenv("RESTORESYNC_BENCH_SCALE")
	if scale == "" {
		scale = "0.2"
	}
	srv := testsshd.Start(b)
	cfg := srv.Config(b)
	src := filepath.Join(sharedDir, "bench-hosting-"+scale)
	if _, err := os.Stat(src); err != nil {
		out, err := exec.Command(binPath, "bench", "gen", "--profile", "hosting", "--scale", scale, "--seed", "1", src).CombinedOutput()
		if err != nil {
			b.Fatalf("bench gen: %v\n%s", err, out)
		}
	}
	payload := treeBytes(b, src)
	rsh := "ssh -F " + cfg
	cases := []struct {
		name string
		cmd  func(dst string) *exec.Cmd
	}{
		{"restoresync-builtin-ssh", func(dst string) *exec.Cmd {
			return exec.Command(binPath, "restore", "-F", cfg, "--remote-path", binPath, "testhost:"+src, dst)
		}},
		{"restoresync-builtin-ssh-none", func(dst string) *exec.Cmd {
			return exec.Command(binPath, "restore", "--compress", "none", "-F", cfg, "--remote-path", binPath, "testhost:"+src, dst)
		}},
		{"restoresync-e-ssh", func(dst string) *exec.Cmd {
			return exec.Command(binPath, "restore", "-e", rsh, "--remote-path", binPath, "testhost:"+src, dst)
		}},
		{"rsync-a", func(dst string) *exec.Cmd {
			return exec.Command("rsync", "-aH", "-e", rsh, "testhost:"+src+"/", dst+"/")
		}},
		{"rsync-a-zstd", func(dst string) *exec.Cmd {
			return exec.Command("rsync", "-aH", "-z", "--compress-choice=zstd", "-e", rsh, "testhost:"+src+"/", dst+"/")
		}},
		{"tar-ssh-tar", func(dst string) *exec.Cmd {
			return exec.Command("sh", "-c", fmt.Sprintf("mkdir -p '%s' && ssh -F '%s' testhost tar -C '%s' -cf - . | tar -C '%s' -xpf -", dst, cfg, src, dst))
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(payload)
			var cpu time.Duration
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				dst := filepath.Join(b.TempDir(), "dst")
				if d := os.Getenv("RESTORESYNC_BENCH_DST"); d != "" {
					dst = filepath.Join(d, fmt.Sprintf("restoresync-bench-%d", i))
				}
				cmd := c.cmd(dst)
				b.StartTimer()
				out, err := cmd.CombinedOutput()
				b.StopTimer()
				if err != nil {
					b.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
				}
				if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
					cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
				}
				os.RemoveAll(dst)
				b.StartTimer()
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N), "client-cpu-s/op")
		})
	}
}

// treeBytes is the payload of a tree: regular files, each inode once.
func treeBytes(b *testing.B, root string) int64 {
	seen := map[uint64]bool{}
	var n int64
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			st := fi.Sys().(*syscall.Stat_t)
			if !seen[st.Ino] {
				seen[st.Ino] = true
				n += fi.Size()
			}
		}
		return err
	})
	return n
}
