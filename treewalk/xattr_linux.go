package treewalk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Extended attributes and POSIX ACLs. Linux has no *at variants of the
// xattr calls before 6.13, so an entry is reached as "/proc/self/fd/N/NAME":
// the kernel resolves the directory descriptor N (the magic link), then NAME
// without following it (the l*xattr calls), so nothing outside the
// directory open at N is ever looked at, whatever the tree holds.

// The extended attributes that hold POSIX ACLs on Linux.
const (
	XattrACLAccess  = "system.posix_acl_access"
	XattrACLDefault = "system.posix_acl_default"
)

// Limits of Linux's xattr calls (linux/limits.h): a name, a value, and the
// list of a file's names.
const (
	XattrNameMax  = 255
	XattrValueMax = 64 << 10
	xattrListMax  = 64 << 10
)

// FdPath returns the path by which the l*xattr calls reach name in the
// directory open at dirfd ("/proc/self/fd/N/NAME"), or that directory
// itself when name is "" ("/proc/self/fd/N/.": the magic link is followed
// as a directory, never as the last component). It is a pure function.
func FdPath(dirfd int, name string) string {
	if name == "" {
		name = "."
	}
	return "/proc/self/fd/" + strconv.Itoa(dirfd) + "/" + name
}

// ListXattrsAt returns every extended attribute of name in the directory
// open at dirfd (of that directory itself when name is ""), not following
// a symlink there, sorted by name, with their values; none where the file
// system has no xattr support (ENOTSUP). Attributes that vanish between
// the list and the read are left out. It uses listxattrat and getxattrat
// (Linux 6.13), else the l*xattr calls on FdPath. Errors are the system
// call's. Safe for concurrent use.
func ListXattrsAt(dirfd int, name string) ([]Xattr, error) {
	a := XattrAt{Dirfd: dirfd, Name: name}
	names, err := a.Names()
	if err != nil || len(names) == 0 {
		return nil, err
	}
	out := make([]Xattr, 0, len(names))
	for _, n := range names {
		v, ok, err := a.Value(n)
		if err != nil {
			return nil, fmt.Errorf("getxattr %s: %w", n, err)
		}
		if ok {
			out = append(out, Xattr{Name: n, Value: v})
		}
	}
	return out, nil
}

// XattrAt reaches the extended attributes of Name in the directory open
// at Dirfd, never following a symlink at Name, or, when Name is "", those
// of the file open at Dirfd itself, whatever its type: listxattrat and
// getxattrat (Linux 6.13), else the l*xattr calls on FdPath (the f*xattr
// calls on Dirfd when Name is ""). No path from outside Dirfd is ever
// resolved. Its methods are safe for concurrent use.
type XattrAt struct {
	Dirfd int
	Name  string
}

// xattrAtMissing is set once on kernels without listxattrat (before 6.13).
var xattrAtMissing atomic.Bool

func (a XattrAt) flags() (string, uintptr) {
	if a.Name == "" {
		return "", unix.AT_SYMLINK_NOFOLLOW | unix.AT_EMPTY_PATH
	}
	return a.Name, unix.AT_SYMLINK_NOFOLLOW
}

// List is listxattr(2): the NUL-separated names into buf, or the size
// needed when buf is empty.
func (a XattrAt) List(buf []byte) (int, error) {
	if !xattrAtMissing.Load() {
		name, flags := a.flags()
		p, err := unix.BytePtrFromString(name)
		if err != nil {
			return 0, err
		}
		var bp unsafe.Pointer
		if len(buf) > 0 {
			bp = unsafe.Pointer(&buf[0])
		}
		r, _, e := unix.Syscall6(unix.SYS_LISTXATTRAT, uintptr(a.Dirfd), uintptr(unsafe.Pointer(p)), flags, uintptr(bp), uintptr(len(buf)), 0)
		if e != unix.ENOSYS {
			if e != 0 {
				return 0, e
			}
			return int(r), nil
		}
		xattrAtMissing.Store(true)
	}
	if a.Name == "" {
		return unix.Flistxattr(a.Dirfd, buf)
	}
	return unix.Llistxattr(FdPath(a.Dirfd, a.Name), buf)
}

// xattrArgs is struct xattr_args of getxattrat(2).
type xattrArgs struct {
	value uint64
	size  uint32
	flags uint32
}

// Get is getxattr(2): the value of attr into buf, or the size needed when
// buf is empty.
func (a XattrAt) Get(attr string, buf []byte) (int, error) {
	if !xattrAtMissing.Load() {
		name, flags := a.flags()
		p, err := unix.BytePtrFromString(name)
		if err != nil {
			return 0, err
		}
		ap, err := unix.BytePtrFromString(attr)
		if err != nil {
			return 0, err
		}
		args := xattrArgs{size: uint32(len(buf))}
		if len(buf) > 0 {
			args.value = uint64(uintptr(unsafe.Pointer(&buf[0])))
		}
		r, _, e := unix.Syscall6(unix.SYS_GETXATTRAT, uintptr(a.Dirfd), uintptr(unsafe.Pointer(p)), flags,
			uintptr(unsafe.Pointer(ap)), uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args))
		runtime.KeepAlive(buf)
		if e != unix.ENOSYS {
			if e != 0 {
				return 0, e
			}
			return int(r), nil
		}
		xattrAtMissing.Store(true)
	}
	if a.Name == "" {
		return unix.Fgetxattr(a.Dirfd, attr, buf)
	}
	return unix.Lgetxattr(FdPath(a.Dirfd, a.Name), attr, buf)
}

// Names lists the names of the extended attributes, sorted; none (and no
// error) where the file system has no xattr support (ENOTSUP). Errors are
// the system call's, wrapped as "listxattr: ...".
func (a XattrAt) Names() ([]string, error) {
	buf := make([]byte, 1<<10)
	for {
		n, err := a.List(buf)
		switch {
		case err == unix.ERANGE && len(buf) < xattrListMax:
			buf = make([]byte, xattrListMax)
			continue
		case err == unix.ENOTSUP:
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("listxattr: %w", err)
		}
		var names []string
		for _, s := range strings.Split(string(buf[:n]), "\x00") {
			if s != "" {
				names = append(names, s)
			}
		}
		slices.Sort(names)
		return names, nil
	}
}

// Value returns the value of the extended attribute attr, of at most
// XattrValueMax bytes, in a new slice; ok is false when there is no such
// attribute (ENODATA). Errors are the system call's.
func (a XattrAt) Value(attr string) (v []byte, ok bool, err error) {
	buf := make([]byte, 4<<10)
	for {
		n, err := a.Get(attr, buf)
		switch {
		case err == unix.ERANGE && len(buf) < XattrValueMax:
			buf = make([]byte, XattrValueMax)
			continue
		case err == unix.ENODATA:
			return nil, false, nil
		case err != nil:
			return nil, false, err
		}
		return slices.Clone(buf[:n]), true, nil
	}
}

// ErrBadACL is wrapped by ParseACL's errors.
var ErrBadACL = errors.New("malformed POSIX ACL")

// aclVersion is the version word of Linux's ACL xattr format.
const aclVersion = 2

// ParseACL decodes the value of a system.posix_acl_* attribute (Linux's
// format: a little-endian u32 version 2, then 8-byte entries of u16 tag,
// u16 perm, u32 id). Names are left empty. It checks the tags, the
// permission bits and the ids' presence; errors wrap ErrBadACL. A pure
// function.
func ParseACL(b []byte) ([]ACLEntry, error) {
	if len(b) < 4 || (len(b)-4)%8 != 0 {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadACL, len(b))
	}
	if v := binary.LittleEndian.Uint32(b); v != aclVersion {
		return nil, fmt.Errorf("%w: version %d", ErrBadACL, v)
	}
	out := make([]ACLEntry, 0, (len(b)-4)/8)
	for b = b[4:]; len(b) > 0; b = b[8:] {
		e := ACLEntry{Tag: binary.LittleEndian.Uint16(b), Perm: binary.LittleEndian.Uint16(b[2:]), ID: binary.LittleEndian.Uint32(b[4:])}
		if err := CheckACLEntry(e); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// CheckACLEntry returns an error wrapping ErrBadACL unless e has a known
// tag, permission bits within 07, and an ID exactly when it is a named
// user or group. A pure function.
func CheckACLEntry(e ACLEntry) error {
	switch e.Tag {
	case ACLUser, ACLGroup:
		if e.ID == ACLUndefinedID {
			return fmt.Errorf("%w: named entry without an id", ErrBadACL)
		}
	case ACLUserObj, ACLGroupObj, ACLMask, ACLOther:
	default:
		return fmt.Errorf("%w: tag %#x", ErrBadACL, e.Tag)
	}
	if e.Perm > 7 {
		return fmt.Errorf("%w: permission bits %#o", ErrBadACL, e.Perm)
	}
	return nil
}

// EncodeACL returns the system.posix_acl_* value of acl (see ParseACL);
// entries keep their order, and the ids of other than named entries are
// written as ACLUndefinedID. A pure function.
func EncodeACL(acl []ACLEntry) []byte {
	b := make([]byte, 4, 4+8*len(acl))
	binary.LittleEndian.PutUint32(b, aclVersion)
	for _, e := range acl {
		id := e.ID
		if e.Tag != ACLUser && e.Tag != ACLGroup {
			id = ACLUndefinedID
		}
		b = binary.LittleEndian.AppendUint16(b, e.Tag)
		b = binary.LittleEndian.AppendUint16(b, e.Perm)
		b = binary.LittleEndian.AppendUint32(b, id)
	}
	return b
}

// readMeta fills e's Xattrs, ACL and DefaultACL from the entry at p.
// Attributes of the "system." namespace other than the ACLs are left out
// (they are not data: NFSv4 ACLs, file system internals).
func (w *walker) readMeta(e *Entry, dirfd int, name string) error {
	attrs, err := ListXattrsAt(dirfd, name)
	if err != nil {
		return err
	}
	for _, a := range attrs {
		switch {
		case a.Name == XattrACLAccess || a.Name == XattrACLDefault:
			acl, err := ParseACL(a.Value)
			if err != nil {
				return fmt.Errorf("%s: %w", a.Name, err)
			}
			for i := range acl {
				switch acl[i].Tag {
				case ACLUser:
					acl[i].Name = w.names.user(acl[i].ID)
				case ACLGroup:
					acl[i].Name = w.names.group(acl[i].ID)
				}
			}
			if a.Name == XattrACLAccess {
				e.ACL = acl
			} else {
				e.DefaultACL = acl
			}
		case strings.HasPrefix(a.Name, "system."):
		default:
			e.Xattrs = append(e.Xattrs, a)
		}
	}
	return nil
}
