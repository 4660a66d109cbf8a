package integration

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/internal/testsshd"
)

// farUmask is the umask of the far side's agent and rsync in
// TestE2EChmodMatchesRsync: unlike either umask of the client, so that a
// --chmod resolved with it gives other modes.
const farUmask = "077"

// chmodTree is a SRC of files and directories in the modes a hosting
// account has (0644 pages, 0755 scripts, 0600 secrets, a setgid shared
// directory, a setuid tool, a sticky tmp, a 0000 file) and a symlink.
func chmodTree(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "alice")
	for _, d := range []struct {
		path string
		mode uint32
	}{
		{".", 0o750}, {"public_html", 0o755}, {"private", 0o700}, {"shared", 0o2770}, {"tmp", 0o1777},
	} {
		p := filepath.Join(src, d.path)
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		defer chmodRaw(t, p, d.mode) // after their files are in
	}
	for _, f := range []struct {
		path string
		mode uint32
	}{
		{"public_html/index.php", 0o644}, {"public_html/run.cgi", 0o755}, {"public_html/upload.bin", 0o664},
		{"private/wp-config.php", 0o600}, {"private/key", 0o400}, {"shared/tool", 0o4750},
		{"shared/notes.txt", 0o660}, {"tmp/sess_abc", 0o666}, {"locked", 0},
	} {
		p := filepath.Join(src, f.path)
		if err := os.WriteFile(p, []byte("data of "+f.path), 0o600); err != nil {
			t.Fatal(err)
		}
		chmodRaw(t, p, f.mode)
	}
	if err := os.Symlink("public_html/index.php", filepath.Join(src, "home.php")); err != nil {
		t.Fatal(err)
	}
	return src
}

// chmodRaw sets p's mode from 07777 form (set-id and sticky bits included).
func chmodRaw(t *testing.T, p string, mode uint32) {
	t.Helper()
	if err := syscall.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// treeModes maps each path under root (root itself as ".") to its type and
// 07777 mode; a symlink's mode, always 0777 on Linux, is not listed.
func treeModes(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFLNK:
			out[rel] = "symlink"
		case syscall.S_IFDIR:
			out[rel] = fmt.Sprintf("dir %04o", st.Mode&0o7777)
		default:
			out[rel] = fmt.Sprintf("file %04o", st.Mode&0o7777)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return out
}

// withUmask runs name with args under umask (octal, as sh's umask takes
// it) and fails t unless it exits 0.
func withUmask(t *testing.T, umask, name string, args ...string) {
	t.Helper()
	sh := append([]string{"-c", `umask "$0" && exec "$@"`, umask, name}, args...)
	cmd := exec.CommandContext(t.Context(), "sh", sh...)
	cmd.Env = binEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("umask %s; %s %s: %v\n%s", umask, name, strings.Join(args, " "), err, out)
	}
}

// --chmod gives every entry the mode the real rsync -a --chmod gives it
// from the same tree and with the same umasks, local, pull and push, for
// rules that name their classes, that name none ("+w", "D+w", "=rwX": the
// bits in the umask are left alone), with D and F prefixes, X and octal
// modes. As rsync resolves --chmod on the client, the umask that counts
// is the client's (002 or 022 here), whichever side receives: the far
// side's agent and rsync run with umask 077.
func TestE2EChmodMatchesRsync(t *testing.T) {
	e2e(t)
	t.Parallel()
	testenv.RequireTool(t, "rsync")
	src := chmodTree(t)
	srv := testsshd.Start(t)
	cfg := srv.Config(t)
	agent := filepath.Join(t.TempDir(), "agent.sh")
	script := fmt.Sprintf("#!/bin/sh\numask %s || exit 1\nexec %s \"$@\"\n", farUmask, binPath)
	if err := os.WriteFile(agent, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	rsyncRemote := "umask " + farUmask + " && exec rsync"
	specs := [][]string{
		{"ug-s,a+rX,D+w"}, // rsync's testsuite/chmod-option.test
		{"+w"}, {"-w"}, {"=rwX"}, {"a-x,+X"}, {"D+w,F-r"},
		{"u+rwX,go-w"}, {"Dg+s,Fo-r", "a+X"}, {"D2775,F644"}, {"Fgo-rwx,D=rx"},
	}
	for _, umask := range []string{"002", "022"} {
		for _, mode := range []string{"local", "pull", "push"} {
			for _, spec := range specs {
				t.Run(fmt.Sprintf("umask%s/%s/%s", umask, mode, strings.Join(spec, "+")), func(t *testing.T) {
					tmp := t.TempDir()
					rdst, odst := filepath.Join(tmp, "rsync"), filepath.Join(tmp, "ours")
					t.Cleanup(func() { makeOwnerWritable(rdst); makeOwnerWritable(odst) })
					rargs := []string{"-a", "-e", "ssh -F " + cfg, "--rsync-path", rsyncRemote}
					oargs := []string{"restore", "--method", "raw", "-j", "1", "-F", cfg, "--remote-path", agent}
					for _, s := range spec {
						rargs = append(rargs, "--chmod="+s)
						oargs = append(oargs, "--chmod", s)
					}
					switch mode {
					case "local":
						rargs = append(rargs, src+"/", rdst+"/")
						oargs = append(oargs, src, odst)
					case "pull":
						rargs = append(rargs, "testhost:"+src+"/", rdst+"/")
						oargs = append(oargs, "testhost:"+src, odst)
					case "push":
						rargs = append(rargs, src+"/", "testhost:"+rdst+"/")
						oargs = append(oargs, src, "testhost:"+odst)
					}
					withUmask(t, umask, "rsync", rargs...)
					withUmask(t, umask, binPath, oargs...)
					want, got := treeModes(t, rdst), treeModes(t, odst)
					for _, p := range slices.Sorted(maps.Keys(want)) {
						if got[p] != want[p] {
							t.Errorf("%s: %s; rsync: %s", p, got[p], want[p])
						}
					}
					for _, p := range slices.Sorted(maps.Keys(got)) {
						if _, ok := want[p]; !ok {
							t.Errorf("%s: %s; rsync has none", p, got[p])
						}
					}
				})
			}
		}
	}
}

// makeOwnerWritable gives the owner full access to every directory under
// root, so that t.TempDir's cleanup can remove what --chmod made
// read-only.
func makeOwnerWritable(root string) {
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
}
