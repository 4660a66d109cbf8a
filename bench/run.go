package bench

import (
	"bytes"
	"context"
	"encoding/json"
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
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
)

// RunOptions configure Run. Src is required; every other zero value has the
// documented default.
type RunOptions struct {
	// Src is the tree to restore: a local DIR, [user@]host:DIR or
	// ssh://[user@]host[:port]/DIR. It is only read.
	Src string
	// Binary is the restoresync executable each row runs; "" means this
	// process's own (os.Executable).
	Binary string
	// Methods are restoresync's --method values to time; empty means raw.
	// The rsync method needs a remote Src and has one row (one stream, no
	// compression).
	Methods []string
	// Compressions are --compress values; empty means zstd. For a local
	// Src only "none" runs: nothing crosses a network.
	Compressions []string
	// Jobs are --jobs values, 0 for auto; empty means 4.
	Jobs []int
	// Baselines name the external commands to time beside restoresync
	// (see Baselines); empty means none. One whose programs are not
	// installed is skipped with a note.
	Baselines []string
	// Runs is how many times each row runs; the median counts. 0 means 3.
	Runs int
	// DeltaPercent, when above 0, adds delta rows: after each full
	// restore, a second restore into the same destination from a copy of
	// Src where that share of the files (in percent) was changed.
	DeltaPercent float64
	// Seed selects which files the delta copy changes.
	Seed int64
	// SSH are the connection options (-F, -i, --known-hosts, -e,
	// --remote-path), passed to each restore and turned into an ssh
	// command line for the baselines.
	SSH transport.SSHOptions
	// TempDir holds the destinations (each removed after its run, not
	// timed); "" means the system's temporary directory.
	TempDir string
	// Log, when not nil, gets a line per timed run.
	Log io.Writer

	// Far-side measurement.

	// ServerPID, when not 0, is the process ID of the sshd (on this host)
	// that serves Src: each row's server CPU time is then the growth of
	// that process's reaped children's CPU time over the run (every
	// connection's sshd session, crypto included, and the commands under
	// it). Nothing else may connect to that sshd during the run. 0 counts
	// only the commands run there (see FarSetup).
	ServerPID int
}

// applyDefaults fills in the documented defaults and checks the values.
func (o *RunOptions) applyDefaults() error {
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
	if len(o.Methods) == 0 {
		o.Methods = []string{string(restore.MethodRaw)} // the default method
	}
	if len(o.Compressions) == 0 {
		o.Compressions = []string{transfer.DefaultCompression.String()} // restore's default
	}
	if len(o.Jobs) == 0 {
		o.Jobs = []int{4} // the most streams restore's --jobs auto opens
	}
	if o.Runs <= 0 {
		o.Runs = 3 // the fewest that has a meaningful median
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	for _, m := range o.Methods {
		var v restore.Method
		if err := v.Set(m); err != nil {
			return fmt.Errorf("%w: --methods: %w", restore.ErrUsage, err)
		}
	}
	for _, c := range o.Compressions {
		if _, err := transfer.ParseCompression(c); err != nil {
			return fmt.Errorf("%w: --compress: %w", restore.ErrUsage, err)
		}
	}
	for _, j := range o.Jobs {
		if j < 0 || j > 256 {
			return fmt.Errorf("%w: --jobs %d: must be 0 (auto) or 1 to 256", restore.ErrUsage, j)
		}
	}
	for _, b := range o.Baselines {
		if baselines[b] == nil {
			return fmt.Errorf("%w: unknown baseline %q (valid: %s)", restore.ErrUsage, b, strings.Join(Baselines(), ", "))
		}
	}
	if o.DeltaPercent < 0 || o.DeltaPercent > 100 {
		return fmt.Errorf("%w: --delta %g%%: must be between 0%% and 100%%", restore.ErrUsage, o.DeltaPercent)
	}
	return nil
}

// env is what one Run shares among its rows.
type env struct {
	ctx    context.Context
	opts   *RunOptions
	remote bool
	src    transport.Location // Path is absolute when local
	ssh    []string           // ssh command line without the host, when remote
	tmp    string
	id     int
	far    *FarSetup // nil when the far side is not measured
	agent  string    // the restoresync binary on the source host
	// deltaRef is the changed copy's summary that remote delta results
	// are checked against; nil when the agent did not report it.
	deltaRef *treeSummary
	// all is every series that runs (the delta ones too), and started
	// when the timed runs began: the overall ETA in the log.
	all     []*series
	started time.Time
}

// farWords prefixes words (a command to run on the source host) with the
// rusage wrapper when the far side is measured.
func (e *env) farWords(words ...string) []string {
	if e.far == nil {
		return words
	}
	return append([]string{e.far.Wrap}, words...)
}

func (e *env) nextID() int { e.id++; return e.id }

// command prepares a local program, cancelled with the run.
func (e *env) command(name string, args ...string) *exec.Cmd {
	c := exec.CommandContext(e.ctx, name, args...)
	c.WaitDelay = 5 * time.Second
	return c
}

// sshCommand prepares words to run on the source host through ssh.
func (e *env) sshCommand(words ...string) *exec.Cmd {
	args := append(slices.Clone(e.ssh[1:]), e.src.Host, remoteCommand(words...))
	return e.command(e.ssh[0], args...)
}

// location returns the source host's path p as a restore argument.
func (e *env) location(p string) string {
	if !e.remote {
		return p
	}
	l := e.src
	l.Path = p
	return l.String()
}

// series collects the runs of one row.
type series struct {
	row      Row
	restore  *rsConfig // nil for a baseline
	base     *baseline
	walls    []float64
	cpus     []float64
	rsss     []int64
	farCPUs  []float64 // the wrapped commands'
	farRSSs  []int64
	sshdCPUs []float64 // the sshd's reaped children's, with RunOptions.ServerPID
	wires    []int64
	payloads []int64
	verified []string
	failed   bool
}

// rsConfig is one restoresync row's flags.
type rsConfig struct {
	method, codec string
	jobs          int
}

// Run times restoring o.Src with each combination of o.Methods,
// o.Compressions and o.Jobs, and with each of o.Baselines, o.Runs times
// each (interleaved, so that a slow spell of the machine does not fall on
// one row), and returns the medians. Each run restores into a fresh
// destination under o.TempDir (removed after, not timed) and is verified:
// entry by entry against Src when it is local (baselines without xattrs,
// ACLs and sparseness, which they do not keep), else by counts and sizes:
// full results against the first row's, delta results against the changed
// copy's counts as the agent reports them ("not verified" when it does
// not). A row that fails is reported in its Row.Error and the others go on;
// Run's error is for what stops the whole run before or while it runs: bad
// options, an unreadable Src, a source host that cannot be reached
// (wrapping transport.ErrConnect, before anything is timed), cancellation.
func Run(ctx context.Context, o RunOptions) (*Results, error) {
	if err := o.applyDefaults(); err != nil {
		return nil, err
	}
	src, err := transport.ParseLocation(o.Src)
	if err != nil {
		return nil, fmt.Errorf("%w: --src: %w", restore.ErrUsage, err)
	}
	e := &env{ctx: ctx, opts: &o, remote: src.Remote(), src: src}
	res := &Results{Source: o.Src, Remote: e.remote, Runs: o.Runs, DeltaPercent: o.DeltaPercent, Started: time.Now()}
	if e.remote {
		if e.ssh, err = sshArgv(o.SSH, src); err != nil {
			return nil, fmt.Errorf("%w: -e: %w", restore.ErrUsage, err)
		}
		if err := e.probe(); err != nil {
			return nil, err
		}
		if cleanup := e.setupFar(res); cleanup != nil {
			defer cleanup()
		}
	} else {
		if e.src.Path, err = filepath.Abs(src.Path); err != nil {
			return nil, fmt.Errorf("--src: %w", err)
		}
		if fi, err := os.Stat(e.src.Path); err != nil {
			return nil, fmt.Errorf("--src: %w", err)
		} else if !fi.IsDir() {
			return nil, fmt.Errorf("%w: --src %s is not a directory", restore.ErrUsage, e.src.Path)
		}
	}
	if e.tmp, err = os.MkdirTemp(o.TempDir, "restoresync-bench-"); err != nil {
		return nil, fmt.Errorf("bench run: %w", err)
	}
	defer os.RemoveAll(e.tmp)

	rows := e.plan(res)
	var ref *treeSummary // the first result, for remote verification
	if !e.remote {
		s, err := summarize(e.src.Path)
		if err != nil {
			return nil, err
		}
		ref = &s
		res.Files, res.PayloadBytes = s.Files, s.Bytes
		if err := warmLocal(ctx, e.src.Path); err != nil {
			return nil, fmt.Errorf("read %s: %w", e.src.Path, err)
		}
	} else {
		w := e.sshCommand("tar", "-C", e.src.Path, "-cf", "-", ".")
		w.Stdout = io.Discard
		if err := w.Run(); err != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("warming the source's cache with 'tar -cf -' over ssh failed: %v", err))
		}
	}
	deltaSrc, deltaLocal, cleanup, err := e.deltaSource(res)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if o.ServerPID != 0 {
		if _, err := reapedCPU(o.ServerPID); err != nil {
			return nil, fmt.Errorf("%w: --server-pid: %w", restore.ErrUsage, err)
		}
		res.Notes = append(res.Notes, fmt.Sprintf("server CPU: the CPU time that sshd (PID %d) reaped from its children during each run: its sessions (SSH crypto included) and every command under them; the client's CPU includes the system ssh where a baseline uses it", o.ServerPID))
	} else if e.far != nil {
		res.Notes = append(res.Notes, "server CPU: the commands run on the source host (restoresync serve, rsync --server, tar), not sshd's own crypto")
	}
	if e.far != nil {
		res.Notes = append(res.Notes, "server RSS: the sum of the peak RSS of the processes a run started on the source host (they run at the same time: one per stream); client RSS likewise for this host's processes")
	}
	if ref == nil {
		n := "remote source: each result is checked by file count, sizes, dirs and links, not entry by entry: a full result against the first row's"
		switch {
		case deltaSrc == "":
		case e.deltaRef != nil:
			n += ", a delta result against the changed copy's (as the agent counted them)"
		default:
			n += "; delta rows from a remote source are not verified: the agent on " + e.src.Host + " did not report the changed copy's counts (an older restoresync there?)"
		}
		res.Notes = append(res.Notes, n)
	}

	for _, s := range rows {
		e.all = append(e.all, s.series)
		if s.delta != nil && deltaSrc != "" {
			e.all = append(e.all, s.delta)
		}
	}
	e.started = time.Now()
	for run := range o.Runs {
		for _, s := range rows {
			if s.failed {
				continue
			}
			if err := ctx.Err(); err != nil {
				return res, err
			}
			dst := filepath.Join(e.tmp, fmt.Sprintf("dst-%d", e.nextID()))
			localSrc := ""
			if !e.remote {
				localSrc = e.src.Path
			}
			e.runOnce(s.series, PhaseFull, run, e.src.Path, localSrc, dst, &ref, res)
			if s.failed || deltaSrc == "" || s.delta == nil || s.delta.failed {
				os.RemoveAll(dst)
				continue
			}
			e.runOnce(s.delta, PhaseDelta, run, deltaSrc, deltaLocal, dst, nil, res)
			os.RemoveAll(dst)
		}
	}
	for _, s := range rows {
		res.Rows = append(res.Rows, s.finish(res))
		if s.delta != nil && deltaSrc != "" {
			res.Rows = append(res.Rows, s.delta.finish(res))
		}
	}
	res.setVsRsync()
	return res, ctx.Err()
}

// notVerified is Row.Verified for a result that could not be checked.
const notVerified = "not verified"

// probe checks, before anything is timed, that the source host answers
// and that Src is a directory there, with the system ssh (as the baselines
// and the far side's commands reach it) running `test -d DIR`, bounded by a
// 30 s ConnectTimeout unless -e gives the command. A connection failure
// (ssh's status 255) is an error wrapping transport.ErrConnect with ssh's
// last words; status 1 (no such directory) an error naming the path. When
// ssh cannot be started or the remote shell fails otherwise, probe returns
// nil and the rows say what failed.
func (e *env) probe() error {
	argv := slices.Clone(e.ssh)
	if e.opts.SSH.Rsh == "" {
		argv = slices.Insert(argv, 1, "-o", "ConnectTimeout=30")
	}
	c := e.command(argv[0], append(argv[1:], e.src.Host, remoteCommand("test", "-d", e.src.Path))...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	err := c.Run()
	if cerr := e.ctx.Err(); cerr != nil {
		return cerr
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee) && ee.ExitCode() == 255:
		why := strings.TrimSpace(stderr.String())
		if why == "" {
			why = "no message"
		}
		return fmt.Errorf("%w: --src %s: cannot reach %s (%s exited with status 255: %s); nothing was timed",
			transport.ErrConnect, e.opts.Src, e.src.Host, argv[0], why)
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return fmt.Errorf("--src %s: %s is not a directory on %s; nothing was timed", e.opts.Src, e.src.Path, e.src.Host)
	}
	return nil
}

// fullSeries is a full row with its delta row.
type fullSeries struct {
	*series
	delta *series
}

// plan lists the rows to run and notes what is skipped.
func (e *env) plan(res *Results) []*fullSeries {
	o := e.opts
	var rows []*fullSeries
	seen := map[rsConfig]bool{}
	codecs := o.Compressions
	if !e.remote && !(len(codecs) == 1 && codecs[0] == "none") {
		codecs = []string{"none"}
		res.Notes = append(res.Notes, "local source: only --compress none runs (nothing crosses a network)")
	}
	for _, m := range o.Methods {
		for _, c := range codecs {
			for _, j := range o.Jobs {
				cfg := rsConfig{method: m, codec: c, jobs: j}
				if m == string(restore.MethodRsync) {
					if !e.remote {
						res.Notes = append(res.Notes, "method rsync skipped: it needs a remote source")
						break
					}
					cfg.codec, cfg.jobs = "none", 1 // one stream, rsync's own protocol
				}
				if seen[cfg] {
					continue
				}
				seen[cfg] = true
				row := Row{Tool: ToolRestoresync, Method: cfg.method, Codec: cfg.codec, Jobs: cfg.jobs}
				rows = append(rows, newFullSeries(row, &cfg, nil))
			}
		}
	}
	for _, name := range o.Baselines {
		b := baselines[name]
		tools := b.tools(e.remote)
		if e.remote {
			tools = append(tools, e.ssh[0])
			if name == BaselineTarGzSCP && o.SSH.Rsh == "" {
				tools = append(tools, "scp")
			}
		}
		var missing []string
		for _, t := range tools {
			if _, err := exec.LookPath(t); err != nil {
				missing = append(missing, t)
			}
		}
		if len(missing) > 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("baseline %s skipped: %s not installed", name, strings.Join(missing, ", ")))
			continue
		}
		row := Row{Tool: name, Method: b.method(e.remote), Codec: b.codec, Jobs: 1}
		rows = append(rows, newFullSeries(row, nil, b))
		if !e.remote && !slices.Contains(res.Notes, baselineVerifyNote) {
			res.Notes = append(res.Notes, baselineVerifyNote)
		}
	}
	if o.DeltaPercent > 0 {
		for _, name := range o.Baselines {
			if !baselines[name].delta {
				res.Notes = append(res.Notes, fmt.Sprintf("baseline %s has no delta row: it sends every file again", name))
			}
		}
	}
	return rows
}

func newFullSeries(row Row, cfg *rsConfig, b *baseline) *fullSeries {
	s := &fullSeries{series: &series{row: row, restore: cfg, base: b}}
	s.row.Phase = PhaseFull
	if cfg != nil || b.delta {
		d := &series{row: row, restore: cfg, base: b}
		d.row.Phase = PhaseDelta
		s.delta = d
	}
	return s
}

// deltaSource makes the changed copy of the source for the delta rows,
// locally or on the source host (with the agent there), and returns its
// path as restores name it, its local path when local, and what removes it.
func (e *env) deltaSource(res *Results) (src, local string, cleanup func(), err error) {
	cleanup = func() {}
	o := e.opts
	if o.DeltaPercent <= 0 {
		return "", "", cleanup, nil
	}
	if !e.remote {
		dir := filepath.Join(e.tmp, "delta-src")
		st, err := MakeDeltaCopy(e.ctx, e.src.Path, dir, o.DeltaPercent, o.Seed)
		if err != nil {
			return "", "", cleanup, err
		}
		res.Notes = append(res.Notes, deltaNote(st))
		return dir, dir, cleanup, nil
	}
	if o.SSH.RemotePath == "none" {
		res.Notes = append(res.Notes, "no delta rows: --remote-path none, and the changed copy is made by the agent on the source host")
		return "", "", cleanup, nil
	}
	agent := o.SSH.RemotePath
	if agent == "" {
		agent = "restoresync"
	}
	m, err := runSteps(e.ctx, [][]*exec.Cmd{{e.sshCommand(agent, "bench", "delta-copy", "--percent",
		strconv.FormatFloat(o.DeltaPercent, 'g', -1, 64), "--seed", strconv.FormatInt(o.Seed, 10), e.src.Path)}})
	if err != nil {
		res.Notes = append(res.Notes, fmt.Sprintf("no delta rows: making the changed copy on %s failed: %v", e.src.Host, err))
		return "", "", cleanup, nil
	}
	var out deltaCopyOutput
	if err := json.Unmarshal(m.stdout, &out); err != nil || out.Path == "" {
		return "", "", cleanup, fmt.Errorf("bench delta-copy on %s: bad output %q: %v", e.src.Host, m.stdout, err)
	}
	e.deltaRef = out.Summary
	res.Notes = append(res.Notes, deltaNote(out.Stats))
	cleanup = func() { e.sshCommand("rm", "-rf", filepath.Dir(out.Path)).Run() }
	return out.Path, "", cleanup, nil
}

// deltaCopyOutput is what `bench delta-copy` prints on the source host.
type deltaCopyOutput struct {
	// Path is the changed copy; its parent directory is removed after.
	Path  string     `json:"path"`
	Stats DeltaStats `json:"stats"`
	// Summary counts the changed copy, for checking the delta rows'
	// results; absent from an agent older than this field.
	Summary *treeSummary `json:"summary,omitempty"`
}

// WriteDeltaCopy makes a changed copy of src in a new temporary directory
// (MakeDeltaCopy) and writes its path, stats and counts (files, hardlinks,
// dirs, symlinks, bytes) as one JSON object to w: what `bench run --delta`
// asks the source host's agent for, and checks its delta results against.
func WriteDeltaCopy(ctx context.Context, w io.Writer, src string, percent float64, seed int64) error {
	dir, err := os.MkdirTemp("", "restoresync-bench-delta-")
	if err != nil {
		return fmt.Errorf("delta copy: %w", err)
	}
	p := filepath.Join(dir, "src")
	st, err := MakeDeltaCopy(ctx, src, p, percent, seed)
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	sum, err := summarize(p)
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	return json.NewEncoder(w).Encode(deltaCopyOutput{Path: p, Stats: st, Summary: &sum})
}

func deltaNote(st DeltaStats) string {
	return fmt.Sprintf("delta: %d files changed in a copy of the source (%d appended to, %d rewritten in the middle; %.1f MiB in all)",
		st.Files, st.Appended, st.Edited, float64(st.Bytes)/(1<<20))
}

// runOnce times one run of s from src (a path on the source host;
// localSrc is the same tree when it is on this host, else "")
// into dst and verifies the result. ref, when not nil, is the summary
// remote results are checked against; the first result sets it.
func (e *env) runOnce(s *series, phase string, run int, src, localSrc, dst string, ref **treeSummary, res *Results) {
	var sshd0 float64
	if pid := e.opts.ServerPID; pid != 0 {
		sshd0, _, _ = settledReapedCPU(e.ctx, pid, 10*time.Second)
	}
	m, wire, payload, err := e.measure(s, src, dst)
	sshdCPU := -1.0
	if pid := e.opts.ServerPID; pid != 0 && err == nil {
		if v, ok, err := settledReapedCPU(e.ctx, pid, 10*time.Second); err == nil && ok {
			sshdCPU = v - sshd0
		}
	}
	var far *FarUsage
	if e.far != nil {
		f, ferr := e.collectFar()
		if ferr != nil {
			fmt.Fprintf(e.opts.Log, "collecting the far side's usage: %v\n", ferr)
		} else if f.Processes > 0 {
			far = &f
		}
	}
	if err == nil {
		var verified string
		switch {
		case localSrc != "":
			verified, err = verifyLocal(e.ctx, localSrc, dst, s.base != nil)
		case ref == nil && e.deltaRef == nil:
			verified = notVerified
		case ref == nil:
			var sum treeSummary
			if sum, err = summarize(dst); err == nil {
				verified = "ok"
				if sum != *e.deltaRef {
					verified = fmt.Sprintf("differs: %s, the changed source has %s", sum, *e.deltaRef)
				}
			}
		default:
			var sum treeSummary
			if sum, err = summarize(dst); err == nil {
				switch {
				case *ref == nil:
					*ref = &sum
					res.Files, res.PayloadBytes = sum.Files, sum.Bytes
					verified = "ok"
				case sum == **ref:
					verified = "ok"
				default:
					verified = fmt.Sprintf("differs: %s, first result had %s", sum, *ref)
				}
			}
		}
		s.verified = append(s.verified, verified)
	}
	if err != nil {
		s.failed = true
		s.row.Error = err.Error()
		fmt.Fprintf(e.opts.Log, "run %d/%d %-28s %s: FAILED: %v\n", run+1, e.opts.Runs, s.row.Label(), phase, err)
		return
	}
	if !e.remote {
		wire = 0 // nothing crossed a network
	}
	s.walls = append(s.walls, m.wall.Seconds())
	s.cpus = append(s.cpus, m.cpu.Seconds())
	s.rsss = append(s.rsss, m.peakRSS)
	if far != nil {
		s.farCPUs = append(s.farCPUs, far.CPUSeconds)
		s.farRSSs = append(s.farRSSs, far.PeakRSSBytes)
	}
	if sshdCPU >= 0 {
		s.sshdCPUs = append(s.sshdCPUs, sshdCPU)
	}
	s.wires = append(s.wires, wire)
	s.payloads = append(s.payloads, payload)
	server := "-"
	switch {
	case sshdCPU >= 0:
		server = fmt.Sprintf("%.2f", sshdCPU)
	case far != nil:
		server = fmt.Sprintf("%.2f", far.CPUSeconds)
	}
	fmt.Fprintf(e.opts.Log, "run %d/%d %-28s %6.2f s  CPU s client %.2f server %s  %s%s\n", run+1, e.opts.Runs, s.row.Label(), m.wall.Seconds(), m.cpu.Seconds(), server, s.verified[len(s.verified)-1], e.etaText())
}

// etaText is "  (bench ETA 1m20s)", the time the runs left take as
// benchETA estimates it; "" when nothing is left or nothing measured.
func (e *env) etaText() string {
	eta, ok := benchETA(e.all, e.opts.Runs, time.Since(e.started))
	if !ok || eta <= 0 {
		return ""
	}
	return "  (bench ETA " + eta.String() + ")"
}

// measure runs s once from src (a path on the source host) into dst and
// returns the measurement, wire bytes and payload bytes (0 when the tool
// does not say).
func (e *env) measure(s *series, src, dst string) (measured, int64, int64, error) {
	if s.restore != nil {
		c := s.restore
		// No configuration file (its bwlimit or hooks would skew the
		// rows) and no progress lines.
		args := []string{"--config", "none", "restore", "--json", "--progress", "none", "--method", c.method, "-j", jobsArg(c.jobs)}
		if c.method != string(restore.MethodRsync) {
			args = append(args, "--compress", c.codec)
		}
		conn := e.opts.SSH
		if e.far != nil {
			conn.RemotePath = e.far.Agent
		}
		args = append(args, connFlags(conn)...)
		args = append(args, e.location(src), dst)
		m, err := runSteps(e.ctx, [][]*exec.Cmd{{e.command(e.opts.Binary, args...)}})
		if err != nil {
			return m, 0, 0, err
		}
		var rep restore.Report
		if err := json.Unmarshal(m.stdout, &rep); err != nil {
			return m, 0, 0, fmt.Errorf("restore --json: %w", err)
		}
		return m, rep.WireBytes, rep.Bytes, nil
	}
	if err := os.Mkdir(dst, 0o700); err != nil && !os.IsExist(err) {
		return measured{}, 0, 0, fmt.Errorf("destination: %w", err)
	}
	br, err := s.base.prepare(e, src, dst)
	if err != nil {
		return measured{}, 0, 0, err
	}
	if br.cleanup != nil {
		defer br.cleanup()
	}
	m, err := runSteps(e.ctx, br.steps)
	if err != nil {
		return m, 0, 0, err
	}
	wire, payload := m.relayed, int64(0)
	if br.wire != nil {
		wire = br.wire(m)
	}
	if br.payload != nil {
		payload = br.payload(m)
	}
	return m, wire, payload, nil
}

// connFlags turns the connection options back into restore's flags.
func connFlags(o transport.SSHOptions) []string {
	var args []string
	if o.ConfigFile != "" {
		args = append(args, "-F", o.ConfigFile)
	}
	for _, id := range o.Identities {
		args = append(args, "-i", id)
	}
	for _, kh := range o.KnownHosts {
		args = append(args, "--known-hosts", kh)
	}
	if o.Rsh != "" {
		args = append(args, "-e", o.Rsh)
	}
	if o.RemotePath != "" {
		args = append(args, "--remote-path", o.RemotePath)
	}
	return args
}

// finish turns the collected runs into the row.
func (s *series) finish(res *Results) Row {
	r := s.row
	r.WallSeconds = s.walls
	r.MedianWallSeconds = median(s.walls)
	r.setSpread()
	r.ClientCPUSeconds = median(s.cpus)
	r.ClientPeakRSSBytes = median(s.rsss)
	r.ServerCommandCPUSeconds = median(s.farCPUs)
	r.ServerPeakRSSBytes = median(s.farRSSs)
	r.ServerCPUSeconds = r.ServerCommandCPUSeconds
	if len(s.sshdCPUs) > 0 {
		r.ServerCPUSeconds = median(s.sshdCPUs)
	}
	r.WireBytes = median(s.wires)
	r.PayloadBytes = res.PayloadBytes
	if r.Phase == PhaseDelta {
		// What the tool says it rewrote; 0 (MiB/s and ratio do not
		// apply) when it does not say or nothing changed.
		r.PayloadBytes = median(s.payloads)
	}
	if r.MedianWallSeconds > 0 {
		r.MiBPerSecond = float64(r.PayloadBytes) / (1 << 20) / r.MedianWallSeconds
	}
	if r.Phase == PhaseFull && r.PayloadBytes > 0 && r.ClientCPUSeconds > 0 {
		r.CPUSecondsPerGiB = (r.ClientCPUSeconds + r.ServerCPUSeconds) / (float64(r.PayloadBytes) / (1 << 30))
	}
	if r.WireBytes > 0 {
		r.CompressionRatio = float64(r.PayloadBytes) / float64(r.WireBytes)
	}
	r.Verified = "ok"
	for _, v := range s.verified {
		if v != "ok" {
			r.Verified = v
			break
		}
	}
	if len(s.verified) == 0 {
		r.Verified = "-"
	}
	return r
}

// setVsRsync fills in each row's ratio to the rsync baseline of its phase.
func (res *Results) setVsRsync() {
	ref := map[string]float64{}
	for _, r := range res.Rows {
		if r.Tool == BaselineRsync && r.Error == "" {
			ref[r.Phase] = r.MedianWallSeconds
		}
	}
	for i := range res.Rows {
		r := &res.Rows[i]
		if base := ref[r.Phase]; base > 0 && r.MedianWallSeconds > 0 {
			r.VsRsync = r.MedianWallSeconds / base
		}
	}
}

// FailedRows returns the rows, restoresync's and the baselines', that
// failed or whose result did not verify: the benchmark then measured
// something other than a correct restore. Rows that could not be checked
// (notVerified, "skipped") are not counted. The rows are copies, in table
// order; nil when none failed.
func (res *Results) FailedRows() []Row {
	var failed []Row
	for _, r := range res.Rows {
		if r.Error != "" || r.Verified != "ok" && r.Verified != notVerified && r.Verified != "skipped" {
			failed = append(failed, r)
		}
	}
	return failed
}

// setupFar makes the far side's wrapper scripts on the source host through
// the agent (`bench far-setup`), and returns what removes them, or nil
// when the far side is not measured (no agent there: a note says so).
func (e *env) setupFar(res *Results) func() {
	e.agent = e.opts.SSH.RemotePath
	if e.agent == "none" {
		res.Notes = append(res.Notes, "server CPU and RSS not measured: --remote-path none (the agent wraps the far side's commands)")
		return nil
	}
	if e.agent == "" {
		e.agent = "restoresync"
	}
	m, err := runSteps(e.ctx, [][]*exec.Cmd{{e.sshCommand(e.agent, "bench", "far-setup")}})
	var fs FarSetup
	if err == nil {
		err = json.Unmarshal(m.stdout, &fs)
	}
	if err != nil || fs.Wrap == "" {
		res.Notes = append(res.Notes, fmt.Sprintf("server CPU and RSS not measured: 'bench far-setup' on %s failed: %v", e.src.Host, err))
		return nil
	}
	e.far = &fs
	return func() { e.sshCommand("rm", "-rf", fs.Dir).Run() }
}

// collectFar collects and removes the far side's usage reports of the run
// that just ended (not timed).
func (e *env) collectFar() (FarUsage, error) {
	var f FarUsage
	m, err := runSteps(e.ctx, [][]*exec.Cmd{{e.sshCommand(e.agent, "bench", "far-collect", e.far.Reports)}})
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(m.stdout, &f); err != nil {
		return f, fmt.Errorf("bench far-collect: %w: %q", err, m.stdout)
	}
	return f, nil
}

// jobsArg is restore's -j for a row's jobs: 0 is auto.
func jobsArg(j int) string {
	if j == 0 {
		return "auto"
	}
	return strconv.Itoa(j)
}
