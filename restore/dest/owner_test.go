package dest

import (
	"errors"
	"fmt"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/restoresync/restoresync/treewalk"
)

// hostingEntries are file-list entries as a sender on a hosting account
// would send them. The sender's ids differ from hostIDs on purpose.
var (
	entRootDir  = treewalk.Entry{Path: ".", Kind: treewalk.KindDir, Mode: 0o755, Uid: 0, Gid: 0, User: "root", Group: "root"}
	entIndex    = treewalk.Entry{Path: "public_html/index.php", Kind: treewalk.KindFile, Mode: 0o644, Uid: 501, Gid: 20, User: "alice", Group: "staff"}
	entUploads  = treewalk.Entry{Path: "public_html/uploads", Kind: treewalk.KindDir, Mode: 0o2775, Uid: 70, Gid: 70, User: "www-data", Group: "www-data"}
	entSetuid   = treewalk.Entry{Path: "bin/helper", Kind: treewalk.KindFile, Mode: 0o6755, Uid: 501, Gid: 20, User: "alice", Group: "staff"}
	entNameless = treewalk.Entry{Path: "Maildir/cur/1.eml", Kind: treewalk.KindFile, Mode: 0o600, Uid: 4242, Gid: 4242}
	entUnknown  = treewalk.Entry{Path: "old.txt", Kind: treewalk.KindFile, Mode: 0o640, Uid: 1500, Gid: 1500, User: "carol", Group: "carol"}
	entLink     = treewalk.Entry{Path: "public_html/current", Kind: treewalk.KindSymlink, Mode: 0o777, Uid: 501, Gid: 20, User: "alice", Group: "staff", LinkTarget: "index.php"}
	entRootSUID = treewalk.Entry{Path: "bin/su", Kind: treewalk.KindFile, Mode: 0o4755, Uid: 0, Gid: 0, User: "root", Group: "root"}
)

func TestOwnerPolicyResolve(t *testing.T) {
	type want struct {
		uid, gid int
		mode     uint32
	}
	tests := []struct {
		name string
		opts OwnerOptions
		e    treewalk.Entry
		want want
	}{
		// Default: map by name, fall back to the numeric id.
		{"byname", OwnerOptions{}, entIndex, want{1001, 50, 0o644}},
		{"byname dir", OwnerOptions{}, entUploads, want{33, 33, 0o2775}},
		{"nameless", OwnerOptions{}, entNameless, want{4242, 4242, 0o600}},
		{"unknown name", OwnerOptions{}, entUnknown, want{1500, 1500, 0o640}},
		{"root stays root", OwnerOptions{}, entRootDir, want{0, 0, 0o755}},
		{"root by odd name", OwnerOptions{}, treewalk.Entry{Kind: treewalk.KindFile, Mode: 0o644, User: "alice", Group: "alice"}, want{0, 0, 0o644}},
		{"setuid kept by name", OwnerOptions{}, entSetuid, want{1001, 50, 0o6755}},
		{"numeric", OwnerOptions{NumericIDs: true}, entSetuid, want{501, 20, 0o6755}},

		// --chown.
		{"chown", OwnerOptions{Chown: "www-data:www-data"}, entIndex, want{33, 33, 0o644}},
		{"chown root too", OwnerOptions{Chown: "www-data:www-data"}, entRootDir, want{33, 33, 0o755}},
		{"chown drops setid", OwnerOptions{Chown: "www-data:www-data"}, entSetuid, want{33, 33, 0o755}},
		{"chown keepsetid", OwnerOptions{Chown: "www-data:www-data", KeepSetID: true}, entSetuid, want{33, 33, 0o6755}},
		{"chown user only", OwnerOptions{Chown: "bob"}, entSetuid, want{1002, 50, 0o2755}},
		{"chown user colon", OwnerOptions{Chown: "bob:"}, entSetuid, want{1002, 50, 0o2755}},
		{"chown group only", OwnerOptions{Chown: ":www-data"}, entSetuid, want{1001, 33, 0o4755}},
		{"chown numeric", OwnerOptions{Chown: "2000:2000"}, entNameless, want{2000, 2000, 0o600}},
		{"chown empty", OwnerOptions{Chown: ":"}, entSetuid, want{1001, 50, 0o6755}},
		{"chown dir keeps setgid", OwnerOptions{Chown: "bob:nogroup"}, entUploads, want{1002, 65534, 0o2775}},
		// Mapping to the id name-mapping gives anyway is no change.
		{"chown same ids", OwnerOptions{Chown: "alice:staff"}, entSetuid, want{1001, 50, 0o6755}},
		{"chown root file", OwnerOptions{Chown: "bob"}, entRootSUID, want{1002, 0, 0o755}},

		// --usermap / --groupmap.
		{"usermap name", OwnerOptions{Usermap: []string{"alice:bob"}}, entIndex, want{1002, 50, 0o644}},
		{"usermap miss", OwnerOptions{Usermap: []string{"carol:bob"}}, entIndex, want{1001, 50, 0o644}},
		{"usermap range", OwnerOptions{Usermap: []string{"1000-1999:nobody"}}, entUnknown, want{65534, 1500, 0o640}},
		{"usermap nameless", OwnerOptions{Usermap: []string{":nobody"}}, entNameless, want{65534, 4242, 0o600}},
		{"usermap empty misses root", OwnerOptions{Usermap: []string{":nobody"}}, entRootDir, want{0, 0, 0o755}},
		{"usermap root by 0", OwnerOptions{Usermap: []string{"0:daemon"}}, entRootSUID, want{1, 0, 0o755}},
		{"usermap root by name", OwnerOptions{Usermap: []string{"root:daemon"}}, entRootSUID, want{1, 0, 0o755}},
		{"usermap root keepsetid", OwnerOptions{Usermap: []string{"root:daemon"}, KeepSetID: true}, entRootSUID, want{1, 0, 0o4755}},
		{"groupmap wildcard", OwnerOptions{Groupmap: []string{"st*:www-data"}}, entSetuid, want{1001, 33, 0o4755}},
		{"groupmap numeric ignores names", OwnerOptions{NumericIDs: true, Groupmap: []string{"staff:www-data"}}, entSetuid, want{501, 20, 0o6755}},
		{"groupmap numeric by id", OwnerOptions{NumericIDs: true, Groupmap: []string{"20:www-data"}}, entSetuid, want{501, 33, 0o4755}},
		{"usermap numeric nameless root", OwnerOptions{NumericIDs: true, Usermap: []string{":nobody"}}, entRootDir, want{65534, 0, 0o755}},
		{"maps and chown other side", OwnerOptions{Chown: "bob", Groupmap: []string{"*:nogroup"}}, entIndex, want{1002, 65534, 0o644}},

		// --chmod, and its order with the set-id drop.
		{"chmod", OwnerOptions{Chmod: []string{"D2775,F664"}}, entIndex, want{1001, 50, 0o664}},
		{"chmod dir", OwnerOptions{Chmod: []string{"D2775,F664"}}, entRootDir, want{0, 0, 0o2775}},
		{"chmod symlink untouched", OwnerOptions{Chmod: []string{"a-rwx"}}, entLink, want{1001, 50, 0o777}},
		{"chown symlink", OwnerOptions{Chown: "bob:nogroup"}, entLink, want{1002, 65534, 0o777}},
		{"chmod cannot re-add setuid", OwnerOptions{Chown: "bob", Chmod: []string{"Fu+s"}}, entIndex, want{1002, 50, 0o644}},
		{"chmod setuid keepsetid", OwnerOptions{Chown: "bob", Chmod: []string{"Fu+s"}, KeepSetID: true}, entIndex, want{1002, 50, 0o4644}},
		{"chmod setuid no remap", OwnerOptions{Chmod: []string{"Fu+s"}}, entIndex, want{1001, 50, 0o4644}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewOwnerPolicy(tt.opts, hostIDs)
			if err != nil {
				t.Fatalf("NewOwnerPolicy(%+v): %v", tt.opts, err)
			}
			uid, gid, mode := p.Resolve(&tt.e)
			if got := (want{uid, gid, mode}); got != tt.want {
				t.Errorf("Resolve(%s) = %d, %d, %04o; want %d, %d, %04o",
					tt.e.Path, uid, gid, mode, tt.want.uid, tt.want.gid, tt.want.mode)
			}
		})
	}
}

func TestNewOwnerPolicyErrors(t *testing.T) {
	tests := []struct {
		opts    OwnerOptions
		flag    string
		item    string
		unknown bool
	}{
		{OwnerOptions{Chown: "nosuch:staff"}, "--chown", "nosuch:staff", true},
		{OwnerOptions{Chown: "bob:nosuch"}, "--chown", "bob:nosuch", true},
		{OwnerOptions{Chown: "bob", Usermap: []string{"*:alice"}}, "--chown", "bob", false},
		{OwnerOptions{Chown: ":staff", Groupmap: []string{"*:staff"}}, "--chown", ":staff", false},
		{OwnerOptions{Usermap: []string{"alice:bob", "carol"}}, "--usermap", "carol", false},
		{OwnerOptions{Usermap: []string{"alice:staff"}}, "--usermap", "alice:staff", true},
		{OwnerOptions{Groupmap: []string{"alice:bob"}}, "--groupmap", "alice:bob", true},
		{OwnerOptions{Chmod: []string{"u+rwX", "g=u"}}, "--chmod", "g=u", false},
	}
	for _, tt := range tests {
		p, err := NewOwnerPolicy(tt.opts, hostIDs)
		var se *SpecError
		if !errors.As(err, &se) {
			t.Errorf("NewOwnerPolicy(%+v) = %v, %v; want a *SpecError", tt.opts, p, err)
			continue
		}
		if se.Flag != tt.flag || se.Item != tt.item {
			t.Errorf("NewOwnerPolicy(%+v): SpecError{Flag: %q, Item: %q}, want %q, %q",
				tt.opts, se.Flag, se.Item, tt.flag, tt.item)
		}
		if !strings.HasPrefix(err.Error(), tt.flag) || !strings.Contains(err.Error(), tt.item) {
			t.Errorf("NewOwnerPolicy(%+v): error %q does not name %s and %q", tt.opts, err, tt.flag, tt.item)
		}
		if errors.Is(err, ErrUnknownName) != tt.unknown {
			t.Errorf("NewOwnerPolicy(%+v): errors.Is(%v, ErrUnknownName) = %v", tt.opts, err, !tt.unknown)
		}
	}
}

// firstUser and firstGroup return the first of names that exists on this
// host, and its id.
func firstUser(t *testing.T, names ...string) (string, int) {
	t.Helper()
	for _, n := range names {
		if u, err := user.Lookup(n); err == nil {
			id, err := strconv.Atoi(u.Uid)
			if err == nil {
				return n, id
			}
		}
	}
	t.Skipf("none of the users %q exists here", names)
	return "", 0
}

func firstGroup(t *testing.T, names ...string) (string, int) {
	t.Helper()
	for _, n := range names {
		if g, err := user.LookupGroup(n); err == nil {
			id, err := strconv.Atoi(g.Gid)
			if err == nil {
				return n, id
			}
		}
	}
	t.Skipf("none of the groups %q exists here", names)
	return "", 0
}

// TestOwnerPolicySystemChown resolves --chown against this host's real
// accounts.
func TestOwnerPolicySystemChown(t *testing.T) {
	uname, uid := firstUser(t, "www-data", "daemon", "bin", "nobody")
	gname, gid := firstGroup(t, "www-data", "nogroup", "daemon", "bin", "nobody")

	for _, keep := range []bool{false, true} {
		p, err := NewOwnerPolicy(OwnerOptions{Chown: uname + ":" + gname, KeepSetID: keep}, SystemIDs())
		if err != nil {
			t.Fatal(err)
		}
		e := treewalk.Entry{Path: "cgi-bin/run", Kind: treewalk.KindFile, Mode: 0o6755, Uid: 4242, Gid: 4242, User: "someone-not-here", Group: "someone-not-here"}
		wantMode := uint32(0o755)
		if keep {
			wantMode = 0o6755
		}
		gotUID, gotGID, gotMode := p.Resolve(&e)
		if gotUID != uid || gotGID != gid || gotMode != wantMode {
			t.Errorf("--chown=%s:%s KeepSetID=%v: Resolve = %d, %d, %04o; want %d, %d, %04o",
				uname, gname, keep, gotUID, gotGID, gotMode, uid, gid, wantMode)
		}
	}

	// Without --chown the sender's names map to the local ids.
	p, err := NewOwnerPolicy(OwnerOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := treewalk.Entry{Kind: treewalk.KindFile, Mode: 0o4755, Uid: 4242, Gid: 4243, User: uname, Group: gname}
	if u, g, m := p.Resolve(&e); u != uid || g != gid || m != 0o4755 {
		t.Errorf("by name %s:%s: Resolve = %d, %d, %04o; want %d, %d, 4755", uname, gname, u, g, m, uid, gid)
	}

	_, err = NewOwnerPolicy(OwnerOptions{Chown: "no-such-user-restoresync"}, nil)
	if !errors.Is(err, ErrUnknownName) {
		t.Errorf("--chown to a missing user: err = %v, want ErrUnknownName", err)
	}
}

func TestSystemIDs(t *testing.T) {
	ids := SystemIDs()
	for range 2 { // the second round is answered from the cache
		if id, ok := ids.LookupUser("root"); !ok || id != 0 {
			t.Errorf("LookupUser(root) = %d, %v", id, ok)
		}
		if id, ok := ids.LookupGroup("root"); !ok || id != 0 {
			t.Errorf("LookupGroup(root) = %d, %v", id, ok)
		}
		if _, ok := ids.LookupUser("no-such-user-restoresync"); ok {
			t.Error("LookupUser(no-such-user-restoresync) found it")
		}
		if _, ok := ids.LookupGroup("no-such-group-restoresync"); ok {
			t.Error("LookupGroup(no-such-group-restoresync) found it")
		}
		if _, ok := ids.LookupUser(""); ok {
			t.Error(`LookupUser("") found it`)
		}
	}
}

// TestOwnerPolicyConcurrent resolves from many goroutines at once; run with
// -race.
func TestOwnerPolicyConcurrent(t *testing.T) {
	p, err := NewOwnerPolicy(OwnerOptions{Usermap: []string{"1000-1999:root"}, Chmod: []string{"D2775,F664"}}, SystemIDs())
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"root", "daemon", "bin", "nobody", "no-such-user-restoresync", ""}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				n := names[(g+i)%len(names)]
				e := treewalk.Entry{Kind: treewalk.KindFile, Mode: 0o644, Uid: uint32(1000 + i), Gid: 0, User: n, Group: n}
				if uid, _, mode := p.Resolve(&e); uid != 0 || mode != 0o664 {
					errs <- fmt.Errorf("Resolve(%q, %d) = uid %d, mode %04o", n, e.Uid, uid, mode)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
