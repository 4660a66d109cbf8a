package main

import (
	"github.com/spf13/cobra"
)

// addOpsCommands adds the operators' commands and flags to the root
// command: --config and 'config show'.
func addOpsCommands(root *cobra.Command) {
	addConfigFlag(root)
	root.AddCommand(newConfigCmd())
}

// initCompletion adds cobra's 'completion' command, with examples; called
// after root.SetOut, which the command captures.
func initCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		c.Example = `  # bash, for this shell; then for every new shell
  source <(restoresync completion bash)
  restoresync completion bash > /etc/bash_completion.d/restoresync
  # zsh and fish
  restoresync completion zsh > "${fpath[1]}/_restoresync"
  restoresync completion fish > ~/.config/fish/completions/restoresync.fish`
		refuseUnknownShell(c)
		for _, sub := range c.Commands() {
			sub.Example = "  restoresync completion " + sub.Name() + " > restoresync." + sub.Name()
		}
	}
}
