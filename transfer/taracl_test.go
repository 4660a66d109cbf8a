package transfer

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/treewalk"
)

// ACL text as GNU tar 1.34 wrote it (SCHILY.acl.access of a file with
// setfacl -m u:nobody:r--,g:daemon:rw-), star's form with ids, and the
// short form, parse; ours formats back to GNU tar's.
func TestACLText(t *testing.T) {
	gnu := "user::rw-\nuser:nobody:r--\ngroup::r--\ngroup:daemon:rw-\nmask::rw-\nother::r--\n"
	acl, err := ParseACLText(gnu)
	if err != nil {
		t.Fatal(err)
	}
	u := treewalk.ACLUndefinedID
	want := []treewalk.ACLEntry{
		{Tag: treewalk.ACLUserObj, Perm: 6, ID: u}, {Tag: treewalk.ACLUser, Perm: 4, ID: u, Name: "nobody"},
		{Tag: treewalk.ACLGroupObj, Perm: 4, ID: u}, {Tag: treewalk.ACLGroup, Perm: 6, ID: u, Name: "daemon"},
		{Tag: treewalk.ACLMask, Perm: 6, ID: u}, {Tag: treewalk.ACLOther, Perm: 4, ID: u},
	}
	if !reflect.DeepEqual(acl, want) {
		t.Fatalf("ParseACLText(GNU tar's) = %+v", acl)
	}
	if got := FormatACLText(acl); got != gnu {
		t.Errorf("FormatACLText = %q, want %q", got, gnu)
	}
	star, err := ParseACLText("user::rwx,user:alice:r-x:1001,group::r-x,group:33:rwx,mask::rwx,other::---")
	if err != nil || star[1].ID != 1001 || star[1].Name != "alice" || star[3].ID != 33 || star[3].Name != "" {
		t.Errorf("star's form: %+v, %v", star, err)
	}
	short, err := ParseACLText("u::rw,g::r, o::- # comment\nm::rw")
	if err != nil || len(short) != 4 || short[0].Perm != 6 || short[3].Tag != treewalk.ACLMask {
		t.Errorf("short form: %+v, %v", short, err)
	}
	for _, bad := range []string{"user", "user::rwz", "mask:alice:r", "bogus::r", "user:a:r:notanid", "user:a:b:c:d"} {
		if _, err := ParseACLText(bad); !errors.Is(err, ErrACLText) {
			t.Errorf("ParseACLText(%q) = %v, want ErrACLText", bad, err)
		}
	}
}

// A hostile entry's extended metadata is a protocol error: names outside
// the carried namespaces, out of order, too long; values too large; bad
// ACL tags; a default ACL on a file; the sparse flag on a directory.
func TestEntryMetaRejects(t *testing.T) {
	base := func(e *encoder, kind treewalk.Kind, more uint64) {
		e.byte(entryMore)
		e.uvarint(0)
		e.str("x")
		e.byte(byte(kind))
		e.uvarint(0o644)
		e.uvarint(0)
		e.uvarint(0)
		e.str("")
		e.str("")
		e.varint(0)
		e.varint(0)
		e.str("")
		e.str("")
		e.uvarint(0)
		e.uvarint(more)
	}
	xattrs := func(names ...string) func(e *encoder) {
		return func(e *encoder) {
			base(e, treewalk.KindFile, entryMoreXattrs)
			e.uvarint(uint64(len(names)))
			for _, n := range names {
				e.str(n)
				e.str("v")
			}
		}
	}
	for name, fn := range map[string]func(e *encoder){
		"system xattr": xattrs("system.posix_acl_access"),
		"no namespace": xattrs("mime_type"),
		"empty name":   xattrs("user."),
		"NUL":          xattrs("user.a\x00b"),
		"long name":    xattrs("user." + strings.Repeat("n", 300)),
		"unsorted":     xattrs("user.b", "user.a"),
		"repeated":     xattrs("user.a", "user.a"),
		"none":         xattrs(),
		"huge value": func(e *encoder) {
			base(e, treewalk.KindFile, entryMoreXattrs)
			e.uvarint(1)
			e.str("user.a")
			e.uvarint(1 << 30)
		},
		"bad ACL tag": func(e *encoder) {
			base(e, treewalk.KindFile, entryMoreACL)
			e.uvarint(1)
			e.uvarint(0x40)
			e.uvarint(7)
			e.uvarint(0)
			e.str("")
		},
		"huge ACL": func(e *encoder) {
			base(e, treewalk.KindFile, entryMoreACL)
			e.uvarint(1 << 40)
		},
		"default ACL on a file": func(e *encoder) {
			base(e, treewalk.KindFile, entryMoreDefaultACL)
			e.uvarint(1)
			e.uvarint(uint64(treewalk.ACLOther))
			e.uvarint(7)
			e.uvarint(uint64(treewalk.ACLUndefinedID))
			e.str("")
		},
		"same ACL as nothing": func(e *encoder) { base(e, treewalk.KindFile, entryMoreSameACL) },
		"sparse dir":          func(e *encoder) { base(e, treewalk.KindDir, entryMoreSparse) },
		"unknown bits":        func(e *encoder) { base(e, treewalk.KindFile, 1<<20) },
		"empty more":          func(e *encoder) { base(e, treewalk.KindFile, 0) },
	} {
		_, err := decodeMessages(t, fn, func(d *decoder) (any, error) { return d.entry() })
		if !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want a protocol error", name, err)
		}
	}
}
