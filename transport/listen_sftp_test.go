package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/restoresync/restoresync/internal/testenv"
)

// startSFTPListen runs ListenAndServe with SFTPRoot root (and an echo
// Handler), and returns it with the client's identity file and a
// known_hosts file for it.
func startSFTPListen(t *testing.T, root string) (addr *net.TCPAddr, identity, knownHostsFile string) {
	t.Helper()
	dir := t.TempDir()
	hostKeyFile, hostPub := writeTestKey(t, dir, "host_key")
	identity, clientPub := writeTestKey(t, dir, "id_client")
	authorized := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authorized, ssh.MarshalAuthorizedKey(clientPub), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error, 1)
	ready := make(chan net.Addr, 1)
	go func() {
		stopped <- ListenAndServe(ctx, ListenConfig{
			Addr: "127.0.0.1:0", HostKeyFile: hostKeyFile, AuthorizedKeysFile: authorized,
			Handler: echoHandler, SFTPRoot: root,
			Ready: func(a net.Addr) { ready <- a },
		})
	}()
	select {
	case a := <-ready:
		addr = a.(*net.TCPAddr)
	case err := <-stopped:
		t.Fatalf("ListenAndServe: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("ListenAndServe after cancel: %v", err)
		}
	})
	knownHostsFile = filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(knownHostsFile, []byte(knownhosts.Line([]string{addr.String()}, hostPub)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return addr, identity, knownHostsFile
}

// sftpServedTree writes the tree the SFTP tests serve: a file, a
// directory, symlinks inside the root and out of it, a fifo; it returns
// the root, beneath a directory that holds a file the root must not
// reveal.
func sftpServedTree(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "root")
	for _, err := range []error{
		os.WriteFile(filepath.Join(base, "secret"), []byte("outside the root"), 0o644),
		os.MkdirAll(filepath.Join(root, "sub"), 0o755),
		os.WriteFile(filepath.Join(root, "sub", "file"), bytes.Repeat([]byte("backup data "), 20000), 0o640),
		os.Symlink("sub/file", filepath.Join(root, "in")),
		os.Symlink("../secret", filepath.Join(root, "out")),
		os.Symlink("/etc/passwd", filepath.Join(root, "abs")),
		syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644),
		os.Lchown(filepath.Join(root, "sub", "file"), 4242, 4343),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// serve --listen's SFTP subsystem with OpenSSH's own sftp client (batch
// mode): the root is browsable and files come out whole; symlinks out of
// the root, paths with "..", the fifo, and every write (put, mkdir, rm,
// rename, chmod, symlink) fail and change nothing.
func TestListenSFTPWithOpenSSHClient(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "sftp")
	root := sftpServedTree(t)
	addr, identity, known := startSFTPListen(t, root)
	local := t.TempDir()
	upload := filepath.Join(local, "upload")
	if err := os.WriteFile(upload, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A leading "-" lets the batch go on past a command that fails.
	batch := strings.Join([]string{
		"ls -l /",
		"get /sub/file " + filepath.Join(local, "file"),
		"get /in " + filepath.Join(local, "in"),
		"-get /out " + filepath.Join(local, "out"),
		"-get /abs " + filepath.Join(local, "abs"),
		"-get /../secret " + filepath.Join(local, "secret"),
		"-get /fifo " + filepath.Join(local, "fifo"),
		"-put " + upload + " /upload",
		"-mkdir /newdir",
		"-rm /sub/file",
		"-rename /sub /moved",
		"-chmod 777 /sub/file",
		"-symlink /etc/shadow /shadow",
	}, "\n") + "\n"
	batchFile := filepath.Join(local, "batch")
	if err := os.WriteFile(batchFile, []byte(batch), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sftp", "-b", batchFile, "-F", "/dev/null", "-i", identity, "-P", strconv.Itoa(addr.Port),
		"-o", "UserKnownHostsFile="+known, "-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
		"bob@127.0.0.1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sftp -b: %v\n%s", err, out)
	}
	for _, name := range []string{"sub", "in", "out", "abs", "fifo"} {
		if !strings.Contains(string(out), name) {
			t.Errorf("ls -l / does not list %s:\n%s", name, out)
		}
	}
	want, _ := os.ReadFile(filepath.Join(root, "sub", "file"))
	for _, name := range []string{"file", "in"} {
		if got, err := os.ReadFile(filepath.Join(local, name)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("get %s: %d bytes, %v; want the %d bytes of sub/file", name, len(got), err, len(want))
		}
	}
	for _, name := range []string{"out", "abs", "secret", "fifo"} {
		if _, err := os.Stat(filepath.Join(local, name)); err == nil {
			t.Errorf("get /%s succeeded: it leaves the root or is not a regular file", name)
		}
	}
	entries, _ := os.ReadDir(root)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "abs fifo in out sub" {
		t.Errorf("the root holds %q after the writes; want it unchanged", names)
	}
	if fi, err := os.Stat(filepath.Join(root, "sub", "file")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("sub/file after rm and chmod: %v, %v; want it there, 0640", fi, err)
	}
}

// The same endpoint through this package's SubsystemDialer and pkg/sftp's
// client: entries as lstat sees them (numeric owners, symlinks as such,
// targets as stored), contents whole, every write refused.
func TestListenSFTPWithSubsystemDialer(t *testing.T) {
	t.Parallel()
	root := sftpServedTree(t)
	addr, identity, known := startSFTPListen(t, root)
	d, err := NewSSHDialer(Location{User: "bob", Host: "127.0.0.1", Port: addr.Port}, SSHOptions{ConfigFile: "none", Identities: []string{identity}, KnownHosts: []string{known}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.(SubsystemDialer).WithSubsystem("sftp").Dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c, err := sftp.NewClientPipe(s, s)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fis, err := c.ReadDir("/")
	if err != nil || len(fis) != 5 {
		t.Fatalf("ReadDir /: %d entries, %v; want 5", len(fis), err)
	}
	fi, err := c.Lstat("/sub/file")
	if st, ok := fi.Sys().(*sftp.FileStat); err != nil || !ok || st.UID != 4242 || st.GID != 4343 {
		t.Errorf("Lstat /sub/file: %+v, %v; want uid 4242, gid 4343", fi, err)
	}
	if fi, err := c.Lstat("/out"); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("Lstat /out: %v, %v; want a symlink", fi, err)
	}
	if target, err := c.ReadLink("/out"); err != nil || target != "../secret" {
		t.Errorf("ReadLink /out: %q, %v; want ../secret", target, err)
	}
	if _, err := c.Stat("/out"); err == nil {
		t.Errorf("Stat /out (a symlink out of the root) succeeded")
	}
	f, err := c.Open("/in")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(f)
	f.Close()
	want, _ := os.ReadFile(filepath.Join(root, "sub", "file"))
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("read /in: %d bytes, %v; want %d", len(got), err, len(want))
	}
	if _, err := c.Open("/../../secret"); err == nil {
		t.Errorf("open /../../secret succeeded")
	}
	writes := map[string]error{}
	_, writes["create"] = c.Create("/new")
	writes["mkdir"] = c.Mkdir("/d")
	writes["remove"] = c.Remove("/sub/file")
	writes["rename"] = c.Rename("/sub", "/moved")
	writes["chmod"] = c.Chmod("/sub/file", 0o777)
	writes["symlink"] = c.Symlink("/etc", "/etc-link")
	for op, err := range writes {
		if !errors.Is(err, os.ErrPermission) {
			t.Errorf("%s: %v; want permission denied", op, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(root, "sub", "file")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("sub/file after the writes: %v; want it unchanged", err)
	}
}
