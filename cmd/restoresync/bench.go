package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/restoresync/restoresync/bench"
	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/treewalk"
)

// exitDiffer is bench compare's status when the trees differ, as diff(1).
const exitDiffer = 1

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Make reproducible test trees and check restored ones",
		Long: `Tools for benchmarks and tests: 'gen' makes a realistic tree that is the same
byte for byte for the same flags, 'compare' checks a restored tree against
its source, 'run' times restore methods against rsync and tar on a tree.`,
		Example: `  restoresync bench gen --profile hosting --scale 0.05 /tmp/alice
  restoresync bench compare /tmp/alice /home/alice
  restoresync bench run --src backup:/snapshots/daily.0/alice --format markdown`,
	}
	cmd.AddCommand(newBenchGenCmd(), newBenchCompareCmd(), newBenchRunCmd(), newBenchDeltaCopyCmd(), newBenchRelayCmd(), newBenchScaleCmd())
	cmd.AddCommand(append(newBenchFarCmds(), newBenchReportCmd())...)
	return cmd
}

// benchGenOptions are the bench gen command's flags.
type benchGenOptions struct {
	gen     bench.GenOptions
	profile benchProfile
}

func newBenchGenCmd() *cobra.Command {
	o := &benchGenOptions{profile: "hosting", gen: bench.GenOptions{Scale: 1, Seed: 1}}
	cmd := &cobra.Command{
		Use:   "gen [flags] DIR",
		Short: "Generate a deterministic test tree in DIR",
		Long: `Generate a test tree in DIR, which is created if missing and must be empty.
The same profile, scale and seed give the same names, contents, modes and
mtimes (to the nanosecond). A one-line summary goes to stderr.

Profiles:
` + bench.ProfileHelp(),
		Example: `  restoresync bench gen --profile hosting --scale 0.05 --seed 1 /tmp/alice
  sudo restoresync bench gen --owners /srv/test/alice`,
		Args: usageArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBenchGen(cmd.Context(), cmd, o, args)
		},
	}
	o.addFlags(cmd)
	return cmd
}

func (o *benchGenOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.SortFlags = false
	f.Var(&o.profile, "profile", "kind of tree: "+strings.Join(bench.Profiles(), ", "))
	f.Float64Var(&o.gen.Scale, "scale", o.gen.Scale, "multiply file counts and sizes (1 = full size, 0.02 = a quick test tree)")
	f.Int64Var(&o.gen.Seed, "seed", o.gen.Seed, "select the tree: the same seed gives the same tree")
	f.BoolVar(&o.gen.Owners, "owners", false, "as root, give parts of the tree to www-data, daemon, bin and group mail")
}

func runBenchGen(ctx context.Context, cmd *cobra.Command, o *benchGenOptions, args []string) error {
	o.gen.Profile = string(o.profile)
	start := time.Now()
	st, err := bench.Generate(ctx, args[0], o.gen)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s scale %g seed %d: %d files, %d dirs, %d symlinks, %d hardlinks, %.1f MiB in %.1fs\n",
		args[0], o.gen.Profile, o.gen.Scale, o.gen.Seed, st.Files, st.Dirs, st.Symlinks, st.Hardlinks,
		float64(st.Bytes)/(1<<20), time.Since(start).Seconds())
	return nil
}

// benchProfile is the --profile flag; a bad value lists the valid ones.
type benchProfile string

func (p *benchProfile) Set(s string) error {
	if !slices.Contains(bench.Profiles(), s) {
		return fmt.Errorf("unknown profile %q (valid: %s)", s, strings.Join(bench.Profiles(), ", "))
	}
	*p = benchProfile(s)
	return nil
}

func (p *benchProfile) String() string { return string(*p) }
func (p *benchProfile) Type() string   { return "profile" }

// benchCompareOptions are the bench compare command's flags.
type benchCompareOptions struct {
	cmp treewalk.CompareOptions
}

func newBenchCompareCmd() *cobra.Command {
	o := &benchCompareOptions{}
	cmd := &cobra.Command{
		Use:   "compare [flags] SRC DST",
		Short: "Compare two trees entry by entry; exit 1 if they differ",
		Long: `Compare DST with SRC without following symlinks: presence, kind, size,
contents (xxh3), permission bits with setuid/setgid/sticky, uid and gid,
mtimes to the nanosecond (symlinks' and directories' too), symlink targets,
hardlink groups, extended attributes and POSIX ACLs, and sparseness (holes
on both sides or neither). Each difference is printed on stdout, sorted by path;
the exit status is 0 if the trees are the same, 1 if they differ.`,
		Example: `  restoresync bench compare /snapshots/daily.0/alice /home/alice
  restoresync bench compare --ignore-owner --max-diffs 20 /tmp/src /tmp/dst`,
		Args: usageArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBenchCompare(cmd.Context(), cmd, o, args)
		},
	}
	o.addFlags(cmd)
	return cmd
}

func (o *benchCompareOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.SortFlags = false
	f.BoolVar(&o.cmp.IgnoreOwner, "ignore-owner", false, "do not compare uid and gid")
	f.BoolVar(&o.cmp.IgnoreDirTimes, "ignore-dir-times", false, "do not compare directories' mtimes")
	f.BoolVar(&o.cmp.IgnoreRootDir, "ignore-root", false, "do not compare the mode, owner and mtime of SRC and DST themselves")
	f.IntVar(&o.cmp.MaxDiffs, "max-diffs", 0, "stop after this many differences (0: no limit)")
	f.BoolVar(&o.cmp.IgnoreXattrs, "ignore-xattrs", false, "do not compare extended attributes and ACLs")
	f.BoolVar(&o.cmp.IgnoreSparse, "ignore-sparse", false, "do not compare sparseness")
}

func runBenchCompare(ctx context.Context, cmd *cobra.Command, o *benchCompareOptions, args []string) error {
	diffs, err := treewalk.Compare(ctx, args[0], args[1], o.cmp)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	for _, d := range diffs {
		fmt.Fprintln(out, d)
	}
	if len(diffs) > 0 {
		return &exitError{code: exitDiffer, err: fmt.Errorf("%s and %s differ (%s)", args[0], args[1], plural(len(diffs), "1 difference", fmt.Sprintf("%d differences", len(diffs))))}
	}
	fmt.Fprintf(out, "%s and %s are identical (%s)\n", args[0], args[1], strings.Join(compared(o.cmp), ", "))
	return nil
}

// compared lists what bench compare checked with o, for its "identical"
// line: what its --ignore-* flags left out is not claimed.
func compared(o treewalk.CompareOptions) []string {
	what := []string{"content", "kind", "mode"}
	if !o.IgnoreOwner {
		what = append(what, "owner")
	}
	mtime := "mtime"
	if o.IgnoreDirTimes {
		mtime = "mtime (not directories')"
	}
	what = append(what, mtime, "symlink targets", "hardlink groups")
	if !o.IgnoreXattrs {
		what = append(what, "xattrs", "ACLs")
	}
	if !o.IgnoreSparse {
		what = append(what, "sparseness")
	}
	return what
}

// benchRunOptions are the bench run command's flags.
type benchRunOptions struct {
	run    bench.RunOptions
	delta  string
	format string
	out    string
	charts []string // --chart, repeatable
}

func newBenchRunCmd() *cobra.Command {
	o := &benchRunOptions{format: "table"}
	o.run.Runs = 3
	cmd := &cobra.Command{
		Use:   "run --src [host:]DIR [flags]",
		Short: "Time restore methods, codecs and job counts against rsync and tar",
		Long: `Restore --src into fresh temporary destinations with every combination of
--methods, --compress and --jobs, and with each --baselines command, --runs
times each; verify every result and print the medians: wall seconds (with
the fastest and slowest run, and a note when they are more than 25% of the
median apart), MiB/s
of payload, MiB on the wire, compression ratio, CPU seconds of the client
(this host's processes, ssh and tar included) and of the server (the
commands run on the source host; with --server-pid, its sshd's sessions
too), CPU seconds per GiB of both together, the peak RSS of each side in
MiB, and the ratio to 'rsync -aH' of the same run. Notes under the table
say how to read the rest (delta rows' MiB/s and ratio among them).

Verification: entry by entry when --src is local (the baselines ignoring
xattrs, ACLs and sparseness, which they do not keep); by counts and sizes
when remote: full rows against the first row's result, delta rows against
the changed copy's counts.

SRC is only read: --delta changes a copy of it (on the source host, through
the agent, when remote). Each restoresync row runs this binary's 'restore
--json' with the connection flags given here; baselines use the system ssh
with the same -F, -i and --known-hosts (or the -e command). A source host
that cannot be reached stops the run before anything is timed (exit 255).
--out and --chart (repeatable: one file each, .svg or .png) are checked
before the first run; if --out cannot be written at the end after all, the
results go to stdout. Progress goes to stderr. When any row (restoresync's
or a baseline's) failed or did not verify, all outputs are still written
and the exit status is 23.

Baselines: rsync (rsync -aH), rsync-z (rsync -aHz --compress-choice=zstd),
tar-ssh (ssh HOST tar -cf - | tar -xpf -), targz-scp (tar -czf on the host,
scp, tar -xzf; OpenSSH 9's scp needs the host's SFTP subsystem); 'none'
for none. One whose programs are missing is skipped with a note.`,
		Example: `  restoresync bench run --src backup:/snapshots/daily.0/alice --methods raw,tar,rsync \
      --compress none,zstd --jobs 1,4,8 --baselines rsync,rsync-z,tar-ssh --chart out.svg
  restoresync bench run --src /srv/test/alice --delta 1% --format markdown --out results.md`,
		Args: usageArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBenchRun(cmd.Context(), cmd, o)
		},
	}
	o.addFlags(cmd)
	return cmd
}

func (o *benchRunOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.SortFlags = false
	r := &o.run
	f.StringVar(&r.Src, "src", "", "tree to restore: DIR, [user@]host:DIR or ssh://[user@]host[:port]/DIR (required)")
	f.StringSliceVar(&r.Methods, "methods", []string{"raw"}, "restore methods to time: "+strings.Join(restore.Methods(), ", "))
	f.StringSliceVar(&r.Compressions, "compress", []string{"zstd"}, "codecs to time: none, lz4, zstd, gzip (optionally :LEVEL)")
	f.IntSliceVarP(&r.Jobs, "jobs", "j", []int{4}, "parallel stream counts to time (0: --jobs auto)")
	f.StringSliceVar(&r.Baselines, "baselines", []string{"rsync", "rsync-z", "tar-ssh"}, "baselines to time: "+strings.Join(bench.Baselines(), ", ")+" or none")
	f.IntVar(&r.Runs, "runs", r.Runs, "runs per row; the median is reported")
	f.StringVar(&o.delta, "delta", "", "also time a second restore after changing this share of the files (e.g. 1%)")
	f.Int64Var(&r.Seed, "seed", 1, "select which files --delta changes")
	f.StringVar(&o.format, "format", o.format, "output format: "+strings.Join(bench.Formats(), ", "))
	f.StringVarP(&o.out, "out", "o", "", "write the results to this file instead of stdout")
	f.StringArrayVar(&o.charts, "chart", nil, "draw the median wall times as a bar chart into this file, .svg or .png (repeatable)")
	f.StringVar(&r.TempDir, "tmp", "", "directory for the destinations (default: the system's temporary directory)")
	f.StringVarP(&r.SSH.Rsh, "rsh", "e", "", "remote shell command for restores and baselines (e.g. 'ssh -p 2222')")
	f.StringVar(&r.SSH.RemotePath, "remote-path", "", "restoresync binary on the remote host; 'none': no agent there")
	f.StringVarP(&r.SSH.ConfigFile, "config-file", "F", "", "ssh_config file")
	f.VarP(identityFlag{&r.SSH.Identities}, "identity", "i", "private key file (repeatable)")
	f.StringArrayVar(&r.SSH.KnownHosts, "known-hosts", nil, "known_hosts file (repeatable)")
	o.addFarFlags(f)
}

func runBenchRun(ctx context.Context, cmd *cobra.Command, o *benchRunOptions) error {
	if o.run.Src == "" {
		return &usageError{"bench run needs --src DIR"}
	}
	if !slices.Contains(bench.Formats(), o.format) {
		return &usageError{fmt.Sprintf("unknown --format %q (valid: %s)", o.format, strings.Join(bench.Formats(), ", "))}
	}
	if o.delta != "" {
		p, err := bench.ParsePercent(o.delta)
		if err != nil {
			return &usageError{"--delta: " + err.Error()}
		}
		o.run.DeltaPercent = p
	}
	if slices.Equal(o.run.Baselines, []string{"none"}) {
		o.run.Baselines = nil
	}
	if err := checkOutputs(o.out, o.charts); err != nil {
		return err
	}
	o.run.Log = cmd.ErrOrStderr()
	res, err := bench.Run(ctx, o.run)
	if err != nil {
		return err
	}
	// Every output is written even when one fails; the first error wins
	// over the failed rows' status.
	err = writeResults(cmd.OutOrStdout(), o.out, res, o.format)
	for _, c := range o.charts {
		if cerr := writeChartFile(c, res); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return err
	}
	return failedRowsError(res)
}

// failedRowsError is the exit status 23 error (rsync's partial transfer:
// some of the work was not done) when rows of res failed or did not
// verify, naming how many and which; nil when every row is good.
func failedRowsError(res *bench.Results) error {
	failed := res.FailedRows()
	if len(failed) == 0 {
		return nil
	}
	labels := make([]string, len(failed))
	for i := range failed {
		labels[i] = failed[i].Label()
	}
	return &exitError{exitPartial, fmt.Errorf("%d of %d %s failed or did not verify (%s; see the verified column)",
		len(failed), len(res.Rows), plural(len(res.Rows), "row", "rows"), strings.Join(labels, ", "))}
}

func newBenchDeltaCopyCmd() *cobra.Command {
	var percent string
	var seed int64
	cmd := &cobra.Command{
		Use:     "delta-copy --percent P [--seed N] DIR",
		Short:   "Copy DIR to a new temporary directory and change P% of its files (bench run --delta on the source host)",
		Example: "  restoresync bench delta-copy --percent 1 --seed 2 /snapshots/daily.0/alice",
		Hidden:  true,
		Args:    usageArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := bench.ParsePercent(percent)
			if err != nil {
				return &usageError{"--percent: " + err.Error()}
			}
			return bench.WriteDeltaCopy(cmd.Context(), cmd.OutOrStdout(), args[0], p, seed)
		},
	}
	cmd.Flags().StringVar(&percent, "percent", "1", "share of the files to change, in percent")
	cmd.Flags().Int64Var(&seed, "seed", 1, "select which files change")
	return cmd
}

func newBenchRelayCmd() *cobra.Command {
	var o bench.RelayOptions
	cmd := &cobra.Command{
		Use:     "relay --listen ADDR --to ADDR [--delay D]",
		Short:   "Relay TCP connections, delaying each direction (the benchmark lab's link)",
		Example: "  restoresync bench relay --listen 127.0.0.1:2200 --to 127.0.0.1:22 --delay 500us",
		Hidden:  true,
		Args:    usageArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Ready = func(a net.Addr) {
				fmt.Fprintf(cmd.ErrOrStderr(), "relay: %s -> %s, %v each way\n", a, o.To, o.Delay)
			}
			return bench.Relay(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Listen, "listen", "127.0.0.1:0", "address to listen on")
	cmd.Flags().StringVar(&o.To, "to", "", "address to connect each client to")
	cmd.Flags().DurationVar(&o.Delay, "delay", 0, "delay added to each direction (one way)")
	return cmd
}
