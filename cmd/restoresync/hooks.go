package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/restoresync/restoresync/restore"
)

// exitPostHook is the exit status when the restore succeeded but
// --post-hook failed (rsync has no such code; 26 is unused by rsync).
const exitPostHook = 26

// Restore outcomes as RESTORE_STATUS gives them.
const (
	statusOK      = "ok"
	statusPartial = "partial"
	statusFailed  = "failed"
)

// hookEnv is what a hook is told in RESTORE_* variables.
type hookEnv struct {
	phase       string   // "pre" or "post"
	srcs        []string // every SRC, in command-line order
	dst         string
	account     string
	method      string
	compression string
	// post only
	rep        *restore.Report
	status     string
	exit       int
	reportPath string
}

func (h hookEnv) vars() []string {
	v := []string{
		"RESTORE_HOOK=" + h.phase,
		"RESTORE_SRC=" + h.srcs[0],
		"RESTORE_SRCS=" + strings.Join(h.srcs, "\n"),
		"RESTORE_SRC_COUNT=" + strconv.Itoa(len(h.srcs)),
		"RESTORE_DST=" + h.dst,
		"RESTORE_ACCOUNT=" + h.account,
		"RESTORE_METHOD=" + h.method,
		"RESTORE_COMPRESSION=" + h.compression,
	}
	if h.phase == "post" {
		v = append(v,
			"RESTORE_FILES="+strconv.Itoa(h.rep.Files),
			"RESTORE_BYTES="+strconv.FormatInt(h.rep.Bytes, 10),
			"RESTORE_SECONDS="+strconv.FormatFloat(h.rep.Seconds, 'f', 3, 64),
			"RESTORE_STATUS="+h.status,
			"RESTORE_EXIT="+strconv.Itoa(h.exit),
			"RESTORE_REPORT="+h.reportPath,
		)
	}
	return v
}

// allSrcs returns every SRC of r, as given on the command line.
func allSrcs(r restore.Options) []string {
	return append([]string{r.Src}, r.MoreSrc...)
}

// runHook runs command through /bin/sh -c with the environment plus env's
// variables, its stdin from /dev/null and its stdout and stderr to out. It
// returns the hook's exit status (128+N when killed by signal N), or an
// error when it could not be started. A cancelled ctx kills the hook.
func runHook(ctx context.Context, command string, env hookEnv, out io.Writer) (int, error) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Env = append(os.Environ(), env.vars()...)
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 0, fmt.Errorf("%s-hook %q: %w", env.phase, command, err)
}

// preHook runs --pre-hook; a failure is an exitError with the hook's status.
func (o *restoreOptions) preHook(ctx context.Context, r restore.Options, out io.Writer) error {
	if o.ops.preHook == "" {
		return nil
	}
	env := hookEnv{phase: "pre", srcs: allSrcs(r), dst: r.Dst, account: o.ops.account,
		method: r.Method.String(), compression: r.Compression.String()}
	status, err := runHook(ctx, o.ops.preHook, env, out)
	accountRunFrom(ctx).noteHook("pre", status, err)
	if ctx.Err() != nil {
		return ctx.Err() // interrupted: exit 20, whatever the hook said
	}
	if err != nil {
		return &exitError{exitFileIO, err}
	}
	if status != 0 {
		return &exitError{status, fmt.Errorf("pre-hook %q exited with status %d: nothing was restored", o.ops.preHook, status)}
	}
	return nil
}

// postHook runs --post-hook after a restore that ended with runErr (nil,
// or the error runRestore returns) and rep. It returns the error the
// restore command ends with: runErr, or, when the restore succeeded and
// the hook failed, an exitError with exitPostHook. The report, as --json
// prints it (with exit_code and error from runErr), is written to a
// temporary file for RESTORE_REPORT and removed when the hook returns.
// The hook runs even when ctx is cancelled (an interrupted restore), with
// ctx's values but not its cancellation.
func (o *restoreOptions) postHook(ctx context.Context, r restore.Options, rep *restore.Report, runErr error, out, errOut io.Writer) error {
	if o.ops.postHook == "" {
		return runErr
	}
	env := hookEnv{phase: "post", srcs: allSrcs(r), dst: r.Dst, account: o.ops.account,
		method: rep.Method, compression: rep.Compression, rep: rep, status: statusOK}
	var ee *exitError
	switch {
	case runErr == nil:
	case errors.As(runErr, &ee) && ee.code == exitPartial:
		env.status = statusPartial
		env.exit = exitPartial
	default:
		env.status = statusFailed
		env.exit = exitCode(ctx, runErr)
	}
	tmp, err := writeReportFile(newJSONReport(ctx, rep, runErr))
	if err != nil {
		fmt.Fprintf(errOut, "restoresync: post-hook: %v\n", err)
	} else {
		defer os.Remove(tmp)
		env.reportPath = tmp
	}
	status, err := runHook(context.WithoutCancel(ctx), o.ops.postHook, env, out)
	accountRunFrom(ctx).noteHook("post", status, err)
	if err == nil && status != 0 {
		err = fmt.Errorf("post-hook %q exited with status %d", o.ops.postHook, status)
	}
	switch {
	case err == nil:
		return runErr
	case runErr == nil:
		return &exitError{exitPostHook, fmt.Errorf("the restore succeeded, but %w", err)}
	}
	fmt.Fprintf(errOut, "restoresync: %v\n", err)
	return runErr
}

// writeReportFile writes jr as JSON (the --json object) to a new
// temporary file (mode 0600) and returns its name.
func writeReportFile(jr jsonReport) (string, error) {
	f, err := os.CreateTemp("", "restoresync-report-*.json")
	if err != nil {
		return "", fmt.Errorf("report file: %w", err)
	}
	err = json.NewEncoder(f).Encode(jr)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("report file %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}
