package dest

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/treewalk"
)

// RsyncMakeDirs makes the list's missing directories, DST included, with
// the owner the policy gives them and their mode plus rwx for the owner,
// before any transfer: what an interrupted rsync transfer then leaves.
func TestRsyncMakeDirsOwnsThem(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("owners are set only as root")
	}
	dst := filepath.Join(t.TempDir(), "home", "acct")
	w, err := NewWriter(dst, WriterOptions{Owner: OwnerOptions{Chown: "daemon:daemon"}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var st unix.Stat_t
	if err := unix.Stat(dst, &st); err != nil {
		t.Fatal(err)
	}
	daemon, _ := SystemIDs().LookupUser("daemon")
	if int(st.Uid) != daemon {
		t.Errorf("a new DST is owned by %d from its creation, want daemon's %d", st.Uid, daemon)
	}
	entries := []treewalk.Entry{
		{Path: ".", Kind: treewalk.KindDir, Mode: 0o750},
		{Path: "public_html", Kind: treewalk.KindDir, Mode: 0o755},
		{Path: "public_html/ro", Kind: treewalk.KindDir, Mode: 0o555},
		{Path: "public_html/index.php", Kind: treewalk.KindFile, Mode: 0o644, Size: 3},
		{Path: "mail", Kind: treewalk.KindDir, Mode: 0o700},
	}
	errs, err := w.RsyncMakeDirs(t.Context(), entries)
	if err != nil || len(errs) != 0 {
		t.Fatalf("RsyncMakeDirs: %v %v", errs, err)
	}
	for rel, want := range map[string]uint32{".": 0o750, "public_html": 0o755, "public_html/ro": 0o755, "mail": 0o700} {
		if err := unix.Lstat(filepath.Join(dst, rel), &st); err != nil {
			t.Fatal(err)
		}
		if int(st.Uid) != daemon || st.Mode&0o7777 != want {
			t.Errorf("%s: %d %04o, want daemon's %d %04o", rel, st.Uid, st.Mode&0o7777, daemon, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(dst, "public_html/index.php")); !os.IsNotExist(err) {
		t.Errorf("RsyncMakeDirs made a file: %v", err)
	}
}
