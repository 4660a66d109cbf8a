package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/restoresync/restoresync/bench"
)

// addFarFlags registers bench run's flags for the far side's measurement.
func (o *benchRunOptions) addFarFlags(f *pflag.FlagSet) {
	f.IntVar(&o.run.ServerPID, "server-pid", 0, "PID of the sshd on this host that serves --src: count the CPU time of its sessions (crypto included) as server CPU")
}

// newBenchFarCmds returns the hidden commands bench run uses on the source
// host to measure the far side: far-setup, rusage and far-collect.
func newBenchFarCmds() []*cobra.Command {
	setup := &cobra.Command{
		Use:   "far-setup",
		Short: "Make the wrapper scripts that measure the far side of bench run; print them as JSON",
		Example: `  # what bench run asks the agent on the source host for
  ssh backup restoresync bench far-setup`,
		Hidden: true,
		Args:   usageArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("far-setup: %w", err)
			}
			if exe, err = filepath.EvalSymlinks(exe); err != nil {
				return fmt.Errorf("far-setup: %w", err)
			}
			s, err := bench.MakeFarSetup(exe)
			if err != nil {
				return err
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(s)
		},
	}
	var out string
	rusage := &cobra.Command{
		Use:   "rusage --out DIR -- COMMAND [ARG...]",
		Short: "Run COMMAND and write its CPU time and peak RSS (children included) to a report in DIR",
		Example: `  # measure a tar of an account, as bench run does for its tar baselines
  restoresync bench rusage --out /tmp/restoresync-bench-far-x/reports -- tar -C /snap/alice -cf - .`,
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return &usageError{"bench rusage needs --out DIR"}
			}
			code, err := bench.RunRusage(cmd.Context(), out, args)
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "restoresync: %v\n", err)
			}
			if code != 0 {
				return &exitError{code: code, err: errors.New("")} // COMMAND said why
			}
			return nil
		},
	}
	rusage.Flags().StringVar(&out, "out", "", "directory for the report (created if missing)")
	rusage.Flags().SetInterspersed(false) // COMMAND's own flags are its
	collect := &cobra.Command{
		Use:   "far-collect DIR",
		Short: "Sum and remove the reports in DIR; print the sum as JSON",
		Example: `  # after a run: what the far side's commands used
  restoresync bench far-collect /tmp/restoresync-bench-far-x/reports`,
		Hidden: true,
		Args:   usageArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !strings.Contains(filepath.Base(filepath.Dir(args[0])), "restoresync-bench-far-") {
				return &usageError{fmt.Sprintf("far-collect: %s is not a bench far-setup report directory", args[0])}
			}
			f, err := bench.CollectRusage(args[0])
			if err != nil {
				return err
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(f)
		},
	}
	return []*cobra.Command{setup, rusage, collect}
}

// newBenchReportCmd writes saved 'bench run --format json' results again,
// in another format and as charts.
func newBenchReportCmd() *cobra.Command {
	var in, out, format string
	var charts []string
	cmd := &cobra.Command{
		Use:   "report --in RESULTS.json [--format F] [--out FILE] [--chart FILE.svg|FILE.png]...",
		Short: "Write saved 'bench run --format json' results as a table and bar charts",
		Example: `  # redraw a lab run's results as Markdown and a PNG chart
  restoresync bench report --in bench/results/2026-11-30-hosting-1gbit-0.5ms.json \
      --format markdown --chart /tmp/hosting.png`,
		Args: usageArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if in == "" {
				return &usageError{"bench report needs --in RESULTS.json"}
			}
			if !slices.Contains(bench.Formats(), format) {
				return &usageError{fmt.Sprintf("unknown --format %q (valid: %s)", format, strings.Join(bench.Formats(), ", "))}
			}
			if err := checkOutputs(out, charts); err != nil {
				return err
			}
			b, err := os.ReadFile(in)
			if err != nil {
				return err
			}
			var res bench.Results
			if err := json.Unmarshal(b, &res); err != nil {
				return fmt.Errorf("%s: %w", in, err)
			}
			if err := writeResults(cmd.OutOrStdout(), out, &res, format); err != nil {
				return err
			}
			for _, c := range charts {
				if err := writeChartFile(c, &res); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&in, "in", "", "results written by bench run --format json")
	f.StringVar(&format, "format", "table", "output format: "+strings.Join(bench.Formats(), ", "))
	f.StringVarP(&out, "out", "o", "", "write the results to this file instead of stdout")
	f.StringArrayVar(&charts, "chart", nil, "draw the median wall times into this file, .svg or .png (repeatable)")
	return cmd
}
