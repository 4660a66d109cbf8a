package transfer

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/restoresync/restoresync/treewalk"
)

// Extended metadata in pax archives, as GNU tar (1.27 and later, with
// --xattrs --acls) writes and reads it, from star's SCHILY.* records:
//
//	SCHILY.xattr.NAME    an extended attribute, its raw value
//	SCHILY.acl.access    the access ACL in the long text form of acl(5)
//	SCHILY.acl.default   the default ACL, likewise
//
// The text form has one "TAG:QUALIFIER:PERMS" entry per line (GNU tar) or
// comma-separated (star), user and group qualifiers by name when the sender
// knows one, else numeric; star may add ":ID" after the permissions. A
// sparse file is flagged with a record of our own, TarSparse (archive/tar
// cannot write GNU's sparse format); GNU tar's GNU.sparse.* records flag one
// too when reading.
const (
	TarXattrPrefix  = "SCHILY.xattr."
	TarACLAccess    = "SCHILY.acl.access"
	TarACLDefault   = "SCHILY.acl.default"
	TarSparse       = "RESTORESYNC.sparse"
	tarGNUSparseKey = "GNU.sparse."
)

// FormatACLText returns acl in the long text form GNU tar writes
// (newline-terminated entries, named entries by name when they have one).
// A pure function.
func FormatACLText(acl []treewalk.ACLEntry) string {
	var b strings.Builder
	for _, a := range acl {
		var tag, qual string
		switch a.Tag {
		case treewalk.ACLUserObj:
			tag = "user"
		case treewalk.ACLUser:
			tag, qual = "user", aclQualifier(a)
		case treewalk.ACLGroupObj:
			tag = "group"
		case treewalk.ACLGroup:
			tag, qual = "group", aclQualifier(a)
		case treewalk.ACLMask:
			tag = "mask"
		case treewalk.ACLOther:
			tag = "other"
		default:
			continue
		}
		perm := []byte("---")
		for i, c := range "rwx" {
			if a.Perm&(4>>i) != 0 {
				perm[i] = byte(c)
			}
		}
		fmt.Fprintf(&b, "%s:%s:%s\n", tag, qual, perm)
	}
	return b.String()
}

func aclQualifier(a treewalk.ACLEntry) string {
	if a.Name != "" {
		return a.Name
	}
	return strconv.FormatUint(uint64(a.ID), 10)
}

// ParseACLText parses the long or short text form of an ACL (acl(5):
// "user::rw-", "u:alice:r", "g:33:rwx", entries separated by newlines or
// commas, "#" comments). A named entry gets Name when its qualifier is not
// a number, and ID when it is one or when a trailing ":ID" field (star's)
// gives it; otherwise ID is treewalk.ACLUndefinedID, for the caller to
// resolve from Name. Errors wrap ErrACLText. A pure function.
func ParseACLText(s string) ([]treewalk.ACLEntry, error) {
	var out []treewalk.ACLEntry
	for _, line := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == ',' }) {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) < 3 || len(f) > 4 {
			return nil, fmt.Errorf("%w: %q", ErrACLText, line)
		}
		a := treewalk.ACLEntry{ID: treewalk.ACLUndefinedID}
		named := f[1] != ""
		switch f[0] {
		case "user", "u":
			a.Tag = map[bool]uint16{false: treewalk.ACLUserObj, true: treewalk.ACLUser}[named]
		case "group", "g":
			a.Tag = map[bool]uint16{false: treewalk.ACLGroupObj, true: treewalk.ACLGroup}[named]
		case "mask", "m":
			a.Tag = treewalk.ACLMask
		case "other", "o":
			a.Tag = treewalk.ACLOther
		default:
			return nil, fmt.Errorf("%w: tag %q", ErrACLText, f[0])
		}
		if named && a.Tag != treewalk.ACLUser && a.Tag != treewalk.ACLGroup {
			return nil, fmt.Errorf("%w: %q takes no qualifier", ErrACLText, line)
		}
		for _, c := range f[2] {
			switch c {
			case 'r':
				a.Perm |= 4
			case 'w':
				a.Perm |= 2
			case 'x':
				a.Perm |= 1
			case '-':
			default:
				return nil, fmt.Errorf("%w: permissions %q", ErrACLText, f[2])
			}
		}
		if named {
			if id, err := strconv.ParseUint(f[1], 10, 32); err == nil {
				a.ID = uint32(id)
			} else {
				a.Name = f[1]
			}
			if len(f) == 4 {
				id, err := strconv.ParseUint(f[3], 10, 32)
				if err != nil {
					return nil, fmt.Errorf("%w: id %q", ErrACLText, f[3])
				}
				a.ID = uint32(id)
			}
		}
		out = append(out, a)
	}
	return out, nil
}
