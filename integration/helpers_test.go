package integration

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/internal/testreport"
	"github.com/restoresync/restoresync/internal/testsshd"
	"github.com/restoresync/restoresync/internal/testtree"
	"github.com/restoresync/restoresync/transfer"
)

// assertSameTree fails t unless dst equals src by 'bench compare' (exit 0)
// and by the real rsync: 'rsync -aHni --checksum --delete' would change
// nothing.
func assertSameTree(t *testing.T, src, dst string) {
	t.Helper()
	if r := runBin(t, "bench", "compare", src, dst); r.code != 0 {
		t.Errorf("bench compare: trees differ:\n%s", r)
	}
	rsyncItemize(t, []string{"-aHni", "--checksum", "--delete"}, src, dst)
}

// rsyncItemize runs the real rsync in dry-run itemize mode with flags and
// fails t if it would change anything in dst.
func rsyncItemize(t *testing.T, flags []string, src, dst string) {
	t.Helper()
	testenv.RequireTool(t, "rsync")
	args := append(append([]string(nil), flags...), src+"/", dst+"/")
	out, err := exec.CommandContext(t.Context(), "rsync", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("rsync %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if out = bytes.TrimSpace(out); len(out) > 0 {
		lines := strings.Split(string(out), "\n")
		if len(lines) > 20 {
			lines = append(lines[:20], fmt.Sprintf("... (%d lines)", len(lines)))
		}
		t.Errorf("rsync %s sees differences:\n%s", strings.Join(flags, " "), strings.Join(lines, "\n"))
	}
}

// treeStats counts a tree the way the report does.
type treeStats struct {
	files     int   // regular files, each inode once
	hardlinks int   // extra names of regular files
	dirs      int   // directories, the root not included
	symlinks  int   // symbolic links
	bytes     int64 // size of the regular files, each inode once
	largest   int64 // size of the largest regular file
}

func statTree(t *testing.T, root string) treeStats {
	t.Helper()
	var st treeStats
	seen := map[[2]uint64]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			if p != root {
				st.dirs++
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			st.symlinks++
		case fi.Mode().IsRegular():
			sys := fi.Sys().(*syscall.Stat_t)
			id := [2]uint64{sys.Dev, sys.Ino}
			if seen[id] {
				st.hardlinks++
				return nil
			}
			seen[id] = true
			st.files++
			st.bytes += fi.Size()
			st.largest = max(st.largest, fi.Size())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return st
}

// parseReport decodes the one JSON object restore --json prints.
func parseReport(t *testing.T, r result) testreport.Report {
	t.Helper()
	return testreport.Parse(t, r.stdout, r)
}

// checkFreshReport checks the report of a restore into an empty
// destination: it counts what src holds, and it crossed a network.
// A jobs of 0 is --jobs auto: 1 to 4 streams.
func checkFreshReport(t *testing.T, rep testreport.Report, src treeStats, jobs int, compression string) {
	t.Helper()
	if c, err := transfer.ParseCompression(compression); err == nil {
		compression = c.String() // "zstd" reports as "zstd:1"
	}
	jobsOK := rep.Jobs == jobs || (jobs == 0 && rep.Jobs >= 1 && rep.Jobs <= 4) // 0: --jobs auto
	if rep.Method != "raw" || rep.Compression != compression || !jobsOK {
		t.Errorf("report: method %q, compression %q, jobs %d; want raw, %q, %d", rep.Method, rep.Compression, rep.Jobs, compression, jobs)
	}
	if rep.Files != src.files || rep.Dirs != src.dirs || rep.Symlinks != src.symlinks || rep.Hardlinks != src.hardlinks {
		t.Errorf("report: %d files, %d dirs, %d symlinks, %d hardlinks; the source has %d, %d, %d, %d",
			rep.Files, rep.Dirs, rep.Symlinks, rep.Hardlinks, src.files, src.dirs, src.symlinks, src.hardlinks)
	}
	if rep.Bytes != src.bytes {
		t.Errorf("report: bytes = %d; the source's regular files (each inode once) hold %d", rep.Bytes, src.bytes)
	}
	if rep.WireBytes <= 0 {
		t.Errorf("report: wire_bytes = %d for a remote restore", rep.WireBytes)
	}
	if rep.Skipped != 0 {
		t.Errorf("report: skipped = %d into an empty destination", rep.Skipped)
	}
	if rep.Seconds <= 0 {
		t.Errorf("report: seconds = %v", rep.Seconds)
	}
	if len(rep.Errors) != 0 {
		t.Errorf("report: errors: %+v", rep.Errors)
	}
}

// isTempFile reports whether name is one of the safe writer's temporary
// files, ".restoresync-<hash>.tmp".
func isTempFile(name string) bool {
	return strings.HasPrefix(name, ".restoresync-") && strings.HasSuffix(name, ".tmp")
}

// assertNoTempFiles fails t if a temporary file is left anywhere under root.
func assertNoTempFiles(t *testing.T, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".restoresync-") {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}

// sshdArgs are the flags that make the built-in client reach srv as its
// authorized user, running this binary on the far side.
func sshdArgs(srv *testsshd.Server) []string {
	return []string{"-F", "none", "-i", srv.IdentityFile, "--known-hosts", srv.KnownHostsFile, "--remote-path", binPath}
}

// sshdURL is ssh://USER@127.0.0.1:PORT/PATH for an absolute path.
func sshdURL(srv *testsshd.Server, path string) string {
	return fmt.Sprintf("ssh://%s@%s%s", srv.User, net.JoinHostPort(srv.Host, strconv.Itoa(srv.Port)), path)
}

// listenKeys are the keys of a 'serve --listen' endpoint: its host key and
// one authorized client key.
type listenKeys struct {
	hostKeyFile    string
	hostKey        ssh.PublicKey
	identityFile   string // the client's private key
	authorizedKeys string
}

func newListenKeys(t *testing.T) listenKeys {
	t.Helper()
	dir := t.TempDir()
	k := listenKeys{
		hostKeyFile:    filepath.Join(dir, "host_ed25519"),
		identityFile:   filepath.Join(dir, "id_ed25519"),
		authorizedKeys: filepath.Join(dir, "authorized_keys"),
	}
	k.hostKey = writeEd25519(t, k.hostKeyFile)
	client := writeEd25519(t, k.identityFile)
	if err := os.WriteFile(k.authorizedKeys, ssh.MarshalAuthorizedKey(client), 0o600); err != nil {
		t.Fatal(err)
	}
	return k
}

// writeEd25519 writes a new unencrypted ed25519 key in OpenSSH format and
// returns its public half.
func writeEd25519(t *testing.T, path string) ssh.PublicKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return sshPub
}

// listenServer is a running 'restoresync serve --listen' subprocess.
type listenServer struct {
	keys       listenKeys
	port       int
	knownHosts string // "[127.0.0.1]:PORT ssh-ed25519 ..." for this port
	logFile    string // the server's stderr
	cmd        *exec.Cmd
	exited     chan struct{}
}

var listeningRE = regexp.MustCompile(`^listening on (\S+), serving (.*) read-only$`)

// startListen starts 'serve --listen 127.0.0.1:0 --root ROOT' with keys
// and the extra flags, waits for its "listening on" line and returns it;
// the server is killed when t ends.
func startListen(t *testing.T, root string, keys listenKeys, extra ...string) *listenServer {
	t.Helper()
	dir := t.TempDir()
	l := &listenServer{keys: keys, logFile: filepath.Join(dir, "serve.log"), exited: make(chan struct{})}
	logf, err := os.Create(l.logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	args := []string{"serve", "--listen", "127.0.0.1:0", "--root", root,
		"--authorized-keys", keys.authorizedKeys, "--host-key", keys.hostKeyFile}
	args = append(args, extra...)
	cmd, cancel := serverCommand(t, args...)
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start restoresync serve: %v", err)
	}
	l.cmd = cmd
	go func() {
		cmd.Wait()
		cancel()
		close(l.exited)
	}()
	t.Cleanup(func() {
		l.kill()
		if t.Failed() {
			t.Logf("serve --listen stderr:\n%s", l.log())
		}
	})

	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-lines:
		m := listeningRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("serve --listen printed %q, want \"listening on ADDR, serving %s read-only\"", line, root)
		}
		if m[2] != root {
			t.Errorf("serve --listen says it serves %q, want %q", m[2], root)
		}
		_, portStr, err := net.SplitHostPort(m[1])
		if err != nil {
			t.Fatalf("serve --listen address %q: %v", m[1], err)
		}
		l.port, _ = strconv.Atoi(portStr)
	case <-l.exited:
		t.Fatalf("serve --listen exited before listening: %v\n%s", cmd.ProcessState, l.log())
	case <-time.After(15 * time.Second):
		t.Fatalf("serve --listen did not print its address within 15 s\n%s", l.log())
	}
	l.knownHosts = filepath.Join(dir, "known_hosts")
	line := fmt.Sprintf("[127.0.0.1]:%d %s", l.port, ssh.MarshalAuthorizedKey(keys.hostKey))
	if err := os.WriteFile(l.knownHosts, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	return l
}

// args are the client flags for this endpoint.
func (l *listenServer) args() []string {
	return []string{"-F", "none", "-i", l.keys.identityFile, "--known-hosts", l.knownHosts}
}

// url is ssh://restore@127.0.0.1:PORT/PATH, PATH relative to the root.
func (l *listenServer) url(path string) string {
	return fmt.Sprintf("ssh://restore@127.0.0.1:%d/%s", l.port, strings.TrimPrefix(path, "/"))
}

// kill ends the server at once (SIGKILL, by its PID) and waits for it.
func (l *listenServer) kill() {
	l.cmd.Process.Kill()
	<-l.exited
}

func (l *listenServer) log() string {
	b, _ := os.ReadFile(l.logFile)
	return strings.TrimSpace(string(b))
}

// lchown sets the owner of p without following a symlink.
func lchown(t *testing.T, p string, uid, gid int) {
	t.Helper()
	if err := os.Lchown(p, uid, gid); err != nil {
		t.Fatal(err)
	}
}

// ownerOf returns the uid and gid of p (not following a symlink).
func ownerOf(t *testing.T, p string) (uid, gid uint32) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid
}

// walkRel calls fn for every entry under root (root itself as "."), with
// its slash-separated relative path, not following symlinks.
func walkRel(t *testing.T, root string, fn func(rel string, d fs.DirEntry)) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fn(filepath.ToSlash(rel), d)
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
}

// smallTree writes a small account-like tree and returns its path.
func smallTree(t *testing.T) string { return testtree.Small(t) }
