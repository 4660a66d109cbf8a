// Command restoresync restores web-hosting accounts and file trees from a
// backup server over SSH, in parallel streams, setting owner, mode and times
// on each file as it lands. See README.md.
//
// This is the thin command layer: one file per subcommand (restore, ls,
// serve, config, bench), the restore command's flags in flags_*.go, and nothing
// that restores: the work is done by packages restore, fleet, transport,
// transfer and bench. main owns the signals and the exit codes: the first SIGINT or
// SIGTERM cancels the command's context (exit 20, with the hint to rerun
// the same command, which completes the restore), a second one ends the
// process at once. Errors map to rsync's exit codes in main.go's exitCode
// (1 usage, 11 file I/O, 12 protocol, 20 signal, 30 timeout, 255 SSH); 23
// (some files failed) is restore.go's restoreEndError; a command that needs its own code returns an exitError (bench
// compare's 1 when the trees differ, a failed --post-hook's 26).
//
// Files: main.go — main, run, endRun, exitCode, the exit codes, the root command
// and argument checks; restore.go — the restore command, its options, its
// end error and --json report; ls.go — the ls command (its lines, --json,
// --versions' table); flags_conn.go — the connection flags restore and ls
// share (-e, --remote-path, -F, -i, --known-hosts); flags_identity.go —
// -i, which refuses a directory; account.go — --account, its owner
// composed with --usermap, --groupmap and --chown, --ignore-dst-owner;
// accounts.go — --accounts, --accounts-from, --all-accounts: each account
// runs the command line again as --account NAME (package fleet orders and
// bounds them), over shared SSH connections; config.go —
// configKeys, --config, the configuration file applied to the flags,
// 'config show'; config_check.go — range checks of settings; hooks.go —
// --pre-hook and --post-hook; logging.go — the log, warnings and
// per-file errors; progress.go — --progress bar and plain displays;
// progress_estimate.go — their rates (payload and wire), ETA (a cost per
// file and per byte fitted to the run) and "stalled Ns";
// size.go — the byte-size flag type; flags_select.go — --include,
// --exclude, --files-from, --delete and the like; flags_meta.go — what is
// preserved (--no-acls, -A, -X...); flags_faults.go — --timeout,
// --contimeout, --verify; flags_ops.go — --account, hooks, --progress,
// --log-format, --bwlimit; flags_completion.go — completion of flag
// values, unknown shells refused; ops.go — operators' commands and
// 'completion'; serve.go — the serve command (--stdio, --listen);
// bench.go — bench gen, compare, run, delta-copy and relay;
// bench_farside.go — far-side measurement commands and bench report;
// bench_output.go — bench's output files and charts; memprofile.go —
// $RESTORESYNC_MEMPROFILE heap profiles.
package main
