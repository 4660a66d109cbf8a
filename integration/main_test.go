package integration

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// cmdTimeout bounds every subprocess a test runs: generous, since tests run
// in parallel on small CI machines, but a hung restore still fails the test
// instead of the whole run.
const cmdTimeout = 60 * time.Second

// mainPackage is the command TestMain builds when $RESTORESYNC_BIN is not
// set.
const mainPackage = "github.com/restoresync/restoresync/cmd/restoresync"

var (
	// binPath is the absolute path of the restoresync binary under test.
	binPath string
	// sharedDir holds trees that several tests read (never write), made
	// once per process; removed by TestMain.
	sharedDir string
)

// TestMain makes the shared trees' directory and finds the binary under
// test: $RESTORESYNC_BIN when set (the Makefile sets it), else one built
// here from mainPackage.
func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if testing.Short() {
		return m.Run() // the end-to-end tests skip themselves
	}
	dir, err := os.MkdirTemp("", "restoresync-e2e-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	// sshd's session processes run as root with their own view of the
	// tree: keep the shared trees traversable whatever the umask.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	sharedDir = dir
	if bin := os.Getenv("RESTORESYNC_BIN"); bin != "" {
		if binPath, err = filepath.Abs(bin); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: RESTORESYNC_BIN: %v\n", err)
			return 1
		}
	} else {
		binPath = filepath.Join(dir, "restoresync")
		out, err := exec.Command("go", "build", "-o", binPath, mainPackage).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: go build: %v\n%s", err, out)
			return 1
		}
	}
	if _, err := os.Stat(binPath); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: restoresync binary: %v\n", err)
		return 1
	}
	return m.Run()
}

// e2e marks t as an end-to-end test: skipped with -short.
func e2e(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test (skipped with -short)")
	}
}

// result is what a finished restoresync process left.
type result struct {
	args           []string
	code           int // exit status; -1 when killed by a signal
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("restoresync %s: exit %d\nstdout: %s\nstderr: %s",
		strings.Join(r.args, " "), r.code, strings.TrimSpace(r.stdout), strings.TrimSpace(r.stderr))
}

// binEnv is the environment of the subprocesses: this one's without an
// ssh-agent, so that only the keys a test gives are ever offered.
func binEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SSH_AUTH_SOCK=") {
			env = append(env, kv)
		}
	}
	return env
}

// command prepares restoresync with args, bounded by cmdTimeout and by t.
func command(t *testing.T, args ...string) (*exec.Cmd, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	return commandContext(ctx, args...), cancel
}

// serverCommand is command for a server that lives as long as its test
// (its parallel subtests may wait their turn for longer than cmdTimeout):
// it is killed when the test ends, or by its cancel.
func serverCommand(t *testing.T, args ...string) (*exec.Cmd, context.CancelFunc) {
	ctx, cancel := context.WithCancel(t.Context())
	return commandContext(ctx, args...), cancel
}

func commandContext(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = binEnv()
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// runBin runs restoresync with args and returns its result, whatever its
// exit status; it fails t if the binary cannot run or does not end in time.
func runBin(t *testing.T, args ...string) result {
	t.Helper()
	cmd, cancel := command(t, args...)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	return finished(t, cmd, err, start, &stdout, &stderr, args)
}

// finished turns a subprocess's Wait error into a result.
func finished(t *testing.T, cmd *exec.Cmd, err error, start time.Time, stdout, stderr *bytes.Buffer, args []string) result {
	t.Helper()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
		r.code = 0
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("restoresync %s: %v", strings.Join(args, " "), err)
	}
	if d := time.Since(start); d >= cmdTimeout {
		t.Fatalf("restoresync %s: still running after %v, killed\n%s", strings.Join(args, " "), d.Round(time.Second), r)
	}
	return r
}

// mustRun runs restoresync and fails t unless it exits 0.
func mustRun(t *testing.T, args ...string) result {
	t.Helper()
	r := runBin(t, args...)
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	return r
}

// assertCleanFailure fails t unless r is a failure reported the way
// restoresync reports failures: a non-zero exit that is not a Go panic's
// (2) or a signal's, and a "restoresync: ..." message on stderr.
func assertCleanFailure(t *testing.T, r result) {
	t.Helper()
	switch {
	case r.code == 0:
		t.Errorf("want a failure, got exit 0:\n%s", r)
	case r.code == 2 || r.code < 0 || strings.Contains(r.stderr, "panic:") || strings.Contains(r.stderr, "goroutine "):
		t.Errorf("crashed instead of failing cleanly:\n%s", r)
	case !strings.Contains(r.stderr, "restoresync: "):
		t.Errorf("no error message on stderr:\n%s", r)
	}
}

// sharedTree makes a tree with 'bench gen' once per process, under
// sharedDir/NAME, for tests that only read it.
type sharedTree struct {
	name string
	args []string // bench gen flags
	once sync.Once
	path string
	err  error
}

// account is the hosting account most tests restore: ~600 files, ~18 MB,
// owners varied (www-data, daemon, bin, group mail) when running as root,
// with media files above 1 MiB (split with --block-size 1MiB), hardlinks,
// symlinks, empty files and directories.
var account = &sharedTree{name: "alice", args: []string{"--profile", "hosting", "--scale", "0.03", "--seed", "7", "--owners"}}

// get returns the tree's path, generating it the first time.
func (s *sharedTree) get(t *testing.T) string {
	t.Helper()
	s.once.Do(func() {
		p := filepath.Join(sharedDir, s.name)
		args := append(append([]string{"bench", "gen"}, s.args...), p)
		cmd, cancel := command(t, args...)
		defer cancel()
		out, err := cmd.CombinedOutput()
		if err != nil {
			s.err = fmt.Errorf("restoresync %s: %v\n%s", strings.Join(args, " "), err, out)
			return
		}
		s.path = p
	})
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.path
}
