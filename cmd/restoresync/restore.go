package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/restoresync/restoresync/config"
	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
)

// restoreOptions are the restore command's flags.
type restoreOptions struct {
	opts       restore.Options
	blockSize  byteSize
	readBuf    byteSize
	writeBuf   byteSize
	faultFlags faultsFlags
	json       bool
	archive    bool

	// Operators: account, hooks, progress, logs, bandwidth (flags_ops.go),
	// and the --config file (root's persistent flag).
	ops        opsOptions
	accts      accountsOptions
	configFile string
	// cfg is the configuration file applyConfig read; cfgSrc its src
	// setting for this restore's account ("" when it has none).
	cfg    *config.File
	cfgSrc string
	// What to restore: SRCs, filters, --delete, --dry-run (flags_select.go).
	sel selectOptions
	// skipCompress is --skip-compress (unset: rsync's default list).
	skipCompress skipCompressValue
}

// newRestoreOptions returns the restore flags' defaults.
func newRestoreOptions() *restoreOptions {
	o := &restoreOptions{
		// The defaults of restore.Options and dest.WriterOptions, whose
		// comments give the measurements they were chosen from.
		blockSize: byteSize(dest.DefaultBlockSize),
		readBuf:   256 << 10,
		writeBuf:  1 << 20,
	}
	o.opts.Method = restore.MethodAuto
	o.opts.Jobs = 0 // auto
	o.opts.MaxJobs = 4
	o.opts.Compression = transfer.DefaultCompression
	return o
}

func newRestoreCmd() *cobra.Command {
	o := newRestoreOptions()
	cmd := &cobra.Command{
		Use:   "restore [flags] SRC [SRC...] DST",
		Short: "Restore SRC's contents into DST (one side may be remote)",
		Long: `Restore the contents of SRC into DST, like 'rsync -aH SRC/ DST/'. DST is created
if missing; a trailing slash on SRC makes no difference. A SRC that is a file
lands at DST/<name>. With several SRCs (all on one host), each lands at
DST/<its name>; with -R, at DST/<its path>.

--include, --exclude, --files-from, -R and --delete follow rsync's rules;
-n (--dry-run) prints what would change, in rsync's --itemize-changes
format, and writes nothing.

SRC and DST are PATH, [user@]host:PATH or ssh://[user@]host[:port]/PATH; at
most one is remote. The remote host runs restoresync (on its PATH, see
--remote-path) or is a 'restoresync serve --listen' endpoint; without it,
the default method (auto) pulls with the remote's own tar or rsync, or over
SFTP (--method sftp) when the remote allows SFTP only.

Files already in DST with the same size and mtime are skipped (rsync's
quick check), so a rerun after an interruption sends only what is missing.

A local file or - (standard input) as SRC is read as a tar archive (plain,
gzip, zstd or lz4, recognised by content) and extracted into DST with the
same checks: 'restoresync restore backup.tar.gz /home/alice'.`,
		Example: `  # pull an account from a backup server
  restoresync restore backup.example.com:/snapshots/daily.0/alice /home/alice
  # through the system OpenSSH client, with its config and a jump host
  restoresync restore -e 'ssh -J bastion' backup:/snap/alice /home/alice
  # from a 'restoresync serve --listen' endpoint, 8 streams, lz4
  restoresync restore -j 8 --compress lz4 ssh://restore@10.0.0.5:2222/alice /home/alice
  # two things of an account, each under its name in DST: /home/alice/restored/wp-config.php, /home/alice/restored/mail
  restoresync restore backup:/snap/alice/public_html/wp-config.php backup:/snap/alice/mail /home/alice/restored
  # keep the path after /./: /home/alice/public_html/wp-content/uploads
  restoresync restore -R backup:/snap/alice/./public_html/wp-content/uploads /home/alice
  # see first, then restore: PHP files only, deleting those not in the backup
  restoresync restore -n --delete --include='*/' --include='*.php' --exclude='*' backup:/snap/alice /home/alice
  # the paths listed in a file, relative to SRC
  restoresync restore --files-from=lost.txt backup:/snap/alice /home/alice
  # several accounts, each as --account NAME, the smallest first, with a summary table
  restoresync restore --accounts alice,bob,carol 'backup:/snap/home/{account}' '/home/{account}'`,
		Args: minArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRestore(cmd.Context(), cmd, o, args)
		},
	}
	o.addFlags(cmd)
	return cmd
}

func (o *restoreOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.SortFlags = false
	r := &o.opts
	f.Var(&r.Method, "method", "restore method: "+strings.Join(restore.Methods(), ", "))
	f.VarP(jobsValue{&r.Jobs}, "jobs", "j", "parallel streams (separate SSH connections); auto: start with one, open more while throughput grows, up to --max-jobs")
	f.IntVar(&r.MaxJobs, "max-jobs", r.MaxJobs, "the most streams --jobs auto opens")
	f.BoolVarP(&r.WholeFile, "whole-file", "W", false, "send changed files whole instead of as deltas against DST's copy (raw method)")
	f.Var(&r.Compression, "compress", "compression: auto (per file, adapted to the link and the CPU), or none, lz4, zstd, gzip, optionally :LEVEL, for every frame")
	f.Var(&o.skipCompress, "skip-compress", "with --compress auto, send files with these suffixes uncompressed: LIST as rsync's (gz/jpg/mp[34]; \"\" for none); default rsync's list")
	f.Var(&o.blockSize, "block-size", "files larger than this are split into blocks spread across streams")
	f.Var(&o.readBuf, "read-buffer", "the sender's read size per stream, at most 256KiB for the raw method (its wire frames)")
	f.Var(&o.writeBuf, "write-buffer", "disk write buffer per file (receiving side)")
	f.BoolVar(&r.Writer.Owner.NumericIDs, "numeric-ids", false, "keep numeric user and group ids instead of mapping by name")
	f.StringVar(&r.Writer.Owner.Chown, "chown", "", "set owner and group of every file: USER:GROUP (rsync syntax)")
	f.StringArrayVar(&r.Writer.Owner.Usermap, "usermap", nil, "map users: FROM:TO,... (rsync syntax; repeatable)")
	f.StringArrayVar(&r.Writer.Owner.Groupmap, "groupmap", nil, "map groups: FROM:TO,... (rsync syntax; repeatable)")
	f.StringArrayVar(&r.Writer.Owner.Chmod, "chmod", nil, "change permissions: [DF][ugoa][+-=][rwxXst] or octal, comma lists (rsync syntax; repeatable)")
	f.BoolVar(&r.Writer.Owner.KeepSetID, "keep-setid", false, "keep setuid/setgid bits even when ownership is remapped")
	f.BoolVar(&r.Writer.Force, "force", false, "delete a non-empty directory that is in the way of a file or symlink")
	addConnFlags(f, &r.SSH)
	o.addFaultsFlags(f)
	f.BoolVar(&o.json, "json", false, "print the report as one JSON object instead of the summary line")
	f.BoolVarP(&o.archive, "archive", "a", true, "accepted for rsync habit: restores are always archive-mode")
	o.addSelectFlags(f)
	o.addOpsFlags(f)
	o.addAccountsFlags(f)
	o.addMetaFlags(f)
	addValueCompletions(cmd)
}

func runRestore(ctx context.Context, cmd *cobra.Command, o *restoreOptions, args []string) error {
	o.configFile = configFlag(cmd)
	ar := accountRunFrom(ctx)
	if ar != nil {
		// One account of --accounts: this command line, as --account NAME
		// with its SRCs and DST, without a progress display of its own.
		o.ops.account, args = ar.name, ar.args
		o.accts = accountsOptions{}
		o.ops.progress = progressNone
	}
	if _, err := o.applyConfig(cmd.Flags()); err != nil {
		return err
	}
	if ar != nil {
		o.ops.progress = progressNone // whatever the account's section says
	}
	if o.accts.given() {
		return runAccounts(ctx, cmd, o, args)
	}
	if err := o.applySelect(cmd.InOrStdin()); err != nil {
		return err
	}
	args, err := o.srcFromConfig(cmd, args)
	if err != nil {
		return err
	}
	r := o.opts
	r.Src, r.Dst = args[0], args[len(args)-1]
	r.MoreSrc = args[1 : len(args)-1]
	r.Stdin = cmd.InOrStdin() // SRC "-": a tar archive on standard input
	r.Version = version
	if o.skipCompress.set {
		r.SkipCompress = &o.skipCompress.list
	}
	r.Writer.BlockSizeBytes = int64(o.blockSize)
	r.Writer.WriteBufferBytes = int(o.writeBuf)
	r.ReadBufferBytes = int(o.readBuf)
	if err := o.checkRanges(); err != nil {
		return err
	}
	if err := o.applyFaultsFlags(&r); err != nil {
		return err
	}
	if r.SSH.Rsh != "" && (len(r.SSH.Identities) > 0 || len(r.SSH.KnownHosts) > 0 || r.SSH.ConfigFile != "") {
		return &usageError{"-i, --known-hosts and -F set up the built-in SSH client; with -e, give them to the command (e.g. -e 'ssh -i KEY -o UserKnownHostsFile=FILE')"}
	}
	if err := o.applyAccount(&r); err != nil {
		return err
	}
	if ar != nil {
		r.SSH.Mux = ar.mux
	}
	// Check the owner and mode options before connecting anywhere.
	if _, err := dest.NewOwnerPolicy(r.Writer.Owner, dest.SystemIDs()); err != nil {
		return &exitError{exitUsage, err}
	}
	errOut := cmd.ErrOrStderr()
	log := o.logger(errOut)
	r.Logger = log
	r.Warnf = o.warnf(errOut, log)
	r.BwLimitBytes = int64(o.ops.bwlimit)
	// A dry run writes nothing, and neither do its hooks: they do not run.
	if !r.DryRun {
		if err := o.preHook(ctx, r, errOut); err != nil {
			return err
		}
	}
	var disp display
	if !o.ops.quiet {
		disp = newDisplay(o.ops.progress, errOut)
	}
	if disp != nil {
		r.Progress = disp
	}
	rep, err := restore.Run(ctx, r)
	if disp != nil {
		disp.stop(err == nil)
	}
	if ar != nil {
		ar.rep = rep
	}
	err = o.finishRestore(ctx, cmd, log, rep, err)
	if r.DryRun {
		return err
	}
	return o.postHook(ctx, r, rep, err, errOut, errOut)
}

// srcFromConfig returns args with the configuration's src setting as SRC
// when args is DST alone. A src that names {account} needs --account.
func (o *restoreOptions) srcFromConfig(cmd *cobra.Command, args []string) ([]string, error) {
	if len(args) > 1 {
		return args, nil
	}
	switch {
	case o.cfgSrc == "":
		return nil, &usageError{fmt.Sprintf("%s takes at least 2 arguments, got 1 (DST alone needs a src setting in the configuration file)\nUsage: %s", cmd.Name(), cmd.UseLine())}
	case strings.Contains(o.cfgSrc, config.AccountPlaceholder):
		return nil, &usageError{fmt.Sprintf("the configuration's src %q names %s: give --account NAME, or SRC", o.cfgSrc, config.AccountPlaceholder)}
	}
	return []string{o.cfgSrc, args[0]}, nil
}

// finishRestore prints the report or summary and returns the error the
// restore ends with.
func (o *restoreOptions) finishRestore(ctx context.Context, cmd *cobra.Command, log *slog.Logger, rep *restore.Report, err error) error {
	out := cmd.OutOrStdout()
	err = restoreEndError(ctx, rep, err)
	if ar := accountRunFrom(ctx); ar != nil {
		jr := newJSONReport(ctx, rep, err)
		ar.jr = &jr
	}
	if o.json {
		if accountRunFrom(ctx) != nil {
			return err // the report goes into the multi-account object
		}
		b, _ := json.Marshal(newJSONReport(ctx, rep, err))
		fmt.Fprintln(out, string(b))
	} else if err == nil || isPartial(err) {
		utf8 := localeUTF8()
		for _, l := range rep.Changes {
			fmt.Fprintln(out, dest.EscapeItemized(l, utf8))
		}
		o.fileErrors(cmd.ErrOrStderr(), log, rep.Errors)
		if !o.ops.quiet {
			fmt.Fprintln(out, rep.Summary())
		}
	}
	return err
}

// restoreEndError returns the error a restore that returned rep and err
// ends with, as the --json report, the post-hook and stderr say it: a
// partial restore's count of failed files, an interrupt said as such
// (not "context canceled"), and the rerun hint after a connection, protocol
// or timeout error once the restore had begun: files were placed or found
// up to date, or the remote side ended early (the rsync method counts its
// files only at the end); never for a failure a rerun cannot fix
// (notFixedByRerun), which gets what to do instead.
func restoreEndError(ctx context.Context, rep *restore.Report, err error) error {
	if err == nil {
		if len(rep.Errors) > 0 {
			return &exitError{exitPartial, fmt.Errorf("some files could not be restored (%d %s)", len(rep.Errors), plural(len(rep.Errors), "error", "errors"))}
		}
		return nil
	}
	c := exitCode(ctx, err)
	if c == exitSignal {
		return &exitError{exitSignal, &hintError{err: errors.New(interruptedError), hint: rerunHint, sep: "; "}}
	}
	if instead, ok := notFixedByRerun(err); ok {
		if instead == "" {
			return err
		}
		return &hintError{err: err, hint: instead}
	}
	placed := rep.Bytes+int64(rep.Skipped) > 0
	if errors.Is(err, transport.ErrBusy) {
		hint := "the server was at its bound of clients (serve --listen --max-sessions or --max-startups): " + rerunHint + " later"
		if placed {
			hint = "files already restored are in place; " + hint
		}
		return &hintError{err: err, hint: hint}
	}
	if (c == exitProtocol || c == exitSSH || c == exitTimeout) && (placed || errors.Is(err, transport.ErrRemoteExited)) {
		hint := rerunHint
		if placed {
			hint = "files already restored are in place; " + hint
		}
		return &hintError{err: err, hint: hint}
	}
	return err
}

// notFixedByRerun reports whether err is a failure that a rerun of the
// same command meets again, so that the rerun hint would be wrong, and
// returns what to do instead ("" when err's message says it): a server
// that allows SFTP only, a remote command that is not installed or that
// exited before it sent anything (a forced command, a restricted shell, a
// usage error found on the remote), a host key problem, an authentication
// failure. The kinds are transport's, so the choice does not depend on
// any message's words.
func notFixedByRerun(err error) (instead string, ok bool) {
	switch {
	case errors.Is(err, transport.ErrSFTPOnly):
		return "the server allows SFTP only (it answers every command with \"This service allows sftp connections only.\"): use --method sftp", true
	case errors.Is(err, transport.ErrRemoteNotFound):
		return "a rerun will not help: install the missing program on the remote host (or the restoresync agent), or choose another --method", true
	case errors.Is(err, transport.ErrRemoteRefused), errors.Is(err, transport.ErrCommandRefused):
		return "a rerun will not help: the remote command exited before it sent anything (a forced command, a restricted shell, or options the remote refused): check what this account may run there", true
	case errors.Is(err, transport.ErrHostKey), errors.Is(err, transport.ErrAuth):
		return "", true
	}
	return "", false
}

// hintError is an error with advice on what to do next, kept apart from
// what failed: stderr shows both ("ERR\n(HINT)", or ERR, sep, HINT when
// sep is set), --json has them in its "error" and "hint" fields.
type hintError struct {
	err       error
	hint, sep string
}

func (e *hintError) Error() string {
	if e.sep != "" {
		return e.err.Error() + e.sep + e.hint
	}
	return e.err.Error() + "\n(" + e.hint + ")"
}

func (e *hintError) Unwrap() error { return e.err }

// errorAndHint splits err into what failed and the hint after it ("" for
// none) when a hintError says all of err's message.
func errorAndHint(err error) (msg, hint string) {
	var he *hintError
	if errors.As(err, &he) && he.Error() == err.Error() {
		return he.err.Error(), he.hint
	}
	return err.Error(), ""
}

// jsonReport is the --json object: the report, plus how the run ended.
type jsonReport struct {
	*restore.Report
	// ExitCode is the process's exit status (0 for a complete restore).
	ExitCode int `json:"exit_code"`
	// Error is the message of a run that did not complete ("" when it did):
	// what ended it, or how many files failed.
	Error string `json:"error,omitempty"`
	// Hint is what to do next, when there is advice ("rerun the same
	// command to complete the restore"); never part of Error.
	Hint string `json:"hint,omitempty"`
}

// newJSONReport returns the report of a run that ended with err (nil for a
// complete restore) as --json prints it and as the post-hook's
// RESTORE_REPORT file holds it: exit_code and error say how the run ends
// before the post-hook's own result. Errors is never null. rep is shared,
// not copied; ctx is the run's, to tell an interrupt from other errors.
func newJSONReport(ctx context.Context, rep *restore.Report, err error) jsonReport {
	if rep.Errors == nil {
		rep.Errors = []restore.FileError{}
	}
	jr := jsonReport{Report: rep}
	if err != nil {
		jr.ExitCode = exitCode(ctx, err)
		jr.Error, jr.Hint = errorAndHint(err)
	}
	return jr
}

func isPartial(err error) bool {
	var ee *exitError
	return errors.As(err, &ee) && ee.code == exitPartial
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
