// Package config reads restoresync's TOML configuration file: global
// defaults for the restore command's settings and [account.NAME] sections
// that override them for one account. It knows nothing of the settings'
// meanings: the caller says which keys exist and checks the values, and
// Load keeps each value's file and line so that an error or 'config show'
// can point at it.
//
// The file is the first that exists of $XDG_CONFIG_HOME/restoresync/
// config.toml (~/.config/... when XDG_CONFIG_HOME is unset) and
// /etc/restoresync/config.toml, unless the caller names one (--config).
// Precedence, lowest first: built-in defaults, the global section, the
// account's section, command-line flags (applied by the caller).
package config
