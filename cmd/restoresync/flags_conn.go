package main

import (
	"github.com/spf13/pflag"

	"github.com/restoresync/restoresync/transport"
)

// addConnFlags registers how to reach the remote side (-e, --remote-path,
// -F, -i, --known-hosts) into ssh: the restore and ls commands share them.
func addConnFlags(f *pflag.FlagSet, ssh *transport.SSHOptions) {
	f.StringVarP(&ssh.Rsh, "rsh", "e", "", "run each stream through this remote shell command (e.g. 'ssh -p 2222') instead of the built-in SSH client")
	f.StringVar(&ssh.RemotePath, "remote-path", "restoresync", "restoresync binary on the remote host (like rsync's --rsync-path); 'none': no agent there (tar and rsync methods use the remote's own tools)")
	f.StringVarP(&ssh.ConfigFile, "config-file", "F", "", "ssh_config file (default ~/.ssh/config; 'none' for no file)")
	f.VarP(identityFlag{&ssh.Identities}, "identity", "i", "private key file (repeatable)")
	f.StringArrayVar(&ssh.KnownHosts, "known-hosts", nil, "known_hosts file (repeatable; default ~/.ssh/known_hosts)")
}
