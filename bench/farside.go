package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The far side of a run is the source host: sshd, restoresync serve, rsync
// --server, tar. Run measures it two ways:
//
//   - every command a row runs there is started under `restoresync bench
//     rusage` (the wrapper scripts FarSetup writes), which waits for it and
//     records its CPU time and peak RSS, children included, in a report
//     file; Run collects and removes the reports after each run
//     (CollectRusage, through the agent, not timed);
//   - when RunOptions.ServerPID names the sshd that serves the source (the
//     lab's), the growth of that process's reaped children's CPU time
//     (/proc/PID/stat cutime + cstime) over a run: every connection's sshd
//     session, its crypto included, and the commands under it.

// Usage is the resource use of one process and the descendants it waited
// for, as getrusage(RUSAGE_CHILDREN) reports it after they ended.
type Usage struct {
	// Command is the program that ran (its first word).
	Command string `json:"command"`
	// CPUSeconds is user + system time in seconds.
	CPUSeconds float64 `json:"cpu_seconds"`
	// PeakRSSBytes is the largest resident set of any one of the
	// processes, in bytes.
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
}

// RunRusage runs argv (a program and its arguments, found on $PATH) with
// this process's standard input, output and error, waits for it, and
// writes its Usage as JSON to a new file in dir (created if missing) named
// after the child's process ID. SIGINT, SIGTERM and SIGHUP are passed on
// to the child rather than acted on. It returns the child's exit status
// (128 + signal when a signal ended it) and an error only when the child
// could not be started or the report could not be written; a report that
// cannot be written does not change the status. Not for concurrent use
// within one process (it changes signal handling).
func RunRusage(ctx context.Context, dir string, argv []string) (int, error) {
	if len(argv) == 0 {
		return 1, errors.New("rusage: no command")
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	c := exec.Command(argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := c.Start(); err != nil {
		return 127, fmt.Errorf("rusage: %w", err)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				c.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	waitErr := c.Wait()
	close(done)
	code := 0
	if ws, ok := c.ProcessState.Sys().(syscall.WaitStatus); ok {
		switch {
		case ws.Signaled():
			code = 128 + int(ws.Signal())
		default:
			code = ws.ExitStatus()
		}
	} else if waitErr != nil {
		code = 1
	}
	u := Usage{Command: filepath.Base(argv[0])}
	if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
		u.CPUSeconds = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
		u.PeakRSSBytes = ru.Maxrss << 10 // Linux reports KiB
	}
	if err := writeUsage(dir, c.Process.Pid, u); err != nil {
		return code, err
	}
	return code, nil
}

// writeUsage writes u to dir/PID.json through a temporary name, so that a
// collector never reads half a report.
func writeUsage(dir string, pid int, u Usage) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("rusage report: %w", err)
	}
	b, err := json.Marshal(u)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".%d.tmp", pid))
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("rusage report: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, fmt.Sprintf("%d.json", pid))); err != nil {
		return fmt.Errorf("rusage report: %w", err)
	}
	return nil
}

// FarUsage sums the reports of one run's far-side commands.
type FarUsage struct {
	// Processes is the number of reports (wrapped commands) summed.
	Processes int `json:"processes"`
	// CPUSeconds is their total CPU time, in seconds.
	CPUSeconds float64 `json:"cpu_seconds"`
	// PeakRSSBytes is the sum of their peak resident sets, in bytes: an
	// upper bound on the far side's memory at any instant, since a run's
	// commands (one per stream) run at the same time.
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
}

// CollectRusage reads and removes the reports RunRusage wrote in dir and
// returns their sum. A missing dir gives a zero FarUsage. Reports being
// written (temporary names) are left alone.
func CollectRusage(dir string) (FarUsage, error) {
	var f FarUsage
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, fmt.Errorf("rusage reports: %w", err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			return f, fmt.Errorf("rusage report: %w", err)
		}
		var u Usage
		if err := json.Unmarshal(b, &u); err != nil {
			return f, fmt.Errorf("rusage report %s: %w", p, err)
		}
		f.Processes++
		f.CPUSeconds += u.CPUSeconds
		f.PeakRSSBytes += u.PeakRSSBytes
		if err := os.Remove(p); err != nil {
			return f, fmt.Errorf("rusage report: %w", err)
		}
	}
	return f, nil
}

// FarSetup is what `bench far-setup` makes on the source host and prints
// as JSON: a directory with the wrapper scripts and the report directory.
type FarSetup struct {
	// Dir is the directory to remove at the end.
	Dir string `json:"dir"`
	// Wrap is a script that runs its arguments as a command under
	// `restoresync bench rusage`.
	Wrap string `json:"wrap"`
	// Agent is a script that runs this restoresync with its arguments
	// under the wrapper: the --remote-path of the restore rows.
	Agent string `json:"agent"`
	// Agent0 is the restoresync binary the scripts run.
	Agent0 string `json:"agent0"`
	// Reports is where the wrapped commands' reports land.
	Reports string `json:"reports"`
}

// MakeFarSetup creates a new directory under the system's temporary
// directory holding the wrapper scripts of FarSetup for the restoresync
// binary exe (an absolute path), and returns it.
func MakeFarSetup(exe string) (FarSetup, error) {
	dir, err := os.MkdirTemp("", "restoresync-bench-far-")
	if err != nil {
		return FarSetup{}, fmt.Errorf("far-side setup: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return FarSetup{}, fmt.Errorf("far-side setup: %w", err)
	}
	s := FarSetup{Dir: dir, Wrap: filepath.Join(dir, "wrap"), Agent: filepath.Join(dir, "restoresync"),
		Agent0: exe, Reports: filepath.Join(dir, "reports")}
	wrap := fmt.Sprintf("#!/bin/sh\nexec %s bench rusage --out %s -- \"$@\"\n", shellQuote(exe), shellQuote(s.Reports))
	agent := fmt.Sprintf("#!/bin/sh\nexec %s %s \"$@\"\n", shellQuote(s.Wrap), shellQuote(exe))
	for p, text := range map[string]string{s.Wrap: wrap, s.Agent: agent} {
		if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
			os.RemoveAll(dir)
			return FarSetup{}, fmt.Errorf("far-side setup: %w", err)
		}
	}
	if err := os.Mkdir(s.Reports, 0o700); err != nil {
		os.RemoveAll(dir)
		return FarSetup{}, fmt.Errorf("far-side setup: %w", err)
	}
	return s, nil
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// reapedCPU returns the CPU time, in seconds, of the children that process
// pid has waited for (and theirs): fields cutime and cstime of
// /proc/PID/stat, see proc(5).
func reapedCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("server CPU: %w", err)
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("server CPU: /proc/%d/stat: unexpected format", pid)
	}
	fields := strings.Fields(string(b[i+1:])) // fields[0] is field 3 (state)
	if len(fields) < 15 {
		return 0, fmt.Errorf("server CPU: /proc/%d/stat: too few fields", pid)
	}
	cu, err1 := strconv.ParseInt(fields[13], 10, 64) // field 16
	cs, err2 := strconv.ParseInt(fields[14], 10, 64) // field 17
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("server CPU: /proc/%d/stat: %w", pid, err)
	}
	return float64(cu+cs) / clockTicks, nil
}

// children returns how many processes have pid as their parent.
func children(pid int) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	want := strconv.Itoa(pid)
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		f, err := os.Open(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "PPid:"); ok {
				if strings.TrimSpace(v) == want {
					n++
				}
				break
			}
		}
		f.Close()
	}
	return n
}

// settledReapedCPU waits (at most wait) until process pid has no children
// left, so that every finished connection's time has been added to it,
// then returns reapedCPU. ok is false when children were still there at the
// deadline (the figure may then miss some).
func settledReapedCPU(ctx context.Context, pid int, wait time.Duration) (cpu float64, ok bool, err error) {
	deadline := time.Now().Add(wait)
	ok = true
	for children(pid) > 0 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			ok = false
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cpu, err = reapedCPU(pid)
	return cpu, ok, err
}
