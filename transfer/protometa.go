package transfer

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/restoresync/restoresync/treewalk"
)

// Extended metadata of an entry on the wire (the "more" field of the entry
// encoding in proto.go): xattrs, POSIX ACLs and the sparse flag.

// more writes en's "more" field and what it announces.
func (e *encoder) more(prev, en *treewalk.Entry) {
	var more uint64
	if len(en.Xattrs) > 0 {
		more |= entryMoreXattrs
	}
	switch {
	case len(en.ACL) > 0 && slices.Equal(en.ACL, prev.ACL):
		more |= entryMoreSameACL
	case len(en.ACL) > 0:
		more |= entryMoreACL
	}
	switch {
	case len(en.DefaultACL) > 0 && slices.Equal(en.DefaultACL, prev.DefaultACL):
		more |= entryMoreSameDefaultACL
	case len(en.DefaultACL) > 0:
		more |= entryMoreDefaultACL
	}
	if en.Sparse {
		more |= entryMoreSparse
	}
	e.uvarint(more)
	if more&entryMoreXattrs != 0 {
		e.uvarint(uint64(len(en.Xattrs)))
		for _, x := range en.Xattrs {
			e.str(x.Name)
			e.bytes(x.Value)
		}
	}
	if more&entryMoreACL != 0 {
		e.acl(en.ACL)
	}
	if more&entryMoreDefaultACL != 0 {
		e.acl(en.DefaultACL)
	}
}

func (e *encoder) acl(acl []treewalk.ACLEntry) {
	e.uvarint(uint64(len(acl)))
	for _, a := range acl {
		e.uvarint(uint64(a.Tag))
		e.uvarint(uint64(a.Perm))
		e.uvarint(uint64(a.ID))
		e.str(a.Name)
	}
}

// more reads the "more" field of en (written after prev) and validates
// what it announces: xattr names in a namespace a restore carries, sorted
// and unique, within the kernel's limits; ACL entries with known tags and
// bits; the sparse flag only on a regular file.
func (d *decoder) more(prev, en *treewalk.Entry) error {
	more, err := d.uvarint()
	if err != nil {
		return err
	}
	if more == 0 || more&^entryMoreMask != 0 || more&entryMoreACL != 0 && more&entryMoreSameACL != 0 ||
		more&entryMoreDefaultACL != 0 && more&entryMoreSameDefaultACL != 0 {
		return fmt.Errorf("%w: metadata flags %#x", ErrProtocol, more)
	}
	if more&entryMoreXattrs != 0 {
		if en.Xattrs, err = d.xattrs(); err != nil {
			return err
		}
	}
	switch {
	case more&entryMoreSameACL != 0:
		if len(prev.ACL) == 0 {
			return fmt.Errorf("%w: same ACL as an entry without one", ErrProtocol)
		}
		en.ACL = prev.ACL
	case more&entryMoreACL != 0:
		if en.ACL, err = d.acl(); err != nil {
			return err
		}
	}
	switch {
	case more&entryMoreSameDefaultACL != 0:
		if len(prev.DefaultACL) == 0 {
			return fmt.Errorf("%w: same default ACL as an entry without one", ErrProtocol)
		}
		en.DefaultACL = prev.DefaultACL
	case more&entryMoreDefaultACL != 0:
		if en.DefaultACL, err = d.acl(); err != nil {
			return err
		}
	}
	if en.DefaultACL != nil && en.Kind != treewalk.KindDir {
		return fmt.Errorf("%w: default ACL on a %s", ErrProtocol, en.Kind)
	}
	if en.ACL != nil && en.Kind == treewalk.KindSymlink {
		return fmt.Errorf("%w: ACL on a symlink", ErrProtocol)
	}
	en.Sparse = more&entryMoreSparse != 0
	if en.Sparse && en.Kind != treewalk.KindFile {
		return fmt.Errorf("%w: sparse flag on a %s", ErrProtocol, en.Kind)
	}
	return nil
}

func (d *decoder) xattrs() ([]treewalk.Xattr, error) {
	n, err := d.uvarint()
	if err != nil {
		return nil, err
	}
	if n == 0 || n > maxXattrs {
		return nil, fmt.Errorf("%w: %d xattrs", ErrProtocol, n)
	}
	out := make([]treewalk.Xattr, 0, min(n, 64))
	total := 0
	for range n {
		name, err := d.limited(treewalk.XattrNameMax, "xattr name")
		if err != nil {
			return nil, err
		}
		if err := ValidXattrName(string(name)); err != nil {
			return nil, err
		}
		if k := len(out); k > 0 && out[k-1].Name >= string(name) {
			return nil, fmt.Errorf("%w: xattr %q out of order or repeated", ErrProtocol, name)
		}
		value, err := d.limited(treewalk.XattrValueMax, "xattr value")
		if err != nil {
			return nil, err
		}
		if total += len(value); total > maxXattrValueBytes {
			return nil, fmt.Errorf("%w: xattr values over %d bytes", ErrProtocol, maxXattrValueBytes)
		}
		out = append(out, treewalk.Xattr{Name: string(name), Value: value})
	}
	return out, nil
}

// ValidXattrName returns an error wrapping ErrProtocol unless name is one
// a file list may carry: "user.", "trusted." or "security." and a
// non-empty rest, at most 255 bytes, no NUL. ("system." attributes travel
// as ACLs or not at all.) A pure function.
func ValidXattrName(name string) error {
	ok := len(name) <= treewalk.XattrNameMax && strings.IndexByte(name, 0) < 0
	rest := ""
	if ok {
		var found bool
		for _, ns := range []string{"user.", "trusted.", "security."} {
			if r, f := strings.CutPrefix(name, ns); f {
				rest, found = r, true
			}
		}
		ok = found && rest != ""
	}
	if !ok {
		return fmt.Errorf("%w: xattr name %q", ErrProtocol, name)
	}
	return nil
}

func (d *decoder) acl() ([]treewalk.ACLEntry, error) {
	n, err := d.uvarint()
	if err != nil {
		return nil, err
	}
	if n == 0 || n > maxACLEntries {
		return nil, fmt.Errorf("%w: ACL of %d entries", ErrProtocol, n)
	}
	out := make([]treewalk.ACLEntry, 0, min(n, 64))
	for range n {
		var v [3]uint64
		for i := range v {
			if v[i], err = d.uvarint(); err != nil {
				return nil, err
			}
		}
		if v[0] > 0xffff || v[1] > 0xffff || v[2] > 0xffffffff {
			return nil, fmt.Errorf("%w: ACL entry out of range", ErrProtocol)
		}
		a := treewalk.ACLEntry{Tag: uint16(v[0]), Perm: uint16(v[1]), ID: uint32(v[2])}
		if err := treewalk.CheckACLEntry(a); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		name, err := d.limited(256, "ACL name")
		if err != nil {
			return nil, err
		}
		a.Name = string(name)
		out = append(out, a)
	}
	return out, nil
}

// limited reads a length-prefixed byte string of at most max bytes.
func (d *decoder) limited(max int, what string) ([]byte, error) {
	n, err := d.uvarint()
	if err != nil {
		return nil, err
	}
	if n > uint64(max) {
		return nil, fmt.Errorf("%w: %s of %d bytes (at most %d)", ErrProtocol, what, n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.fr, b); err != nil {
		return nil, unexpected(err)
	}
	return b, nil
}
