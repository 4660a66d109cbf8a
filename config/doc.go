// Package config reads restoresync's TOML configuration file: global
// defaults for the restore command's settings and [account.NAME] sections
// that override them for one account. It knows nothing of the settings'
// meanings: the caller says which keys exist and checks the values, and
// Load keeps each value's file and line so that an error or 'config show'
// can point at it.
//
// The file is the first that exists of $XDG_CONFIG_HOME/restoresync/
// config.toml (~/.config/... when XDG_CONFIG_HOME is unset) and
// /etc/restoresync/config.toml, unless the caller names one (--config;
// "none" for no file at all). Precedence, lowest first: built-in defaults,
// the global section, the account's section, command-line flags (applied
// by the caller).
//
// Guarantees: the package only reads; it never writes or creates a
// configuration file. An unknown key (its error lists the valid ones), a value of an unsupported type or a
// table other than account.NAME is an *Error naming the file, line and
// key, never silently ignored.
//
//	path, err := Find(explicit)     // --config, else user's, else system's
//	f, err := Load(path, keys)      // every value with its file and line
//	f.Settings(account)             // global, overridden by [account.NAME], {account} expanded
//	f.AccountNames()                // the [account.NAME] sections
//
// Files: config.go — SystemFile, None, Value, File, Error, Find,
// UserFile, Load, Settings, AccountPlaceholder, ExpandAccount,
// AccountNames and the key-line scan.
package config
