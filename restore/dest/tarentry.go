package dest

import (
	"archive/tar"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// tarPath turns an archive name into a file-list path: "./" prefixes and a
// trailing slash are dropped, and what is left must pass
// treewalk.ValidPath.
func tarPath(name string) (string, error) {
	p := name
	for strings.HasPrefix(p, "./") {
		p = p[2:]
	}
	p = strings.TrimSuffix(p, "/")
	if p == "" && name != "" {
		p = "."
	}
	if err := treewalk.ValidPath(p); err != nil {
		return "", fmt.Errorf("tar entry name %q: %w", name, err)
	}
	return p, nil
}

// entryOf converts a tar header into a file-list entry.
func entryOf(hdr *tar.Header, p string) (treewalk.Entry, error) {
	e := treewalk.Entry{
		Path:    p,
		Mode:    uint32(hdr.Mode) & 0o7777,
		User:    hdr.Uname,
		Group:   hdr.Gname,
		MtimeNs: hdr.ModTime.UnixNano(),
	}
	if hdr.Mode < 0 || hdr.Uid < 0 || hdr.Gid < 0 || int64(hdr.Uid) > 1<<32-1 || int64(hdr.Gid) > 1<<32-1 {
		return e, fmt.Errorf("mode or owner out of range (mode %o, uid %d, gid %d)", hdr.Mode, hdr.Uid, hdr.Gid)
	}
	e.Uid, e.Gid = uint32(hdr.Uid), uint32(hdr.Gid)
	switch hdr.Typeflag {
	case tar.TypeDir:
		e.Kind = treewalk.KindDir
	case tar.TypeReg, tar.TypeRegA, tar.TypeCont, tar.TypeGNUSparse:
		e.Kind, e.Size = treewalk.KindFile, hdr.Size
		if e.Size < 0 {
			return e, fmt.Errorf("negative size %d", e.Size)
		}
	case tar.TypeLink:
		lp, err := tarPath(hdr.Linkname)
		if err != nil || lp == "." {
			return e, fmt.Errorf("hardlink target %q leaves the archive's tree or is not a clean relative path", hdr.Linkname)
		}
		e.Kind, e.LinkTo = treewalk.KindFile, lp
	case tar.TypeSymlink:
		if hdr.Linkname == "" || strings.IndexByte(hdr.Linkname, 0) >= 0 {
			return e, errors.New("symlink without a valid target")
		}
		e.Kind, e.LinkTarget = treewalk.KindSymlink, hdr.Linkname
	case tar.TypeFifo:
		e.Kind = treewalk.KindFifo
	case tar.TypeChar, tar.TypeBlock:
		e.Kind = treewalk.KindCharDev
		if hdr.Typeflag == tar.TypeBlock {
			e.Kind = treewalk.KindBlkDev
		}
		if hdr.Devmajor < 0 || hdr.Devmajor > 1<<32-1 || hdr.Devminor < 0 || hdr.Devminor > 1<<32-1 {
			return e, fmt.Errorf("device number %d,%d out of range", hdr.Devmajor, hdr.Devminor)
		}
		e.Rdev = unix.Mkdev(uint32(hdr.Devmajor), uint32(hdr.Devminor))
	default:
		return e, fmt.Errorf("unsupported tar entry type %q", hdr.Typeflag)
	}
	if p == "." && e.Kind != treewalk.KindDir {
		return e, fmt.Errorf("a %s cannot replace the destination directory", e.Kind)
	}
	return e, tarMeta(hdr, &e)
}

// tarMeta fills e's extended metadata from the pax records of hdr, as GNU
// tar and the tar-sender write them (see transfer/taracl.go): xattrs
// (SCHILY.xattr.*; "system." ones other than the ACLs are not carried),
// ACLs (SCHILY.acl.*, else the raw system.posix_acl_* xattrs), and the
// sparse flag (ours, or GNU tar's sparse records). An archive is untrusted:
// names and sizes are checked as the wire protocol checks them.
func tarMeta(hdr *tar.Header, e *treewalk.Entry) error {
	var rawACL, rawDefault string
	for k, v := range hdr.PAXRecords {
		switch {
		case strings.HasPrefix(k, transfer.TarXattrPrefix):
			name := k[len(transfer.TarXattrPrefix):]
			switch name {
			case treewalk.XattrACLAccess:
				rawACL = v
				continue
			case treewalk.XattrACLDefault:
				rawDefault = v
				continue
			}
			if strings.HasPrefix(name, "system.") {
				continue
			}
			if err := transfer.ValidXattrName(name); err != nil {
				return fmt.Errorf("xattr %q: not one a restore carries", name)
			}
			if len(v) > treewalk.XattrValueMax {
				return fmt.Errorf("xattr %s: %d bytes, more than Linux allows", name, len(v))
			}
			e.Xattrs = append(e.Xattrs, treewalk.Xattr{Name: name, Value: []byte(v)})
		case k == transfer.TarACLAccess || k == transfer.TarACLDefault:
			acl, err := transfer.ParseACLText(v)
			if err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			if k == transfer.TarACLAccess {
				e.ACL = acl
			} else {
				e.DefaultACL = acl
			}
		case k == transfer.TarSparse || strings.HasPrefix(k, "GNU.sparse."):
			e.Sparse = e.Kind == treewalk.KindFile && e.LinkTo == ""
		}
	}
	slices.SortFunc(e.Xattrs, func(a, b treewalk.Xattr) int { return strings.Compare(a.Name, b.Name) })
	for _, raw := range []struct {
		v   string
		dst *[]treewalk.ACLEntry
	}{{rawACL, &e.ACL}, {rawDefault, &e.DefaultACL}} {
		if raw.v == "" || *raw.dst != nil {
			continue
		}
		acl, err := treewalk.ParseACL([]byte(raw.v))
		if err != nil {
			return err
		}
		*raw.dst = acl
	}
	if len(e.ACL) > 8192 || len(e.DefaultACL) > 8192 || len(e.Xattrs) > 4096 {
		return fmt.Errorf("too many xattrs or ACL entries")
	}
	if e.Kind != treewalk.KindDir {
		e.DefaultACL = nil
	}
	if e.Kind == treewalk.KindSymlink {
		e.ACL = nil
	}
	return nil
}
