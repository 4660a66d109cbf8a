package bench

import (
	"os/user"
	"strconv"
)

// ownerClass is who a planned node belongs to when GenOptions.Owners is set.
// Classes name roles, not ids: they are resolved on the host that writes the
// tree, so a tree made on one machine has the names, not the numbers, of
// another.
type ownerClass uint8

const (
	ownerKeep   ownerClass = iota // the running user and group
	ownerWeb                      // the web server: www-data, else daemon
	ownerMail                     // the running user, group mail
	ownerDaemon                   // daemon:daemon
	ownerBin                      // bin:bin
)

// owner is a resolved uid and gid; -1 leaves that id unchanged.
type owner struct{ uid, gid int }

// resolveOwners looks the classes' accounts up in this host's user and
// group databases. A class whose account does not exist keeps the running
// user's ids (so Owners never fails for want of an account).
func resolveOwners() map[ownerClass]owner {
	return map[ownerClass]owner{
		ownerKeep:   {-1, -1},
		ownerWeb:    {lookupUID("www-data", "daemon"), lookupGID("www-data", "daemon")},
		ownerMail:   {-1, lookupGID("mail")},
		ownerDaemon: {lookupUID("daemon"), lookupGID("daemon")},
		ownerBin:    {lookupUID("bin"), lookupGID("bin")},
	}
}

// lookupUID returns the uid of the first of names that exists, or -1.
func lookupUID(names ...string) int {
	for _, n := range names {
		if u, err := user.Lookup(n); err == nil {
			if id, err := strconv.Atoi(u.Uid); err == nil {
				return id
			}
		}
	}
	return -1
}

// lookupGID returns the gid of the first of names that exists, or -1.
func lookupGID(names ...string) int {
	for _, n := range names {
		if g, err := user.LookupGroup(n); err == nil {
			if id, err := strconv.Atoi(g.Gid); err == nil {
				return id
			}
		}
	}
	return -1
}
