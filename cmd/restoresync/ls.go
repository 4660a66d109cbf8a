package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/treewalk"
)

// lsOptions are the ls command's flags. The connection, timeout and
// filter flags are restore's, kept in a restoreOptions.
type lsOptions struct {
	ro        *restoreOptions
	recursive bool
	directory bool
	json      bool
	versions  bool
}

func newLsCmd() *cobra.Command {
	o := &lsOptions{ro: newRestoreOptions()}
	cmd := &cobra.Command{
		Use:   "ls [flags] PATH...",
		Short: "List PATHs on the backup server (or local ones) without restoring them",
		Long: `List each PATH as 'rsync --list-only' does: a directory with a trailing
slash as "." and its entries, any other path as the entry itself (-R: and
everything below). One line an entry: type and mode, owner and group (the
backup server's names, then the ids), size, mtime (local time, to the
second), name, and '-> TARGET' for a symlink; with several PATHs (or a
pattern's matches), each listing under a "PATH:" heading. Names with control
characters or invalid UTF-8 print those bytes as \#OOO (octal), as rsync
does; --json prints them exactly.

PATH is PATH, [user@]host:PATH or ssh://[user@]host[:port]/PATH, all on one
host, reached as restore reaches SRC: the agent, a 'serve --listen'
endpoint, or the remote's own find (--remote-path none, or no agent there).

--versions compares one file across snapshots: one row a PATH, newest
first, with its size, mtime and content checksum (xxh3-64), identical
contents sharing a version number, and "missing" for a PATH that lacks it.`,
		Example: `  # what is in the account's web root, in yesterday's snapshot
  restoresync ls backup:/snapshots/daily.1/home/alice/public_html/
  # everything below, PHP files only, one JSON object a line
  restoresync ls -R --json --include='*/' --include='*.php' --exclude='*' backup:/snapshots/daily.1/home/alice/
  # which snapshot holds the version to restore
  restoresync ls --versions backup:/snapshots/daily.{0,1,2}/home/alice/public_html/wp-config.php`,
		Args: minArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLs(cmd.Context(), cmd, o, args)
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.BoolVarP(&o.recursive, "recursive", "R", false, "list everything below each PATH")
	f.BoolVarP(&o.directory, "directory", "d", false, "list the entry PATH names, not what it holds")
	f.BoolVar(&o.versions, "versions", false, "compare one file across the PATHs (snapshots): size, mtime and content checksum, newest first")
	f.BoolVar(&o.json, "json", false, "print one JSON object a line")
	s := &o.ro.sel
	f.Var(&ruleFlag{list: &s.rules}, "exclude", "exclude what matches PATTERN (rsync's rules; repeatable; first matching rule wins)")
	f.Var(&ruleFlag{list: &s.rules, include: true}, "include", "don't exclude what matches PATTERN (repeatable; order matters with --exclude)")
	f.Var(&ruleFlag{list: &s.rules, file: true}, "exclude-from", "read exclude patterns from FILE, one a line ('-': standard input)")
	f.Var(&ruleFlag{list: &s.rules, include: true, file: true}, "include-from", "read include patterns from FILE, one a line ('-': standard input)")
	f.BoolVar(&s.from0, "from0", false, "--include-from and --exclude-from items are separated by NUL bytes, not lines")
	addConnFlags(f, &o.ro.opts.SSH)
	f.IntVar(&o.ro.faultFlags.timeoutSec, "timeout", 0, "I/O timeout in seconds: fail (exit 30) when no data moves for this long; 0: none")
	f.IntVar(&o.ro.faultFlags.contimeoutSec, "contimeout", 30, "seconds allowed for each SSH connection's dial and handshake")
	return cmd
}

func runLs(ctx context.Context, cmd *cobra.Command, o *lsOptions, args []string) error {
	// The configuration file's settings for the flags ls has (the
	// connection and timeouts), top level only: ls takes no --account.
	o.ro.configFile = configFlag(cmd)
	if _, err := o.ro.applyConfig(cmd.Flags()); err != nil {
		return err
	}
	if err := o.ro.applySelect(cmd.InOrStdin()); err != nil {
		return err
	}
	r := o.ro.opts
	if err := o.ro.applyFaultsFlags(&r); err != nil {
		return err
	}
	if r.SSH.Rsh != "" && (len(r.SSH.Identities) > 0 || len(r.SSH.KnownHosts) > 0 || r.SSH.ConfigFile != "") {
		return &usageError{"-i, --known-hosts and -F set up the built-in SSH client; with -e, give them to the command (e.g. -e 'ssh -i KEY -o UserKnownHostsFile=FILE')"}
	}
	lo := restore.ListOptions{
		Paths:       args,
		Recursive:   o.recursive && !o.versions,
		Directory:   o.directory || o.versions,
		Filters:     r.Filters,
		Checksums:   o.versions,
		SSH:         r.SSH,
		IdleTimeout: r.IdleTimeout,
		Version:     version,
	}
	ls, err := restore.List(ctx, lo)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	failed := 0
	for _, l := range ls {
		if l.Err != nil && !(o.versions && l.Missing) {
			failed++
			fmt.Fprintln(cmd.ErrOrStderr(), escapeName(fmt.Sprintf("restoresync: %s: %v", l.Path, l.Err)))
		}
		for _, fe := range l.Errors {
			failed++
			fmt.Fprintln(cmd.ErrOrStderr(), escapeName(fmt.Sprintf("restoresync: %s: %s: %s", l.Path, fe.Path, fe.Error)))
		}
	}
	switch {
	case o.versions:
		printVersions(out, ls, o.json)
	case o.json:
		for _, l := range ls {
			for i := range l.Entries {
				b, _ := json.Marshal(newLsJSON(l.Path, &l.Entries[i]))
				fmt.Fprintln(out, string(b))
			}
		}
	default:
		// Several PATHs (or a pattern's matches): each under a "PATH:"
		// heading, as ls does for several directories.
		for n, l := range ls {
			if l.Err != nil {
				continue
			}
			if len(ls) > 1 {
				if n > 0 {
					fmt.Fprintln(out)
				}
				fmt.Fprintf(out, "%s:\n", escapeName(l.Path))
			}
			var es []*restore.ListEntry
			for i := range l.Entries {
				es = append(es, &l.Entries[i])
			}
			printLsLines(out, es)
		}
	}
	if failed > 0 {
		return &exitError{exitPartial, fmt.Errorf("some paths could not be listed (%d %s)", failed, plural(failed, "error", "errors"))}
	}
	return nil
}

// printLsLines prints one line an entry: mode, owner, group, size
// (right-aligned), mtime, name and a symlink's target, the columns aligned
// across entries.
func printLsLines(out io.Writer, es []*restore.ListEntry) {
	var wu, wg, ws int
	for _, e := range es {
		wu = max(wu, len(ownerName(e.User, e.Uid)))
		wg = max(wg, len(ownerName(e.Group, e.Gid)))
		ws = max(ws, len(strconv.FormatInt(e.DisplaySize(), 10)))
	}
	for _, e := range es {
		name := escapeName(e.Path)
		if e.Kind == treewalk.KindSymlink {
			name += " -> " + escapeName(e.LinkTarget)
		}
		fmt.Fprintf(out, "%s %-*s %-*s %*d %s %s\n", e.ModeString(), wu, ownerName(e.User, e.Uid), wg, ownerName(e.Group, e.Gid),
			ws, e.DisplaySize(), isoTime(e.MtimeNs), name)
	}
}

// ownerName is "name(id)", or the id alone when the backup server has no
// name for it.
func ownerName(name string, id uint32) string {
	if name == "" {
		return strconv.FormatUint(uint64(id), 10)
	}
	return name + "(" + strconv.FormatUint(uint64(id), 10) + ")"
}

// isoTime is the local time of ns to the second, in ISO 8601 form.
func isoTime(ns int64) string {
	return time.Unix(0, ns).Truncate(time.Second).Format("2006-01-02T15:04:05")
}

// escapeName prints a name as rsync prints it, for this process's locale
// (dest.EscapeItemized's rules: a name cannot end the line or forge one).
func escapeName(s string) string { return dest.EscapeItemized(s, localeUTF8()) }

// lsJSON is one --json line: the entry's exact fields.
type lsJSON struct {
	// Path is the listed PATH as given; Name the entry's path relative to
	// PATH's parent (rsync --list-only's name), exact.
	Path string `json:"path"`
	Name string `json:"name"`
	// NameBase64 is Name's exact bytes, base64 (RFC 4648, padded), when
	// they are not valid UTF-8: JSON strings cannot carry them, and Name
	// then holds U+FFFD for each bad byte.
	NameBase64 string `json:"name_base64,omitempty"`
	Kind       string `json:"kind"`
	// Mode is the permission and set-id bits (07777), Perms as ls prints them.
	Mode       uint32 `json:"mode"`
	Perms      string `json:"perms"`
	Uid        uint32 `json:"uid"`
	Gid        uint32 `json:"gid"`
	User       string `json:"user,omitempty"`
	Group      string `json:"group,omitempty"`
	Size       int64  `json:"size"`
	MtimeNs    int64  `json:"mtime_ns"`
	Mtime      string `json:"mtime"`
	LinkTarget string `json:"link_target,omitempty"`
	// LinkTargetBase64 is LinkTarget's bytes when they are not UTF-8.
	LinkTargetBase64 string `json:"link_target_base64,omitempty"`
	HardlinkTo       string `json:"hardlink_to,omitempty"`
	Checksum         string `json:"xxh3,omitempty"`
	// Version numbers identical contents in --versions, newest first. A
	// PATH without the file is a line of its own: {"path":…,"missing":true}.
	Version int `json:"version,omitempty"`
}

func newLsJSON(path string, e *restore.ListEntry) lsJSON {
	return lsJSON{NameBase64: base64IfNotUTF8(e.Path), LinkTargetBase64: base64IfNotUTF8(e.LinkTarget),
		Path: path, Name: e.Path, Kind: e.Kind.String(), Mode: e.Mode, Perms: e.ModeString(),
		Uid: e.Uid, Gid: e.Gid, User: e.User, Group: e.Group, Size: e.DisplaySize(), MtimeNs: e.MtimeNs,
		Mtime: time.Unix(0, e.MtimeNs).UTC().Format(time.RFC3339Nano), LinkTarget: e.LinkTarget, HardlinkTo: e.LinkTo, Checksum: e.Checksum}
}

// base64IfNotUTF8 is s in base64 when it is not valid UTF-8, else "".
func base64IfNotUTF8(s string) string {
	if utf8.ValidString(s) {
		return ""
	}
	return base64.StdEncoding.EncodeToString([]byte(s))
}

// printVersions prints --versions' table: a row a PATH, the ones holding
// the file newest first (by mtime), then the missing ones in the order
// given; Version numbers the distinct contents in that order.
func printVersions(out io.Writer, ls []restore.Listing, asJSON bool) {
	type row struct {
		path string
		e    *restore.ListEntry
	}
	var have, missing []row
	for _, l := range ls {
		if len(l.Entries) == 0 {
			missing = append(missing, row{path: l.Path})
			continue
		}
		have = append(have, row{path: l.Path, e: &l.Entries[0]})
	}
	sort.SliceStable(have, func(i, j int) bool { return have[i].e.MtimeNs > have[j].e.MtimeNs })
	versions := map[string]int{}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	if !asJSON {
		fmt.Fprintln(tw, "VERSION\tSIZE\tMTIME\tXXH3\tPATH")
	}
	for _, r := range have {
		key := r.e.Checksum
		if key == "" {
			key = "?" + r.path // unread: a version of its own
		}
		v, ok := versions[key]
		if !ok {
			v = len(versions) + 1
			versions[key] = v
		}
		if asJSON {
			j := newLsJSON(r.path, r.e)
			j.Version = v
			b, _ := json.Marshal(j)
			fmt.Fprintln(out, string(b))
			continue
		}
		sum := r.e.Checksum
		if sum == "" {
			sum = "?"
		}
		fmt.Fprintf(tw, "%d\t%d B\t%s\t%s\t%s\n", v, r.e.DisplaySize(), isoTime(r.e.MtimeNs), sum, escapeName(r.path))
	}
	for _, r := range missing {
		if asJSON {
			b, _ := json.Marshal(struct {
				Path    string `json:"path"`
				Missing bool   `json:"missing"`
			}{r.path, true})
			fmt.Fprintln(out, string(b))
			continue
		}
		fmt.Fprintf(tw, "-\tmissing\t\t\t%s\n", escapeName(r.path))
	}
	tw.Flush()
}
