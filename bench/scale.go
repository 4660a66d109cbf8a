package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/transport"
)

// The tools Scale times, as ScaleOptions.Tools names them.
const (
	// ScaleToolRestoresync is a pull with restore's defaults.
	ScaleToolRestoresync = "restoresync"
	// ScaleToolRestoresyncNone is the same with --compress none.
	ScaleToolRestoresyncNone = "restoresync-none"
	// ScaleToolRsync is `rsync -aH -e ssh HOST:DIR/ DST/`.
	ScaleToolRsync = "rsync"
	// ScaleToolTar is `ssh HOST tar -cf - -C DIR . | tar -xpf - -C DST`.
	ScaleToolTar = "tar"
)

// ScaleTools lists the tools Scale knows, in the order it runs them by
// default.
func ScaleTools() []string {
	return []string{ScaleToolRestoresync, ScaleToolRestoresyncNone, ScaleToolRsync, ScaleToolTar}
}

// timeCommand is GNU time, and timeFormat what it writes after the
// command's name: user and system CPU seconds, peak RSS in KiB.
const (
	timeCommand = "/usr/bin/time"
	timeFormat  = "%U %S %M"
)

// ScaleOptions say what Scale restores, with which tools, where to.
type ScaleOptions struct {
	// Src is [user@]host:DIR (or ssh://...) of a tree on this host, served
	// by the sshd of ServerPID: the far side is measured from this host.
	Src string
	// Binary is the restoresync the client runs; "" means this process's
	// own executable.
	Binary string
	// SSH are the connection options (-F, -i, --known-hosts); RemotePath
	// is the restoresync the far side runs ("" means Binary). Each
	// process Scale starts, and each command the far side runs, runs
	// under GNU time (/usr/bin/time), on this host.
	SSH transport.SSHOptions
	// ServerPID, when not 0, is the sshd serving Src: each run's far-side
	// CPU with sshd included is what it reaped from its children during
	// the run. Nothing else may use that sshd meanwhile.
	ServerPID int
	// Runs is how many rounds run; 0 means 3.
	Runs int
	// DstDirs are the directories each run's destination is made in
	// (e.g. /dev/shm and a directory on the disk); empty means the
	// system's temporary directory.
	DstDirs []string
	// Tools are ScaleTools names; empty means all of them.
	Tools []string
	// Title heads the results.
	Title string
	// Log, when not nil, gets a line per run.
	Log io.Writer
}

// applyDefaults fills in the documented defaults and checks the values.
func (o *ScaleOptions) applyDefaults() error {
	if o.Src == "" {
		return fmt.Errorf("%w: no source (--src)", restore.ErrUsage)
	}
	if o.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find restoresync binary: %w", err)
		}
		o.Binary = exe
	}
	if o.SSH.RemotePath == "" {
		o.SSH.RemotePath = o.Binary
	}
	if o.Runs <= 0 {
		o.Runs = 3 // a median that one slow run does not move
	}
	if len(o.DstDirs) == 0 {
		o.DstDirs = []string{os.TempDir()}
	}
	if len(o.Tools) == 0 {
		o.Tools = ScaleTools()
	}
	for _, t := range o.Tools {
		if !slices.Contains(ScaleTools(), t) {
			return fmt.Errorf("%w: unknown tool %q (valid: %s)", restore.ErrUsage, t, strings.Join(ScaleTools(), ", "))
		}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return nil
}

// Scale restores o.Src into a fresh destination with each of o.Tools, in
// each of o.DstDirs, o.Runs rounds (the tools interleaved, so that a slow
// spell of the machine falls on no tool alone), and returns every sample
// and the rows made from them. Each run's destination is checked (the
// counts and sizes of the source, which is on this host) and removed,
// neither timed. A run that fails is a sample with its Error, and the
// others go on; Scale's error is for what stops it: bad options, a source
// that is not a directory on this host, cancellation.
func Scale(ctx context.Context, o ScaleOptions) (*ScaleResults, error) {
	if err := o.applyDefaults(); err != nil {
		return nil, err
	}
	loc, err := transport.ParseLocation(o.Src)
	if err != nil || !loc.Remote() {
		return nil, fmt.Errorf("%w: --src %q: want host:DIR of a tree on this host (%v)", restore.ErrUsage, o.Src, err)
	}
	ssh, err := sshArgv(o.SSH, loc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", restore.ErrUsage, err)
	}
	want, err := summarize(loc.Path)
	if err != nil {
		return nil, fmt.Errorf("--src %s on this host: %w", loc.Path, err)
	}
	if _, err := os.Stat(timeCommand); err != nil {
		return nil, fmt.Errorf("bench scale measures each process with GNU time: %w", err)
	}
	far, err := makeScaleFar(o.SSH.RemotePath)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(far.Dir)
	sc := &scaleEnv{ctx: ctx, o: &o, loc: loc, ssh: ssh, far: far, want: want}
	res := &ScaleResults{Title: o.Title, SourceFiles: int64(want.Files), SourceBytes: want.Bytes,
		Tools: o.Tools, Dsts: o.DstDirs}
	for _, d := range o.DstDirs {
		res.DstKind = append(res.DstKind, fsKind(d))
	}
	if o.ServerPID == 0 {
		res.Notes = append(res.Notes, "far-side CPU with sshd not measured: no --server-pid")
	}
	for round := 1; round <= o.Runs; round++ {
		for _, dir := range o.DstDirs {
			for _, tool := range o.Tools {
				s := sc.runOnce(tool, dir, round)
				res.Samples = append(res.Samples, s)
				first := "-"
				if s.FirstFileSeconds >= 0 {
					first = fmt.Sprintf("%.2fs", s.FirstFileSeconds)
				}
				fmt.Fprintf(o.Log, "scale: round %d/%d %s in %s: %.2fs, first file %s, client %d MiB, far %d MiB %s%s\n",
					round, o.Runs, tool, dir, s.WallSeconds, first, s.ClientPeakRSSBytes>>20, s.FarPeakRSSBytes>>20, s.FarPeakCommand, errSuffix(s.Error))
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
		}
	}
	res.aggregate()
	return res, nil
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return ": FAILED: " + e
}

// scaleEnv is what the runs of one Scale share.
type scaleEnv struct {
	ctx  context.Context
	o    *ScaleOptions
	loc  transport.Location
	ssh  []string // the OpenSSH command line, without the host
	far  FarSetup
	want treeSummary
	id   int // numbers the local processes' time reports
}

// commands returns the local processes that restore the source into dst
// with tool, connected to each other.
func (e *scaleEnv) commands(tool, dst string) []*exec.Cmd {
	// Each local process runs under GNU time, which forks it from a
	// small process: its peak RSS is its own (a child forked by Go
	// starts with Go's peak as its ru_maxrss).
	cmd := func(name string, args ...string) *exec.Cmd {
		e.id++
		report := filepath.Join(e.far.Dir, fmt.Sprintf("client-%d.time", e.id))
		c := exec.CommandContext(e.ctx, timeCommand, append([]string{"-f", filepath.Base(name) + " " + timeFormat, "-o", report, name}, args...)...)
		c.WaitDelay = 5 * time.Second
		return c
	}
	src := e.loc
	src.Path = strings.TrimSuffix(src.Path, "/") + "/"
	switch tool {
	case ScaleToolRestoresync, ScaleToolRestoresyncNone:
		conn := e.o.SSH
		conn.RemotePath = e.far.Agent
		args := []string{"--config", "none", "restore", "--progress", "none"}
		if tool == ScaleToolRestoresyncNone {
			args = append(args, "--compress", "none")
		}
		args = append(args, connFlags(conn)...)
		return []*exec.Cmd{cmd(e.o.Binary, append(args, src.String(), dst)...)}
	case ScaleToolRsync:
		return []*exec.Cmd{cmd("rsync", "-aH", "-e", rshString(e.ssh),
			"--rsync-path", rshString([]string{e.far.Wrap, "rsync"}), src.Host+":"+src.Path, dst+"/")}
	default: // ScaleToolTar
		create := append([]string{e.far.Wrap}, scaleTarCreate(e.loc.Path)...)
		ssh := cmd(e.ssh[0], append(slices.Clone(e.ssh[1:]), e.loc.Host, remoteCommand(create...))...)
		return []*exec.Cmd{ssh, cmd("tar", "-C", dst, "-xpf", "-")}
	}
}

// scaleTarCreate is the far side's tar of ScaleToolTar: GNU tar's
// default format, as an admin types `tar -cf - | ssh | tar -xf -`, not
// bench run's --format=posix (tarCreate), whose extended header per file
// (for sub-second times) made a tree of 200,000 small files 42% more
// bytes (703 against 495 MB) and took up to 1.4× the wall time.
func scaleTarCreate(dir string) []string {
	return []string{"tar", "-C", dir, "-cf", "-", "."}
}

// runOnce times tool restoring the source into a new directory in dir.
func (e *scaleEnv) runOnce(tool, dir string, round int) ScaleSample {
	s := ScaleSample{Tool: tool, Dst: dir, Round: round, FirstFileSeconds: -1, FarTotalCPUSeconds: -1}
	dst, err := os.MkdirTemp(dir, "restoresync-scale-")
	if err != nil {
		s.Error = err.Error()
		return s
	}
	defer os.RemoveAll(dst)
	var sshdBefore float64
	if e.o.ServerPID != 0 {
		if sshdBefore, _, err = settledReapedCPU(e.ctx, e.o.ServerPID, 10*time.Second); err != nil {
			s.Error = err.Error()
			return s
		}
	}
	// Reports of an earlier run that failed midway are not this run's.
	waitWrapped(e.ctx, e.far.Dir, 10*time.Second)
	if _, err := collectTimeReports(e.far.Reports); err != nil {
		s.Error = err.Error()
		return s
	}
	watch, err := watchFirstFile(dst)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	cmds := e.commands(tool, dst)
	start := time.Now()
	runErr := runConnected(cmds)
	s.WallSeconds = time.Since(start).Seconds()
	at, seen, werr := watch.Stop()
	if seen {
		s.FirstFileSeconds = at.Sub(start).Seconds()
	}
	for _, c := range cmds {
		report := c.Args[4] // timeCommand -f FORMAT -o REPORT
		u, err := readTimeReport(report)
		os.Remove(report)
		if err != nil && runErr == nil {
			runErr = err
		}
		s.ClientCPUSeconds += u.CPUSeconds
		s.ClientPeakRSSBytes = max(s.ClientPeakRSSBytes, u.PeakRSSBytes)
	}
	if e.o.ServerPID != 0 {
		after, ok, err := settledReapedCPU(e.ctx, e.o.ServerPID, 10*time.Second)
		if err == nil && ok {
			s.FarTotalCPUSeconds = after - sshdBefore
		}
	}
	// A far-side command may outlive its sshd session (the client hung
	// up): its report comes when its wrapper ends.
	if !waitWrapped(e.ctx, e.far.Dir, 30*time.Second) && runErr == nil {
		runErr = errors.New("far-side commands still running 30s after the run")
	}
	us, err := collectTimeReports(e.far.Reports)
	if err != nil && runErr == nil {
		runErr = err
	}
	s.FarCommands = us
	for _, u := range us {
		s.FarCPUSeconds += u.CPUSeconds
		if u.PeakRSSBytes > s.FarPeakRSSBytes {
			s.FarPeakRSSBytes, s.FarPeakCommand = u.PeakRSSBytes, u.Command
		}
	}
	got, err := summarize(dst)
	s.Files = int64(got.Files)
	switch {
	case runErr != nil:
		s.Error = runErr.Error()
	case err != nil:
		s.Error = "check the destination: " + err.Error()
	case got.Files != e.want.Files || got.Bytes != e.want.Bytes || got.Dirs != e.want.Dirs:
		s.Error = fmt.Sprintf("the destination holds %s, the source %s", got, e.want)
	case werr != nil:
		s.Error = "watching for the first file: " + werr.Error()
	}
	return s
}

// runConnected starts cmds, the standard output of each piped into the
// standard input of the next through an OS pipe (nothing copied in this
// process), and waits for all of them. The error names the first command
// that failed with the end of its standard error.
func runConnected(cmds []*exec.Cmd) error {
	stderrs := make([]*bytes.Buffer, len(cmds))
	var closeAfterStart []*os.File
	for i, c := range cmds {
		stderrs[i] = &bytes.Buffer{}
		c.Stderr = stderrs[i]
		if i+1 < len(cmds) {
			r, w, err := os.Pipe()
			if err != nil {
				return err
			}
			c.Stdout, cmds[i+1].Stdin = w, r
			closeAfterStart = append(closeAfterStart, r, w)
		}
	}
	var started []*exec.Cmd
	var err error
	for _, c := range cmds {
		if err = c.Start(); err != nil {
			break
		}
		started = append(started, c)
	}
	for _, f := range closeAfterStart {
		f.Close()
	}
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for i, c := range started {
		if werr := c.Wait(); werr != nil {
			msg := strings.TrimSpace(stderrs[i].String())
			if len(msg) > 400 {
				msg = "..." + msg[len(msg)-400:]
			}
			errs = append(errs, fmt.Errorf("%s: %w: %s", filepath.Base(c.Path), werr, msg))
		}
	}
	return errors.Join(errs...)
}

// waitWrapped waits (at most wait) until no process of this host has dir,
// the far side's directory, on its command line: every far-side command
// (from the shell sshd started it with to GNU time and the command under
// it) has then ended and its report is written. It looks twice, 200ms
// apart, as a command whose session ended may not have been started yet.
// It returns false when some were still there at the deadline.
func waitWrapped(ctx context.Context, dir string, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for quiet := 0; quiet < 2; {
		if wrappedRunning(dir) {
			quiet = 0
			if time.Now().After(deadline) || ctx.Err() != nil {
				return false
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if quiet++; quiet < 2 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	return true
}

// wrappedRunning reports whether a process's command line holds dir.
func wrappedRunning(dir string) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(dir)) {
			return true
		}
	}
	return false
}

// makeScaleFar makes the far side's wrapper scripts in a new temporary
// directory (FarSetup's fields; Agent0 is exe): Wrap runs its arguments
// under GNU time, which writes the command's name, CPU time and peak RSS
// to a report in Reports when it ends; Agent runs exe under Wrap.
func makeScaleFar(exe string) (FarSetup, error) {
	dir, err := os.MkdirTemp("", "restoresync-scale-far-")
	if err != nil {
		return FarSetup{}, fmt.Errorf("far-side setup: %w", err)
	}
	s := FarSetup{Dir: dir, Wrap: filepath.Join(dir, "wrap"), Agent: filepath.Join(dir, "restoresync"),
		Agent0: exe, Reports: filepath.Join(dir, "reports")}
	wrap := fmt.Sprintf("#!/bin/sh\nexec %s -f \"${1##*/} %s\" -o %s/$$.time \"$@\"\n", timeCommand, timeFormat, shellQuote(s.Reports))
	agent := fmt.Sprintf("#!/bin/sh\nexec %s %s \"$@\"\n", shellQuote(s.Wrap), shellQuote(exe))
	err = errors.Join(os.Chmod(dir, 0o755), os.WriteFile(s.Wrap, []byte(wrap), 0o755),
		os.WriteFile(s.Agent, []byte(agent), 0o755), os.Mkdir(s.Reports, 0o700))
	if err != nil {
		os.RemoveAll(dir)
		return FarSetup{}, fmt.Errorf("far-side setup: %w", err)
	}
	return s, nil
}

// collectTimeReports reads and removes the GNU time reports in dir.
func collectTimeReports(dir string) ([]Usage, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("far-side reports: %w", err)
	}
	var us []Usage
	var errs []error
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		u, err := readTimeReport(p)
		os.Remove(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		us = append(us, u)
	}
	return us, errors.Join(errs...)
}

// readTimeReport reads a report GNU time wrote with "NAME "+timeFormat.
func readTimeReport(p string) (Usage, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return Usage{}, fmt.Errorf("time report: %w", err)
	}
	u, err := parseTimeReport(b)
	if err != nil {
		return u, fmt.Errorf("time report %s: %w", p, err)
	}
	return u, nil
}

// parseTimeReport parses GNU time's output in "NAME "+timeFormat: its last
// line, after the "Command exited with non-zero status N" (or "Command
// terminated by signal N") line that time writes first for such a command.
func parseTimeReport(b []byte) (Usage, error) {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) != 4 {
		return Usage{}, fmt.Errorf("want NAME USER SYS MAXRSS, got %q", lines[len(lines)-1])
	}
	user, err1 := strconv.ParseFloat(f[1], 64)
	sys, err2 := strconv.ParseFloat(f[2], 64)
	kib, err3 := strconv.ParseInt(f[3], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Usage{}, err
	}
	return Usage{Command: f[0], CPUSeconds: user + sys, PeakRSSBytes: kib << 10}, nil
}
