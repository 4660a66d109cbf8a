package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/restoresync/restoresync/config"
)

// configKeys are the restore flags a configuration file may set, by their
// key there (the flag's long name with '_' for '-'). Flags that name what to
// restore or where (SRC, DST, --account, --force...) are not settings.
//
// src is the SRC of a restore that names only DST (with {account} for the
// account's name: see config.AccountPlaceholder); include and exclude are
// --include and --exclude, the includes first, used when the command line
// gives no rule; ssh_config is -F (--config-file).
var configKeys = []string{
	"src", "method", "jobs", "max_jobs", "whole_file", "compress", "skip_compress", "block_size", "read_buffer", "write_buffer",
	"numeric_ids", "chown", "usermap", "groupmap", "chmod", "keep_setid",
	"include", "exclude",
	"rsh", "remote_path", "identity", "known_hosts", "ssh_config", "timeout", "contimeout", "verify",
	"no_xattrs", "no_acls", "no_sparse", "no_specials", "no_devices",
	"pre_hook", "post_hook", "bwlimit", "progress", "quiet", "verbose", "log_format",
}

// keyFlags are the config keys whose flag is not named after them.
var keyFlags = map[string]string{"ssh_config": "config-file"}

// flagName is the long name of the flag that config key sets.
func flagName(key string) string {
	if f, ok := keyFlags[key]; ok {
		return f
	}
	return strings.ReplaceAll(key, "_", "-")
}

// ruleFlagNames are the flags that give filter rules: when the command
// line gives one, the configuration's include and exclude are not used.
var ruleFlagNames = []string{"include", "exclude", "include-from", "exclude-from"}

// configFlag returns --config as cmd sees it ("" when not given).
func configFlag(cmd *cobra.Command) string {
	if fl := cmd.Flags().Lookup("config"); fl != nil {
		return fl.Value.String()
	}
	return ""
}

// addConfigFlag adds the persistent --config flag to the root command;
// commands read it with configFlag.
func addConfigFlag(root *cobra.Command) {
	root.PersistentFlags().String("config", "", "configuration file (default: "+
		"$XDG_CONFIG_HOME/restoresync/config.toml or ~/.config/..., else "+config.SystemFile+"; 'none' for none)")
}

// setting is one effective restore setting and where it came from.
type setting struct {
	key, value, source string
	// account says that the value comes from the [account.NAME] section.
	account bool
}

// applyConfig reads the configuration file and sets each restore flag that
// the command line did not set from the account's section or the global
// one. It returns every setting's effective value and source ("flag",
// FILE:LINE or "default"). A bad file or value is a usage error naming
// the file, line and key.
func (o *restoreOptions) applyConfig(f *pflag.FlagSet) ([]setting, error) {
	path, err := config.Find(o.configFile)
	if err != nil {
		return nil, &exitError{exitUsage, err}
	}
	cf, err := config.Load(path, configKeys)
	if err != nil {
		return nil, &exitError{exitUsage, err}
	}
	values := cf.Settings(o.ops.account)
	o.cfg = cf
	rulesGiven := false
	for _, n := range ruleFlagNames {
		if fl := f.Lookup(n); fl != nil && fl.Changed {
			rulesGiven = true
		}
	}
	var out []setting
	for _, key := range configKeys {
		v, inFile := values[key]
		if key == "src" {
			o.cfgSrc = ""
			if !inFile {
				out = append(out, setting{key: key, source: "default"})
				continue
			}
			if len(v.Values) != 1 {
				return nil, &exitError{exitUsage, &config.Error{File: v.File, Line: v.Line, Key: sectionKey(v, o.ops.account, cf), Msg: "must be a string"}}
			}
			o.cfgSrc = v.Values[0]
			out = append(out, setting{key, v.Values[0], v.Where(), sectionKey(v, o.ops.account, cf) != key})
			continue
		}
		fl := f.Lookup(flagName(key))
		if fl == nil {
			continue
		}
		changed := fl.Changed
		if key == "include" || key == "exclude" {
			changed = rulesGiven
		}
		switch {
		case changed:
			out = append(out, setting{key: key, value: fl.Value.String(), source: "flag"})
		case inFile:
			bad := func(msg string) error {
				return &exitError{exitUsage, &config.Error{File: v.File, Line: v.Line, Key: sectionKey(v, o.ops.account, cf), Msg: msg}}
			}
			for _, s := range v.Values {
				if err := fl.Value.Set(s); err != nil {
					return nil, bad(plainSetError(fl, s, err))
				}
			}
			if check, ok := rangeChecks[key]; ok {
				if msg := check(o); msg != "" {
					return nil, bad(msg)
				}
			}
			out = append(out, setting{key, fl.Value.String(), v.Where(), sectionKey(v, o.ops.account, cf) != key})
		default:
			out = append(out, setting{key: key, value: fl.Value.String(), source: "default"})
		}
	}
	return out, nil
}

// sectionKey names v's key with its section, "account.NAME.KEY" for an
// account's.
func sectionKey(v config.Value, account string, cf *config.File) string {
	if a, ok := cf.Accounts[account][v.Key]; ok && a.Line == v.Line && a.File == v.File {
		return "account." + account + "." + v.Key
	}
	return v.Key
}

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show the configuration the restore command would use",
		Long: `The configuration file sets defaults for the restore command's flags:
top-level keys for every restore, [account.NAME] sections for 'restore
--account NAME'. Keys are the flags' long names with '_' for '-':

  ` + strings.Join(configKeys, ", ") + `

Flags beat the account's section, which beats the top level, which beats
the built-in defaults.`,
		Example: `  restoresync config show
  restoresync config show --account alice
  restoresync --config ./restore.toml config show --account alice -j 2`,
	}
	cmd.AddCommand(newConfigShowCmd())
	return cmd
}

func newConfigShowCmd() *cobra.Command {
	o := newRestoreOptions()
	cmd := &cobra.Command{
		Use:   "show [--account NAME] [restore flags]",
		Short: "Print each effective restore setting and where it comes from",
		Long: `Print each setting the restore command would use with these flags, and where
it comes from: "default", the configuration file's FILE:LINE, or "flag".
It takes the restore command's flags, so that a command line can be checked
before it runs. It ends with the hooks that restore would run: a top-level
pre_hook or post_hook runs for every restore, with or without --account;
one in [account.NAME] runs only for that account.`,
		Example: `  restoresync config show --account alice
  restoresync config show --account alice --jobs 8 --bwlimit 20M`,
		Args: usageArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.configFile = configFlag(cmd)
			settings, err := o.applyConfig(cmd.Flags())
			if err != nil {
				return err
			}
			path, _ := config.Find(o.configFile)
			if err := printSettings(cmd.OutOrStdout(), path, o.ops.account, settings); err != nil {
				return err
			}
			return printHooks(cmd.OutOrStdout(), o.ops.account, o.opts.DryRun, settings)
		},
	}
	o.addFlags(cmd)
	return cmd
}

func printSettings(w io.Writer, path, account string, settings []setting) error {
	if path == "" {
		path = "none"
	}
	fmt.Fprintf(w, "# config file: %s\n", path)
	if account != "" {
		fmt.Fprintf(w, "# account: %s\n", account)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, s := range settings {
		fmt.Fprintf(tw, "%s\t= %s\t# %s\n", s.key, quoteValue(s.value), s.source)
	}
	return tw.Flush()
}

// printHooks says which hooks a restore with these settings runs, and
// where each comes from: a top-level hook runs for every restore, with or
// without --account (a one-file restore too), an [account.NAME] one only
// for that account, so the note after a top-level hook says so. A dry run
// runs none.
func printHooks(w io.Writer, account string, dryRun bool, settings []setting) error {
	var lines []string
	topLevel := false
	for _, s := range settings {
		if (s.key != "pre_hook" && s.key != "post_hook") || s.value == "" {
			continue
		}
		from := s.source
		switch {
		case s.source == "flag":
			from = "command line"
		case s.account:
			from = "[account." + account + "], " + s.source
		default:
			from = "top level, " + s.source
			topLevel = true
		}
		lines = append(lines, fmt.Sprintf("#   %s: %s  (%s)", strings.TrimSuffix(s.key, "_hook"), s.value, from))
	}
	switch {
	case dryRun:
		_, err := fmt.Fprintln(w, "# hooks this restore runs: none (a dry run runs no hooks)")
		return err
	case len(lines) == 0:
		_, err := fmt.Fprintln(w, "# hooks this restore runs: none")
		return err
	}
	lines = append([]string{"# hooks this restore runs:"}, lines...)
	if topLevel {
		lines = append(lines, "# a top-level hook runs for every restore, with or without --account;",
			"# put it in [account.NAME] to run it only for that account's restores")
	}
	_, err := fmt.Fprintln(w, strings.Join(lines, "\n"))
	return err
}

// quoteValue shows empty and spaced values in quotes.
func quoteValue(v string) string {
	if v == "" || strings.ContainsAny(v, " \t#\"") {
		return fmt.Sprintf("%q", v)
	}
	return v
}
