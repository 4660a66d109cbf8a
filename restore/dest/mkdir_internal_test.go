package dest

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/treewalk"
)

// A directory the account owns is made under its temporary name and
// renamed into place once owned, so what a killed run leaves is a
// temporary directory, never a root-owned one under a name of the tree:
// the rerun's Plan replaces such a leftover, and Finish sweeps one whose
// directory the list no longer has.
func TestMkdirOwnedLeavesNoRootDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("owners are set only as root")
	}
	dst := filepath.Join(t.TempDir(), "acct")
	w, err := NewWriter(dst, WriterOptions{Owner: OwnerOptions{Chown: "daemon:daemon"}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	daemon, _ := SystemIDs().LookupUser("daemon")
	// What a run killed between its mkdir and its rename leaves: empty
	// root-owned 0700 directories under temporary names.
	for _, name := range []string{tempName("public_html"), tempName("gone")} {
		if err := os.Mkdir(filepath.Join(dst, name), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	entries := []treewalk.Entry{
		{Path: ".", Kind: treewalk.KindDir, Mode: 0o750, MtimeNs: 1700000000e9},
		{Path: "public_html", Kind: treewalk.KindDir, Mode: 0o755, MtimeNs: 1700000000e9},
		{Path: "public_html/cache", Kind: treewalk.KindDir, Mode: 0o700, MtimeNs: 1700000000e9},
	}
	plan, err := w.Plan(t.Context(), entries)
	if err != nil || len(plan.Errors) != 0 {
		t.Fatalf("Plan: %v %v", plan.Errors, err)
	}
	var st unix.Stat_t
	for rel, want := range map[string]uint32{"public_html": 0o755, "public_html/cache": 0o700} {
		if err := unix.Lstat(filepath.Join(dst, rel), &st); err != nil {
			t.Fatal(err)
		}
		if int(st.Uid) != daemon || st.Mode&0o7777 != want {
			t.Errorf("%s after Plan: %d %04o, want daemon's %d %04o", rel, st.Uid, st.Mode&0o7777, daemon, want)
		}
	}
	if errs, err := w.Finish(t.Context(), entries); err != nil || len(errs) != 0 {
		t.Fatalf("Finish: %v %v", errs, err)
	}
	names, err := os.ReadDir(dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0].Name() != "public_html" {
		var got []string
		for _, n := range names {
			got = append(got, n.Name())
		}
		t.Errorf("DST holds %q, want only public_html (the temporary directories gone)", got)
	}
}
