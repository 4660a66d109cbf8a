package dest

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/restoresync/restoresync/treewalk"
)

// xattrChanges compares e's extended metadata with t, what DST has, for
// the itemized letters 'a' (POSIX ACLs, rsync's -A) and 'x' (other
// extended attributes, -X), as rsync compares them: access says that the
// access ACL differs by more than what the mode carries, def that a
// directory's default ACL differs, xattrs that an attribute of the
// namespaces the restore manages differs, is missing or is extra. Parts
// the options leave out never differ; a target that cannot be read
// differs.
func (w *Writer) xattrChanges(t xattrTarget, e *treewalk.Entry) (access, def, xattrs bool) {
	if w.opts.NoXattrs && w.opts.NoACLs {
		return false, false, false
	}
	cur, err := t.names()
	if err != nil {
		return !w.opts.NoACLs && e.Kind != treewalk.KindSymlink, false, !w.opts.NoXattrs
	}
	if !w.opts.NoXattrs {
		ok, err := w.partMatches(t, cur, partXattrs, e)
		xattrs = !ok || err != nil
	}
	if w.opts.NoACLs || e.Kind == treewalk.KindSymlink {
		return false, false, xattrs
	}
	want, err := w.wantXattrs(partACL, e)
	if err != nil {
		return true, false, xattrs
	}
	value := func(name string) []byte {
		if !hasName(cur, name) {
			return nil
		}
		v, ok, err := t.value(name)
		if err != nil || !ok {
			return nil
		}
		return v
	}
	wanted := func(name string) []byte {
		for _, x := range want {
			if x.Name == name {
				return x.Value
			}
		}
		return nil
	}
	access = aclKey(value(treewalk.XattrACLAccess)) != aclKey(wanted(treewalk.XattrACLAccess))
	def = e.Kind == treewalk.KindDir && !bytes.Equal(value(treewalk.XattrACLDefault), wanted(treewalk.XattrACLDefault))
	return access, def, xattrs
}

// aclKey is what rsync compares of an access ACL (its
// rsync_acl_equal_enough): the named users' and groups' entries and, when
// there is a mask, the owning group's entry; the owner's, the other's and
// the mask's bits are the mode's ('p'). No ACL, or a minimal one, is "".
func aclKey(v []byte) string {
	if len(v) == 0 {
		return ""
	}
	acl, err := treewalk.ParseACL(v)
	if err != nil {
		return "bad"
	}
	var b strings.Builder
	var group uint16
	mask := false
	for _, a := range acl {
		switch a.Tag {
		case treewalk.ACLUser, treewalk.ACLGroup:
			fmt.Fprintf(&b, "%d:%d:%d,", a.Tag, a.ID, a.Perm)
		case treewalk.ACLGroupObj:
			group = a.Perm
		case treewalk.ACLMask:
			mask = true
		}
	}
	if mask {
		fmt.Fprintf(&b, "group:%d", group)
	}
	return b.String()
}
