package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes, following rsync's where one fits.
const (
	exitOK       = 0
	exitUsage    = 1   // syntax or usage error
	exitFileIO   = 11  // error in file I/O (cannot open SRC or DST)
	exitProtocol = 12  // error in the protocol data stream
	exitSignal   = 20  // interrupted by SIGINT or SIGTERM
	exitPartial  = 23  // some files could not be restored
	exitTimeout  = 30  // timeout
	exitSSH      = 255 // the SSH connection failed
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// interruptedMessage is what a run ended by SIGINT or SIGTERM says:
// interruptedError, then rerunHint.
const interruptedMessage = interruptedError + "; " + rerunHint

// interruptedError is what failed in a run ended by SIGINT or SIGTERM, and
// rerunHint the advice after a run cut short (--json's error and hint).
const (
	interruptedError = "interrupted by signal"
	rerunHint        = "rerun the same command to complete the restore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { // a second signal ends the process at once
		<-ctx.Done()
		stop()
	}()
	stopProfile := startProfile()
	stopMem := startMemProfile()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stopMem()
	stopProfile()
	os.Exit(code)
}

// startProfile writes a CPU profile to $RESTORESYNC_CPUPROFILE.<pid> when
// that variable is set: a way to see where either end of a restore spends
// its time (the remote agent inherits it through sshd's SetEnv or -e).
func startProfile() (stop func()) {
	base := os.Getenv("RESTORESYNC_CPUPROFILE")
	if base == "" {
		return func() {}
	}
	f, err := os.Create(fmt.Sprintf("%s.%d", base, os.Getpid()))
	if err != nil {
		return func() {}
	}
	pprof.StartCPUProfile(f)
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// run executes the command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	initCompletion(root)
	err := root.ExecuteContext(context.WithValue(ctx, rawArgsKey{}, args))
	return endRun(ctx, root, args, err, stderr)
}

// endRun returns the exit code of the command line args that root ran and
// that ended with err, and prints err to stderr as the process ends with
// it ("restoresync: MESSAGE").
func endRun(ctx context.Context, root *cobra.Command, args []string, err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	if _, _, ferr := root.Find(args); ferr != nil {
		// The command line names no command: cobra's Find refused it
		// before anything ran, and refuses it again here.
		err = &unknownCommandError{ferr}
	}
	code := exitCode(ctx, err)
	switch code {
	case exitSignal:
		err = errors.New(interruptedMessage)
	case exitUsage:
		if errors.As(err, new(*unknownCommandError)) {
			err = fmt.Errorf("%w\nRun 'restoresync --help' for the commands.", err)
		}
	}
	if !errors.As(err, new(*exitError)) || err.Error() != "" { // an exitError without a message exits quietly
		fmt.Fprintf(stderr, "restoresync: %v\n", err)
	}
	return code
}

// exitCode maps an error to rsync's exit codes.
func exitCode(ctx context.Context, err error) int {
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, restore.ErrUsage), isFlagError(err), errors.As(err, new(*dest.SpecError)),
		errors.As(err, new(*unknownCommandError)):
		return exitUsage
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		return exitSignal
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, transport.ErrTimeout):
		return exitTimeout
	case errors.Is(err, transport.ErrConnect):
		return exitSSH
	case errors.Is(err, transfer.ErrProtocol), errors.Is(err, transport.ErrRemoteExited),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return exitProtocol
	}
	return exitFileIO
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "restoresync",
		Short: "Restore accounts and file trees over SSH, fast and safely",
		Long: `restoresync streams a file tree from a backup server straight to its final
place, in parallel over SSH, with per-stream compression, setting owner, mode
and times on each file as it lands.`,
		Example: `  restoresync ls --versions 'backup.example.com:/snapshots/daily.*/alice/public_html/wp-config.php'
  restoresync restore backup.example.com:/snapshots/daily.0/alice /home/alice
  restoresync serve --listen 0.0.0.0:2222 --root /snapshots --authorized-keys /etc/restoresync/authorized_keys
  restoresync config show --account alice`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{exitUsage, fmt.Errorf("%w\nSee '%s --help'.", err, c.CommandPath())}
	})
	root.AddCommand(newRestoreCmd(), newLsCmd(), newServeCmd(), newBenchCmd())
	addOpsCommands(root)
	return root
}

// isFlagError reports cobra's argument-count errors, which do not pass
// through the flag error func.
func isFlagError(err error) bool {
	var ue *usageError
	return errors.As(err, &ue)
}

// unknownCommandError is cobra's error for a command line whose first word
// is no command of the root (with its "Did you mean" suggestions): exit 1.
type unknownCommandError struct{ err error }

func (e *unknownCommandError) Error() string { return e.err.Error() }
func (e *unknownCommandError) Unwrap() error { return e.err }

// usageError is a wrong command line found by a command itself.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// minArgs accepts n or more arguments.
func minArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return &usageError{fmt.Sprintf("%s takes at least %d arguments, got %d\nUsage: %s", cmd.Name(), n, len(args), cmd.UseLine())}
		}
		return nil
	}
}

func usageArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return &usageError{fmt.Sprintf("%s takes %d arguments, got %d\nUsage: %s", cmd.Name(), n, len(args), cmd.UseLine())}
		}
		return nil
	}
}
