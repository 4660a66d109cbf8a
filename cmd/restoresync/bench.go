package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/restoresync/restoresync/bench"
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
its source.`,
	}
	cmd.AddCommand(newBenchGenCmd(), newBenchCompareCmd())
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
mtimes to the nanosecond (symlinks' and directories' too), symlink targets
and hardlink groups. Each difference is printed on stdout, sorted by path;
the exit status is 0 if the trees are the same, 1 if they differ.`,
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
	fmt.Fprintf(out, "%s and %s are identical (content, kind, mode, owner, mtime, symlink targets, hardlink groups)\n", args[0], args[1])
	return nil
}
