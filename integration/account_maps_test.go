package integration

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// --account with --usermap, --groupmap or --chown: the explicit rules
// apply to what they match, the account's mapping (its user, its group)
// to every other owner; neither is dropped.
func TestAccountComposesWithMaps(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := account.get(t) // owners www-data (or daemon), bin, group mail
	name, uid, gid := throwawayAccount(t)
	web := "www-data"
	if _, err := user.Lookup(web); err != nil {
		web = "daemon"
	}
	id := func(kind, n string) uint32 {
		t.Helper()
		var s string
		if kind == "user" {
			u, err := user.Lookup(n)
			if err != nil {
				t.Fatal(err)
			}
			s = u.Uid
		} else {
			g, err := user.LookupGroup(n)
			if err != nil {
				t.Fatal(err)
			}
			s = g.Gid
		}
		v, _ := strconv.ParseUint(s, 10, 32)
		return uint32(v)
	}
	nobody, mail := id("user", "nobody"), id("group", "mail")
	webUID := id("user", web)

	for _, tc := range []struct {
		name string
		args []string
		// owner gives the owner a file of source owner su:sg must get.
		owner func(su, sg uint32) (uint32, uint32)
		// hits says whether a source owner is matched by an explicit rule.
		hits func(su, sg uint32) bool
	}{
		{"usermap", []string{"--usermap", web + ":nobody"},
			func(su, _ uint32) (uint32, uint32) {
				if su == webUID {
					return nobody, gid
				}
				return uid, gid
			}, func(su, _ uint32) bool { return su == webUID }},
		{"groupmap", []string{"--groupmap", "mail:mail"},
			func(_, sg uint32) (uint32, uint32) {
				if sg == mail {
					return uid, mail
				}
				return uid, gid
			}, func(_, sg uint32) bool { return sg == mail }},
		{"usermap+groupmap", []string{"--usermap", web + ":nobody", "--groupmap", "mail:mail"},
			func(su, sg uint32) (uint32, uint32) {
				u, g := uid, gid
				if su == webUID {
					u = nobody
				}
				if sg == mail {
					g = mail
				}
				return u, g
			}, func(su, sg uint32) bool { return su == webUID || sg == mail }},
		{"chown-user", []string{"--chown", "nobody"},
			func(_, _ uint32) (uint32, uint32) { return nobody, gid }, nil},
		{"chown-group", []string{"--chown", ":mail"},
			func(_, _ uint32) (uint32, uint32) { return uid, mail }, nil},
		{"chown-both", []string{"--chown", "nobody:mail"},
			func(_, _ uint32) (uint32, uint32) { return nobody, mail }, nil},
		{"chown-user+groupmap", []string{"--chown", "nobody", "--groupmap", "mail:mail"},
			func(_, sg uint32) (uint32, uint32) {
				if sg == mail {
					return nobody, mail
				}
				return nobody, gid
			}, func(_, sg uint32) bool { return sg == mail }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), name)
			args := append([]string{"restore", "--config", "none", "--account", name}, tc.args...)
			mustRun(t, append(args, src, dst)...)
			hit, rest, bad := 0, 0, 0
			walkRel(t, dst, func(rel string, _ os.DirEntry) {
				su, sg := ownerOf(t, filepath.Join(src, rel))
				wu, wg := tc.owner(su, sg)
				if u, g := ownerOf(t, filepath.Join(dst, rel)); u != wu || g != wg {
					if bad++; bad <= 5 {
						t.Errorf("%s (source %d:%d) is owned by %d:%d, want %d:%d", rel, su, sg, u, g, wu, wg)
					}
				}
				if tc.hits != nil && tc.hits(su, sg) {
					hit++
				} else {
					rest++
				}
			})
			if tc.hits != nil && (hit == 0 || rest == 0) {
				t.Errorf("%d entries matched the explicit rules, %d did not: the tree does not test both (%s)", hit, rest, strings.Join(tc.args, " "))
			}
		})
	}
}
