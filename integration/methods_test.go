package integration

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/internal/testsshd"
)

// Every method restores a tree no one here wrote, Go's own src/net (about
// 400 files; the whole of src is restored by the restore package's tests),
// over a real sshd, and the result equals the source by
// 'bench compare' and by rsync's itemized dry run: the same safe writer
// finishes every method's tree.
func TestE2EMethodsGorootSrc(t *testing.T) {
	e2e(t)
	t.Parallel()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "src", "net")
	srv := testsshd.Start(t)
	for _, method := range []string{"raw", "tar", "rsync"} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			dst := filepath.Join(t.TempDir(), "net")
			args := append([]string{"restore", "--json", "--method", method}, sshdArgs(srv)...)
			rep := parseReport(t, mustRun(t, append(args, sshdURL(srv, src), dst)...))
			if rep.Method != method || len(rep.Errors) != 0 {
				t.Errorf("report: method %q, errors %+v", rep.Method, rep.Errors)
			}
			assertSameTree(t, src, dst)
		})
	}
}
