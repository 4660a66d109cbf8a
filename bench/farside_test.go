package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// busyLoop is a shell command that burns some CPU (a few tenths of a
// second) and exits with status 3.
const busyLoop = `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; exit 3`

func TestRunRusageReports(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "reports")
	code, err := RunRusage(context.Background(), dir, []string{"sh", "-c", busyLoop})
	if err != nil || code != 3 {
		t.Fatalf("RunRusage = %d, %v; want the command's status 3", code, err)
	}
	code, err = RunRusage(context.Background(), dir, []string{"sh", "-c", "kill -TERM $$"})
	if err != nil || code != 128+15 {
		t.Errorf("RunRusage of a killed command = %d, %v; want 143", code, err)
	}
	if code, err := RunRusage(context.Background(), dir, []string{"/nonexistent/program"}); err == nil || code != 127 {
		t.Errorf("RunRusage of a missing program = %d, %v; want 127 and an error", code, err)
	}
	f, err := CollectRusage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if f.Processes != 2 || f.CPUSeconds <= 0 || f.PeakRSSBytes <= 0 {
		t.Errorf("CollectRusage = %+v; want 2 reports with CPU time and RSS", f)
	}
	if f.CPUSeconds > 60 || f.PeakRSSBytes > 1<<30 {
		t.Errorf("CollectRusage = %+v: units wrong?", f)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 0 {
		t.Errorf("reports left after collecting: %v", ents)
	}
	if f, err := CollectRusage(filepath.Join(dir, "missing")); err != nil || f.Processes != 0 {
		t.Errorf("CollectRusage of a missing dir = %+v, %v", f, err)
	}
}

func TestReapedCPUGrows(t *testing.T) {
	before, err := reapedCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command("sh", "-c", busyLoop)
	c.Run() // exit status 3 on purpose
	if c.ProcessState == nil {
		t.Fatal("busy loop did not run")
	}
	own := cpuTime(c).Seconds()
	after, ok, err := settledReapedCPU(context.Background(), os.Getpid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	_ = ok // other tests' children may still run
	if after-before < own-0.02 {
		t.Errorf("reaped CPU grew by %.2f s, the child used %.2f s", after-before, own)
	}
	if _, err := reapedCPU(-1); err == nil {
		t.Error("reapedCPU(-1): want an error")
	}
}

func TestMakeFarSetup(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	s, err := MakeFarSetup("/usr/local/bin/restore sync") // a path that needs quoting
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{s.Wrap, s.Agent} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm()&0o111 == 0 {
			t.Errorf("%s: %v, mode %v; want an executable script", p, err, fi.Mode())
		}
	}
	b, _ := os.ReadFile(s.Wrap)
	want := "#!/bin/sh\nexec '/usr/local/bin/restore sync' bench rusage --out " + s.Reports + " -- \"$@\"\n"
	if string(b) != want {
		t.Errorf("wrap script:\n%s\nwant:\n%s", b, want)
	}
	if fi, err := os.Stat(s.Reports); err != nil || !fi.IsDir() {
		t.Errorf("reports dir: %v", err)
	}
}
