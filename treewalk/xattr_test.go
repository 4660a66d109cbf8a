package treewalk

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/restoresync/restoresync/internal/testenv"
)

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	testenv.RequireTool(t, name)
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// Walk lists xattrs (not the system. namespace), ACLs with the names of
// their ids, and the sparse flag, as the real setfattr, setfacl and
// truncate made them.
func TestWalkExtendedMetadata(t *testing.T) {
	root := t.TempDir()
	f := filepath.Join(root, "f")
	if err := os.WriteFile(f, []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	run(t, "setfattr", "-n", "user.b", "-v", "2", f)
	run(t, "setfattr", "-n", "user.a", "-v", "0x00ff", f)
	run(t, "setfacl", "-m", "u:nobody:rw", f)
	run(t, "setfacl", "-d", "-m", "g:daemon:r", root)
	run(t, "truncate", "-s", "1G", filepath.Join(root, "sparse"))
	list, err := Walk(context.Background(), root)
	if err != nil || len(list.Errors) > 0 {
		t.Fatal(err, list.Errors)
	}
	by := map[string]Entry{}
	for _, e := range list.Entries {
		by[e.Path] = e
	}
	if got := by["f"].Xattrs; !reflect.DeepEqual(got, []Xattr{{"user.a", []byte{0, 0xff}}, {"user.b", []byte("2")}}) {
		t.Errorf("xattrs of f: %q", got)
	}
	acl := by["f"].ACL
	if len(acl) != 5 || acl[1].Tag != ACLUser || acl[1].Name != "nobody" || acl[1].Perm != 6 {
		t.Errorf("ACL of f: %+v", acl)
	}
	if d := by["."].DefaultACL; len(d) != 5 || d[2].Tag != ACLGroup || d[2].Name != "daemon" || d[2].Perm != 4 {
		t.Errorf("default ACL of the root: %+v", d)
	}
	if !by["sparse"].Sparse || by["f"].Sparse {
		t.Errorf("sparse flags: sparse %v, f %v", by["sparse"].Sparse, by["f"].Sparse)
	}
	// The kernel's value round-trips through ParseACL and EncodeACL.
	attrs, err := ListXattrsAt(-100, f) // AT_FDCWD
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range attrs {
		if a.Name == XattrACLAccess {
			parsed, err := ParseACL(a.Value)
			if err != nil || !reflect.DeepEqual(EncodeACL(parsed), a.Value) {
				t.Errorf("ACL value does not round-trip: %v", err)
			}
		}
	}
	for _, bad := range [][]byte{nil, {2, 0, 0}, {1, 0, 0, 0}, {2, 0, 0, 0, 0x40, 0, 7, 0, 0, 0, 0, 0}, {2, 0, 0, 0, 2, 0, 7, 0, 0xff, 0xff, 0xff, 0xff}, {2, 0, 0, 0, 1, 0, 8, 0, 0, 0, 0, 0}} {
		if _, err := ParseACL(bad); err == nil {
			t.Errorf("ParseACL(%x) accepted", bad)
		}
	}
}

// Compare reports a missing, extra or changed xattr or ACL, and a file
// sparse on one side only.
func TestCompareExtendedMetadata(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, root := range []string{a, b} {
		for _, n := range []string{"x", "acl", "same"} {
			if err := os.WriteFile(filepath.Join(root, n), []byte("data"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	run(t, "setfattr", "-n", "user.k", "-v", "1", filepath.Join(a, "x"))
	run(t, "setfattr", "-n", "user.k", "-v", "2", filepath.Join(b, "x"))
	run(t, "setfattr", "-n", "user.only", "-v", "a", filepath.Join(a, "x"))
	run(t, "setfacl", "-m", "u:nobody:r", filepath.Join(a, "acl"))
	run(t, "setfattr", "-n", "user.s", "-v", "same", filepath.Join(a, "same"))
	run(t, "setfattr", "-n", "user.s", "-v", "same", filepath.Join(b, "same"))
	run(t, "truncate", "-s", "100M", filepath.Join(a, "img"))
	f, err := os.Create(filepath.Join(b, "img"))
	if err != nil {
		t.Fatal(err)
	}
	f.Write(make([]byte, 100<<20))
	f.Close()
	diffs, err := Compare(context.Background(), a, b, CompareOptions{IgnoreRootDir: true, IgnoreDirTimes: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range diffs {
		if d.What != DiffMtime {
			got = append(got, d.Path+" "+d.What)
		}
	}
	want := []string{"acl xattr", "img sparse", "x xattr", "x xattr"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("differences %q, want %q", got, want)
	}
	diffs, err = Compare(context.Background(), a, b, CompareOptions{IgnoreRootDir: true, IgnoreDirTimes: true, IgnoreXattrs: true, IgnoreSparse: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		if d.What == DiffXattr || d.What == DiffSparse {
			t.Errorf("ignored, yet reported: %s", d)
		}
	}
}
