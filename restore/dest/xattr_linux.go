package dest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/treewalk"
)

// Extended attributes and POSIX ACLs on the destination (rsync's -X and
// -A, on by default here). The writer applies them as the last part of an
// entry's metadata, on the open descriptor of a file or directory, before
// the rename that puts a file in place; symlinks and special files, which
// cannot be opened safely, through "/proc/self/fd/DIRFD/NAME" (see
// treewalk.FdPath), which never follows NAME.
//
// Order, as rsync's set_file_attrs: owner (chown), then the access and
// default ACLs (setting an access ACL rewrites the group bits of the mode
// from its mask), then the mode (chmod, which also puts the setuid and
// setgid bits that chown cleared back), then the other extended
// attributes, last: chown clears security.capability (file capabilities),
// so it is set after it. rsync sets xattrs before chown, which loses file
// capabilities when the owner changes; restoresync does not.
//
// What DST has that the source has not is removed, within the namespaces
// the restore carries (user., trusted., security. except security.selinux,
// which the destination's policy owns; and the ACLs; not running as root,
// only user. and the ACLs, as rsync does): a new file inherits
// its directory's default ACL, which an exact restore must not keep.

// xattrTarget is where an entry's xattrs are read and written: an open
// descriptor (f*xattr calls), or a name in an open directory, reached as
// treewalk.FdPath without following it (l*xattr calls). Reads go through
// treewalk.XattrAt, the one lister of the project.
type xattrTarget struct {
	at   treewalk.XattrAt // reads: Name "" for the descriptor itself
	fd   int              // >= 0: writes with the f*xattr calls on it
	path string           // else: writes with the l*xattr calls on it
}

func fdTarget(fd int) xattrTarget { return xattrTarget{at: treewalk.XattrAt{Dirfd: fd}, fd: fd} }

func pathTarget(dirfd int, name string) xattrTarget {
	return xattrTarget{fd: -1, at: treewalk.XattrAt{Dirfd: dirfd, Name: name}, path: treewalk.FdPath(dirfd, name)}
}

func (t xattrTarget) set(name string, value []byte) error {
	if t.fd >= 0 {
		return unix.Fsetxattr(t.fd, name, value, 0)
	}
	return unix.Lsetxattr(t.path, name, value, 0)
}

func (t xattrTarget) remove(name string) error {
	if t.fd >= 0 {
		return unix.Fremovexattr(t.fd, name)
	}
	return unix.Lremovexattr(t.path, name)
}

// names lists the target's xattr names; none without xattr support.
func (t xattrTarget) names() ([]string, error) { return t.at.Names() }

// value returns the value of name, or ok false if it has none.
func (t xattrTarget) value(name string) (v []byte, ok bool, err error) { return t.at.Value(name) }

// xattrPart selects the attributes one step of applyMeta syncs.
type xattrPart int

const (
	partACL    xattrPart = iota // system.posix_acl_access and _default
	partXattrs                  // user., trusted., security.
)

// managed reports whether the restore owns attribute name in part: it sets
// it as the source has it and removes it if the source has none.
func (w *Writer) managed(part xattrPart, name string) bool {
	if part == partACL {
		return !w.opts.NoACLs && (name == treewalk.XattrACLAccess || name == treewalk.XattrACLDefault)
	}
	if w.opts.NoXattrs || name == "security.selinux" {
		return false
	}
	if !w.chown { // not root: like rsync, only the user namespace
		return strings.HasPrefix(name, "user.")
	}
	return strings.HasPrefix(name, "user.") || strings.HasPrefix(name, "trusted.") || strings.HasPrefix(name, "security.")
}

// wantXattrs returns the attributes of part that e must end up with.
func (w *Writer) wantXattrs(part xattrPart, e *treewalk.Entry) ([]treewalk.Xattr, error) {
	if part == partXattrs {
		if w.opts.NoXattrs {
			return nil, nil
		}
		if w.chown {
			return e.Xattrs, nil
		}
		var out []treewalk.Xattr // not root: trusted. and security. cannot be set
		for _, x := range e.Xattrs {
			if w.managed(partXattrs, x.Name) {
				out = append(out, x)
			}
		}
		return out, nil
	}
	if w.opts.NoACLs || e.Kind == treewalk.KindSymlink {
		return nil, nil
	}
	var out []treewalk.Xattr
	for _, a := range []struct {
		name string
		acl  []treewalk.ACLEntry
	}{{treewalk.XattrACLAccess, e.ACL}, {treewalk.XattrACLDefault, e.DefaultACL}} {
		if len(a.acl) == 0 || a.name == treewalk.XattrACLDefault && e.Kind != treewalk.KindDir {
			continue
		}
		acl, err := w.policy.mapACL(a.acl)
		if err != nil {
			return nil, err
		}
		out = append(out, treewalk.Xattr{Name: a.name, Value: treewalk.EncodeACL(acl)})
	}
	return out, nil
}

// hasXattrs reports whether e carries anything the writer applies as
// xattrs, so that a target with no attributes at all needs nothing.
func (w *Writer) hasXattrs(e *treewalk.Entry) bool {
	return !w.opts.NoXattrs && len(e.Xattrs) > 0 || !w.opts.NoACLs && (len(e.ACL) > 0 || len(e.DefaultACL) > 0)
}

// syncXattrs makes the attributes of part on t those e wants: it sets the
// missing or different ones and removes the managed ones e does not have.
// cur is the target's list of names (xattrTarget.names).
func (w *Writer) syncXattrs(t xattrTarget, cur []string, part xattrPart, e *treewalk.Entry) error {
	want, err := w.wantXattrs(part, e)
	if err != nil {
		return err
	}
	for _, n := range cur {
		if !w.managed(part, n) || hasXattr(want, n) {
			continue
		}
		if err := t.remove(n); err != nil && err != unix.ENODATA {
			return fmt.Errorf("remove xattr %s: %w", n, err)
		}
	}
	for _, x := range want {
		if hasName(cur, x.Name) {
			if v, ok, err := t.value(x.Name); err == nil && ok && bytes.Equal(v, x.Value) {
				continue
			}
		}
		if err := t.set(x.Name, x.Value); err != nil {
			if errors.Is(err, unix.ENOTSUP) {
				return fmt.Errorf("set xattr %s: %w (the destination's file system does not support it; --no-xattrs or --no-acls leave them out)", x.Name, err)
			}
			return fmt.Errorf("set xattr %s: %w", x.Name, err)
		}
	}
	return nil
}

// xattrsMatch reports whether t already has exactly the attributes e
// wants, in every part the restore manages.
func (w *Writer) xattrsMatch(t xattrTarget, e *treewalk.Entry) (bool, error) {
	if w.opts.NoXattrs && w.opts.NoACLs {
		return true, nil
	}
	cur, err := t.names()
	if err != nil {
		return false, err
	}
	for _, part := range []xattrPart{partACL, partXattrs} {
		if ok, err := w.partMatches(t, cur, part, e); !ok || err != nil {
			return false, err
		}
	}
	return true, nil
}

// partMatches reports whether t, whose attribute names are cur, already
// has exactly the attributes of part that e wants.
func (w *Writer) partMatches(t xattrTarget, cur []string, part xattrPart, e *treewalk.Entry) (bool, error) {
	want, err := w.wantXattrs(part, e)
	if err != nil {
		return false, err
	}
	n := 0
	for _, name := range cur {
		if w.managed(part, name) {
			n++
		}
	}
	if n != len(want) {
		return false, nil
	}
	for _, x := range want {
		v, ok, err := t.value(x.Name)
		if err != nil || !ok || !bytes.Equal(v, x.Value) {
			return false, err
		}
	}
	return true, nil
}

func hasXattr(xs []treewalk.Xattr, name string) bool {
	for i := range xs {
		if xs[i].Name == name {
			return true
		}
	}
	return false
}

func hasName(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// mapACL maps the ids of an ACL's named users and groups by name, like
// owners without map rules (see Resolve): the local id of the sender's
// name, or the sender's id with NumericIDs or when the name is unknown
// here. --chown, --usermap and --groupmap do not apply: mapping every named
// entry to one account would merge entries, which the kernel refuses. An
// entry with a name and no id (from a tar archive's ACL text) whose name
// is unknown here is an error.
func (p *OwnerPolicy) mapACL(acl []treewalk.ACLEntry) ([]treewalk.ACLEntry, error) {
	out := make([]treewalk.ACLEntry, len(acl))
	for i, a := range acl {
		out[i] = a
		lookup, what := p.ids.LookupUser, "user"
		switch a.Tag {
		case treewalk.ACLUser:
		case treewalk.ACLGroup:
			lookup, what = p.ids.LookupGroup, "group"
		default:
			continue
		}
		if a.ID == treewalk.ACLUndefinedID {
			id, ok := lookup(a.Name)
			if !ok {
				return nil, fmt.Errorf("ACL names %s %q, which does not exist here", what, a.Name)
			}
			out[i].ID = uint32(id)
			continue
		}
		out[i].ID = uint32(p.unmapped(a.ID, a.Name, lookup))
	}
	return out, nil
}
