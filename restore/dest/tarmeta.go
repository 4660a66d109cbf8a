package dest

import (
	"archive/tar"
	"fmt"
	"slices"
	"strings"

	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

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
