package restore

import (
	"archive/tar"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/restoresync/restoresync/internal/testenv"
	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/transfer"
)

// The agent-less tar command line asks the real GNU tar for xattrs, ACLs
// and holes when it supports them, and leaves each out when told to.
func TestRemoteTarMetaFlags(t *testing.T) {
	testenv.RequireTool(t, "setfattr")
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("setfattr", "-n", "user.origin", "-v", "backup", f).CombinedOutput(); err != nil {
		t.Fatalf("setfattr: %v\n%s", err, out)
	}
	for _, off := range []bool{false, true} {
		cmd, err := remoteTarCommand(dir, transfer.Compression{Codec: transfer.CodecNone})
		if err != nil {
			t.Fatal(err)
		}
		cmd = remoteTarMetaFlags(cmd, dest.WriterOptions{NoXattrs: off, NoACLs: off, NoSparse: off})
		out, err := exec.Command("sh", "-c", cmd).Output()
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		tr := tar.NewReader(bytes.NewReader(out))
		found := false
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			if h.Name == "./f" {
				found = h.PAXRecords["SCHILY.xattr.user.origin"] == "backup"
			}
		}
		if found == off {
			t.Errorf("no-xattrs %v: the archive has the xattr: %v (command: %s)", off, found, cmd)
		}
	}
}
