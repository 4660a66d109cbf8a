package dest

import (
	"errors"
	"os/user"
	"strconv"
	"strings"
	"sync"

	"github.com/restoresync/restoresync/treewalk"
)

// OwnerOptions are the receiver's ownership and permission options, as
// rsync(1) spells them. The zero value maps owners by name and leaves modes
// as the sender sent them.
type OwnerOptions struct {
	// NumericIDs (--numeric-ids) uses the sender's numeric ids as they are,
	// without mapping by name. Map rules then see every id as nameless, so
	// only numeric, range, "*" and empty FROM values match.
	NumericIDs bool
	// Chown (--chown=USER:GROUP) owns every entry by USER and GROUP. It is
	// shorthand for Usermap "*:USER" and Groupmap "*:GROUP"; either side may
	// be empty ("USER", "USER:", ":GROUP") to leave that side alone, and a
	// side that is set cannot be combined with Usermap or Groupmap.
	Chown string
	// Usermap and Groupmap (--usermap, --groupmap) are lists of
	// comma-separated FROM:TO pairs; the values are concatenated in order
	// (rsync accepts each option once; we accept repeats) and the first
	// matching pair wins. FROM is a numeric id ("33"), an inclusive range
	// ("1000-1999"), a wildcard pattern over the sender's names ("*",
	// "web*"; "*" also matches ids without a name), or a name (empty to
	// match ids without a name). TO is a name or numeric id on this host.
	// Id 0 is matched by a FROM of "0", or by its name here ("root").
	Usermap, Groupmap []string
	// Chmod (--chmod) lists rsync chmod specs applied in order to the
	// sender's modes; see ParseChmod for the syntax.
	Chmod []string
	// ChmodUmask is the umask (permission bits, at most 0777) that the
	// Chmod items naming no class ("+w", "D=rX") leave alone; nil means
	// this process's (ProcessUmask). rsync resolves --chmod with the
	// client's umask, so the client of a push sets it to its own.
	ChmodUmask *uint32
	// KeepSetID keeps the setuid and setgid bits of a non-directory whose
	// owner or group Chown, Usermap or Groupmap changed; by default they are
	// dropped (see OwnerPolicy.Resolve).
	KeepSetID bool
}

// OwnerPolicy decides the owner, group and permission bits of each restored
// entry. It is immutable after NewOwnerPolicy and safe for concurrent use,
// provided its IDLookup is (SystemIDs is).
type OwnerPolicy struct {
	numericIDs bool
	keepSetID  bool
	users      idMap
	groups     idMap
	chmod      ChmodRules
	ids        IDLookup
}

// NewOwnerPolicy checks and compiles o for this host. ids resolves names
// here; nil means SystemIDs(). A malformed --chmod, --usermap, --groupmap or
// --chown value, a ChmodUmask above 0777, a TO name that does not exist
// here, or --chown combined with a map of the same side is a *SpecError
// naming the option and the bad item.
func NewOwnerPolicy(o OwnerOptions, ids IDLookup) (*OwnerPolicy, error) {
	if ids == nil {
		ids = SystemIDs()
	}
	p := &OwnerPolicy{numericIDs: o.NumericIDs, keepSetID: o.KeepSetID, ids: ids}

	usermap, groupmap := o.Usermap, o.Groupmap
	userFlag, groupFlag := "--usermap", "--groupmap"
	if o.Chown != "" {
		u, g, _ := strings.Cut(o.Chown, ":")
		if u != "" {
			if len(usermap) > 0 {
				return nil, &SpecError{Flag: "--chown", Item: o.Chown, Err: errors.New("conflicts with --usermap")}
			}
			usermap, userFlag = []string{"*:" + u}, "--chown"
		}
		if g != "" {
			if len(groupmap) > 0 {
				return nil, &SpecError{Flag: "--chown", Item: o.Chown, Err: errors.New("conflicts with --groupmap")}
			}
			groupmap, groupFlag = []string{"*:" + g}, "--chown"
		}
	}

	var err error
	if p.users, err = parseIDMap(userFlag, usermap, ids.LookupUser); err != nil {
		return nil, fixChownItem(err, o.Chown)
	}
	if p.groups, err = parseIDMap(groupFlag, groupmap, ids.LookupGroup); err != nil {
		return nil, fixChownItem(err, o.Chown)
	}
	if p.chmod, err = parseChmodOwner(o.Chmod, o.ChmodUmask); err != nil {
		return nil, err
	}
	return p, nil
}

// fixChownItem reports a --chown error against the user's value rather than
// the "*:USER" rule it was rewritten to.
func fixChownItem(err error, chown string) error {
	var se *SpecError
	if errors.As(err, &se) && se.Flag == "--chown" {
		se.Item = chown
	}
	return err
}

// Resolve returns the numeric owner and group e gets on this host and its
// permission bits (07777 mask). It never fails and is safe for concurrent
// use.
//
// Owner and group, like rsync's receiver: a matching --usermap/--groupmap
// (or --chown) rule gives the TO id. Otherwise, with NumericIDs, e.Uid and
// e.Gid are used as they are; without, the sender's name is looked up here
// and its local id used, falling back to the numeric id when e has no name
// or the name is unknown here. Id 0 is never mapped by name: root stays
// root unless a rule says otherwise.
//
// Mode: e.Mode with the --chmod rules applied (directories take "D" items,
// everything else "F" items); a symlink's mode is returned unchanged. Then,
// unless KeepSetID, a non-directory whose uid a rule changed (compared with
// the unmapped result above) loses its setuid bit (04000), and one whose gid
// a rule changed loses its setgid bit (02000), so that a set-id program
// never starts running as an account its sender did not pick; --chmod cannot
// put them back. Directories keep both bits: there setgid only makes new
// entries inherit the group, which is usually the point of --chown :GROUP.
// rsync itself keeps the bits.
func (p *OwnerPolicy) Resolve(e *treewalk.Entry) (uid, gid int, mode uint32) {
	userName, groupName := p.matchName(e.Uid, e.User), p.matchName(e.Gid, e.Group)

	defUID := p.unmapped(e.Uid, e.User, p.ids.LookupUser)
	defGID := p.unmapped(e.Gid, e.Group, p.ids.LookupGroup)
	uid, gid = defUID, defGID
	if to, ok := p.users.match(e.Uid, userName); ok {
		uid = to
	}
	if to, ok := p.groups.match(e.Gid, groupName); ok {
		gid = to
	}

	mode = e.Mode & permBits
	if e.Kind == treewalk.KindSymlink {
		return uid, gid, mode
	}
	isDir := e.Kind == treewalk.KindDir
	mode = p.chmod.Apply(mode, isDir)
	if !p.keepSetID && !isDir {
		if uid != defUID {
			mode &^= 0o4000
		}
		if gid != defGID {
			mode &^= 0o2000
		}
	}
	return uid, gid, mode
}

// unmapped is the id an entry gets without map rules.
func (p *OwnerPolicy) unmapped(id uint32, name string, lookup func(string) (int, bool)) int {
	if p.numericIDs || id == 0 || name == "" {
		return int(id)
	}
	if local, ok := lookup(name); ok {
		return local
	}
	return int(id)
}

// matchName is the name map rules match id against: none with NumericIDs
// (rsync sends no names then); for id 0, whose sender name rsync does not
// send, the local name, taken to be the sender's or else "root".
func (p *OwnerPolicy) matchName(id uint32, name string) string {
	switch {
	case p.numericIDs:
		return ""
	case id == 0 && name == "":
		return rootName
	}
	return name
}

// IDLookup resolves user and group names to numeric ids on this host.
// Implementations used by a shared OwnerPolicy must be safe for concurrent
// use.
type IDLookup interface {
	// LookupUser returns the uid of the user called name, and false if
	// there is none (or it cannot be looked up).
	LookupUser(name string) (uid int, ok bool)
	// LookupGroup returns the gid of the group called name, and false if
	// there is none (or it cannot be looked up).
	LookupGroup(name string) (gid int, ok bool)
}

// SystemIDs returns an IDLookup backed by os/user (the C library's NSS with
// cgo, /etc/passwd and /etc/group without). Each call returns a new lookup
// with its own cache: answers, including "no such name", are cached for the
// lookup's lifetime, so create a new one to see accounts added meanwhile. A
// lookup that fails for another reason (say, an unreadable /etc/passwd) is
// reported as not found and not cached. It is safe for concurrent use.
func SystemIDs() IDLookup {
	return &systemIDs{users: map[string]cachedID{}, groups: map[string]cachedID{}}
}

// cachedID is one cached answer of systemIDs.
type cachedID struct {
	id int
	ok bool
}

// systemIDs implements SystemIDs. The mutex guards only the maps: lookups run
// outside it, so a slow name service does not serialize unrelated names (two
// goroutines may look up the same name once each).
type systemIDs struct {
	mu     sync.Mutex
	users  map[string]cachedID
	groups map[string]cachedID
}

// LookupUser implements IDLookup.
func (s *systemIDs) LookupUser(name string) (int, bool) {
	return s.lookup(s.users, name, func() (string, error) {
		u, err := user.Lookup(name)
		if err != nil {
			return "", err
		}
		return u.Uid, nil
	})
}

// LookupGroup implements IDLookup.
func (s *systemIDs) LookupGroup(name string) (int, bool) {
	return s.lookup(s.groups, name, func() (string, error) {
		g, err := user.LookupGroup(name)
		if err != nil {
			return "", err
		}
		return g.Gid, nil
	})
}

// lookup answers name from cache or from find, which returns the id as the
// decimal string os/user gives. Only "unknown name" failures are cached.
func (s *systemIDs) lookup(cache map[string]cachedID, name string, find func() (string, error)) (int, bool) {
	if name == "" {
		return 0, false
	}
	s.mu.Lock()
	c, hit := cache[name]
	s.mu.Unlock()
	if hit {
		return c.id, c.ok
	}
	idStr, err := find()
	var (
		unknownUser  user.UnknownUserError
		unknownGroup user.UnknownGroupError
	)
	switch {
	case err == nil:
		id, perr := strconv.Atoi(idStr)
		c = cachedID{id: id, ok: perr == nil && id >= 0}
	case errors.As(err, &unknownUser), errors.As(err, &unknownGroup):
		c = cachedID{}
	default:
		return 0, false
	}
	s.mu.Lock()
	cache[name] = c
	s.mu.Unlock()
	return c.id, c.ok
}
