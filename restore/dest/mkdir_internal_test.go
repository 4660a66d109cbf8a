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

// Finish sweeps a killed run's temporary files out of every directory
// that was there before the run, beside directories the run made, and
// it forgets each made directory as it finishes it, so the Writer keeps
// no record of the tree once its directories are done.
func TestFinishSweepsDirectoriesThatWereThere(t *testing.T) {
	dst := t.TempDir()
	w, err := NewWriter(dst, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	uid, gid := uint32(os.Geteuid()), uint32(os.Getegid())
	must(t, os.Mkdir(filepath.Join(dst, "old"), 0o755))
	stale := []string{filepath.Join(dst, tempName("killed")), filepath.Join(dst, "old", tempName("killed"))}
	for _, p := range stale {
		must(t, os.WriteFile(p, []byte("a killed run's partial data"), 0o600))
	}
	dir := func(p string) treewalk.Entry {
		return treewalk.Entry{Path: p, Kind: treewalk.KindDir, Mode: 0o755, MtimeNs: 1700000000e9, Uid: uid, Gid: gid}
	}
	entries := []treewalk.Entry{dir("."), dir("new"), dir("new/deeper"), dir("old")}
	plan, err := w.Plan(t.Context(), entries)
	if err != nil || len(plan.Errors) != 0 {
		t.Fatalf("Plan: %v %v", plan.Errors, err)
	}
	if got := len(w.madeDirs); got != 2 {
		t.Errorf("after Plan the Writer records %d directories it made, want 2 (new, new/deeper)", got)
	}
	if errs, err := w.Finish(t.Context(), entries); err != nil || len(errs) != 0 {
		t.Fatalf("Finish: %v %v", errs, err)
	}
	for _, p := range stale {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s: %v after Finish, want it swept", p, err)
		}
	}
	if got := len(w.madeDirs); got != 0 {
		t.Errorf("after Finish the Writer still records %d made directories, want none", got)
	}
	var st unix.Stat_t
	for _, rel := range []string{"new", "new/deeper", "old"} {
		if err := unix.Lstat(filepath.Join(dst, rel), &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&0o7777 != 0o755 || st.Mtim.Sec != 1700000000 {
			t.Errorf("%s after Finish: mode %04o mtime %d, want 0755 and 1700000000", rel, st.Mode&0o7777, st.Mtim.Sec)
		}
	}
}
