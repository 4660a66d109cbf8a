package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/restoresync/restoresync/bench"
)

// benchScaleOptions are bench scale's flags.
type benchScaleOptions struct {
	scale  bench.ScaleOptions
	format string // markdown or json
	out    string
	json   string // --json: every sample too, beside --out
}

func newBenchScaleCmd() *cobra.Command {
	o := &benchScaleOptions{format: "markdown"}
	cmd := &cobra.Command{
		Use:   "scale --src host:DIR [flags]",
		Short: "Time restoresync, rsync -aH and tar|ssh|tar on a tree served by this host's sshd: wall, first file, peak RSS and CPU of both ends",
		Long: `Restore --src (host:DIR of a tree on this host, served by a local sshd) into
fresh destinations in each --dst with restoresync (defaults, and --compress
none), 'rsync -aH' and 'ssh HOST tar -cf - | tar -xpf -', --runs rounds, the
tools interleaved. Per run: the wall time, when the first regular file had
its final name in the destination (inotify), the peak RSS of the largest
local process, the CPU time and largest peak RSS of the commands sshd ran
(every process under GNU time, /usr/bin/time), and with --server-pid what that sshd reaped
from its children (its sessions' crypto too). Each destination is checked
(counts and sizes) and removed. Prints, per --dst, a table of medians with
min–max and the wall-time ratios to rsync and tar of the same round.
scripts/scale.sh ('make scale') starts the sshd and makes the trees.`,
		Example: `  restoresync bench scale --src lab:/tmp/small -F /tmp/lab/ssh_config --server-pid 4242 \
      --dst /dev/shm --dst /var/tmp --runs 3`,
		Args: usageArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBenchScale(cmd.Context(), cmd, o)
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	s := &o.scale
	f.StringVar(&s.Src, "src", "", "host:DIR of the tree, on this host (required)")
	f.StringArrayVar(&s.DstDirs, "dst", nil, "directory to make the destinations in (repeatable; default: the system's temporary directory)")
	f.StringSliceVar(&s.Tools, "tools", bench.ScaleTools(), "tools to time: "+strings.Join(bench.ScaleTools(), ", "))
	f.IntVar(&s.Runs, "runs", 3, "rounds; the median is reported")
	f.StringVar(&s.Title, "title", "", "heading of the results")
	f.StringVar(&o.format, "format", o.format, "output format: markdown, json (every sample too)")
	f.StringVarP(&o.out, "out", "o", "", "write the results to this file instead of stdout")
	f.StringVar(&o.json, "json", "", "also write the results with every sample as JSON to this file")
	f.StringVar(&s.Binary, "binary", "", "restoresync binary to time (default: this one)")
	f.StringVar(&s.SSH.RemotePath, "remote-path", "", "restoresync binary the far side runs (default: --binary)")
	f.StringVarP(&s.SSH.ConfigFile, "config-file", "F", "", "ssh_config file")
	f.VarP(identityFlag{&s.SSH.Identities}, "identity", "i", "private key file (repeatable)")
	f.StringArrayVar(&s.SSH.KnownHosts, "known-hosts", nil, "known_hosts file (repeatable)")
	f.IntVar(&s.ServerPID, "server-pid", 0, "PID of the sshd that serves --src: count its sessions' CPU time too")
	return cmd
}

func runBenchScale(ctx context.Context, cmd *cobra.Command, o *benchScaleOptions) error {
	if o.scale.Src == "" {
		return &usageError{"bench scale needs --src host:DIR"}
	}
	write := bench.WriteScaleMarkdown
	switch o.format {
	case "markdown":
	case "json":
		write = bench.WriteScaleJSON
	default:
		return &usageError{fmt.Sprintf("unknown --format %q (valid: markdown, json)", o.format)}
	}
	for _, p := range []string{o.out, o.json} {
		if err := checkOutputs(p, nil); err != nil {
			return err
		}
	}
	o.scale.Log = cmd.ErrOrStderr()
	res, err := bench.Scale(ctx, o.scale)
	if err != nil {
		return err
	}
	if o.json != "" {
		if err := writeFile(o.json, func(w io.Writer) error { return bench.WriteScaleJSON(w, res) }); err != nil {
			return fmt.Errorf("--json %s: %w", o.json, err)
		}
	}
	if o.out == "" {
		return write(cmd.OutOrStdout(), res)
	}
	if err := writeFile(o.out, func(w io.Writer) error { return write(w, res) }); err != nil {
		return fmt.Errorf("--out %s: %w", o.out, err)
	}
	return nil
}
