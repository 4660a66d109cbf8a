package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/transfer"
)

// addValueCompletions registers, for shell completion, the values that
// the restore flags with a fixed set of values take: --method,
// --compress (the codecs; a :LEVEL may follow), --progress and
// --log-format. No file names are offered for them.
func addValueCompletions(cmd *cobra.Command) {
	for flag, values := range map[string][]string{
		"method":     restore.Methods(),
		"compress":   transfer.CompressionNames(),
		"jobs":       {"auto"},
		"progress":   {string(progressAuto), string(progressBar), string(progressPlain), string(progressNone)},
		"log-format": {string(logText), string(logJSON)},
	} {
		if err := cmd.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)); err != nil {
			panic(fmt.Sprintf("completion of --%s: %v", flag, err)) // a flag renamed without this list
		}
	}
}

// refuseUnknownShell makes 'completion SHELL' with a shell it has no
// script for (tcsh) a usage error, exit 1, naming the shells it knows;
// cobra's own command prints its help and exits 0. Without a shell it
// still prints the help.
func refuseUnknownShell(c *cobra.Command) {
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			var shells []string
			for _, sub := range cmd.Commands() {
				shells = append(shells, sub.Name())
			}
			return &usageError{fmt.Sprintf("completion: no script for shell %q (shells: %s)\nUsage: %s SHELL",
				args[0], strings.Join(shells, ", "), cmd.CommandPath())}
		}
		return nil
	}
	c.RunE = func(cmd *cobra.Command, args []string) error { return cmd.Help() }
}
