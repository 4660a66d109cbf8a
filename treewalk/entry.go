package treewalk

import (
	"fmt"
	"time"
)

// Kind is the type of a file-list entry.
type Kind uint8

// The kinds of entry a file list carries. The numeric values are part of the
// wire format (transfer encodes Kind as one byte) and must not change.
const (
	KindFile    Kind = 1 // regular file
	KindDir     Kind = 2 // directory
	KindSymlink Kind = 3 // symbolic link; LinkTarget holds its target
	KindFifo    Kind = 4 // named pipe
	KindCharDev Kind = 5 // character device; Rdev holds its number
	KindBlkDev  Kind = 6 // block device; Rdev holds its number
)

// String returns the kind's lower-case name ("file", "dir", ...).
func (k Kind) String() string {
	switch k {
	case KindFile:
		return "file"
	case KindDir:
		return "dir"
	case KindSymlink:
		return "symlink"
	case KindFifo:
		return "fifo"
	case KindCharDev:
		return "chardev"
	case KindBlkDev:
		return "blkdev"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Entry is one item of a file list: what the sender found at Path and
// everything the receiver needs to recreate it. It is a plain value, safe to
// copy and to share read-only between goroutines.
type Entry struct {
	// Path is relative to the walked root, slash-separated, cleaned, never
	// absolute and never containing "..". The root itself is ".".
	Path string
	// Kind is the entry's type.
	Kind Kind
	// Mode holds the permission bits and the setuid, setgid and sticky bits,
	// in Unix numeric form (07777 mask), not an fs.FileMode.
	Mode uint32
	// Uid and Gid are the numeric owner and group on the sender.
	Uid, Gid uint32
	// User and Group are the owner's and group's names on the sender, or ""
	// when the id has no name there. The receiver maps by name, like rsync.
	User, Group string
	// Size is the length in bytes of a regular file's contents; 0 otherwise.
	Size int64
	// MtimeNs is the modification time in nanoseconds since the Unix epoch.
	MtimeNs int64
	// LinkTarget is a symlink's target, exactly as stored (not resolved).
	LinkTarget string
	// LinkTo, when not empty, makes this entry a hardlink to the earlier
	// entry with that Path (the group's leader, of the same Kind, which
	// carries the data and the extended metadata). Any kind but KindDir
	// may have it; a symlink follower keeps its LinkTarget and a device
	// follower its Rdev, both the leader's.
	LinkTo string
	// Rdev is a device node's device number (Linux encoding); 0 otherwise.
	Rdev uint64

	// Extended metadata (rsync's -X, -A and -S), each empty for most
	// entries.

	// Xattrs are the entry's extended attributes, sorted by name, except
	// the "system." namespace (POSIX ACLs travel in ACL and DefaultACL).
	// Values are raw bytes (security.capability is binary).
	Xattrs []Xattr
	// ACL is the POSIX access ACL (system.posix_acl_access), all its
	// entries including the base ones; nil when the file has none (its
	// mode says it all).
	ACL []ACLEntry
	// DefaultACL is a directory's POSIX default ACL
	// (system.posix_acl_default); nil when it has none.
	DefaultACL []ACLEntry
	// Sparse says that a regular file allocates fewer bytes on the sender
	// than its size: it has holes, which the receiver recreates.
	Sparse bool
}

// Xattr is one extended attribute: its full name with the namespace
// ("user.mime_type", "security.capability") and its raw value.
type Xattr struct {
	Name  string
	Value []byte
}

// ACLEntry is one entry of a POSIX ACL, as Linux stores it in the
// system.posix_acl_* extended attributes (tag, permission bits, id), plus
// the name of a named user's or group's id on the sender, by which the
// receiver maps it like an owner.
type ACLEntry struct {
	// Tag is one of the ACLUserObj ... ACLOther constants.
	Tag uint16
	// Perm holds the read (4), write (2) and execute (1) bits.
	Perm uint16
	// ID is the uid (ACLUser) or gid (ACLGroup); ACLUndefinedID otherwise.
	ID uint32
	// Name is the user or group name of ID on the sender, "" if it has none
	// there or for the other tags.
	Name string
}

// ACL entry tags, as in Linux's posix_acl_xattr.h (and libacl's acl.h).
const (
	ACLUserObj  uint16 = 0x01 // the owner
	ACLUser     uint16 = 0x02 // a named user (ID)
	ACLGroupObj uint16 = 0x04 // the owning group
	ACLGroup    uint16 = 0x08 // a named group (ID)
	ACLMask     uint16 = 0x10 // the mask of the group class
	ACLOther    uint16 = 0x20 // everyone else
	// ACLUndefinedID is the ID of the entries that have none.
	ACLUndefinedID uint32 = 0xffffffff
)

// Mtime returns MtimeNs as a time.Time.
func (e *Entry) Mtime() time.Time { return time.Unix(0, e.MtimeNs) }

// IsHardlink reports whether e is a hardlink to an earlier entry.
func (e *Entry) IsHardlink() bool { return e.LinkTo != "" }

// HasData reports whether e is a regular file whose contents must be sent
// (a hardlink follower gets its data through its leader).
func (e *Entry) HasData() bool { return e.Kind == KindFile && e.LinkTo == "" }
