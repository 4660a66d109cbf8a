package treewalk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"
)

// What a Difference is about: the values of Difference.What.
const (
	DiffMissing  = "missing"  // in a, not in b; A holds its kind
	DiffExtra    = "extra"    // in b, not in a; B holds its kind
	DiffKind     = "kind"     // file, dir, symlink, ...
	DiffSize     = "size"     // regular file length in bytes
	DiffContent  = "content"  // same size, different bytes (xxh3-128 digests)
	DiffMode     = "mode"     // permission, setuid, setgid and sticky bits
	DiffUID      = "uid"      // numeric owner
	DiffGID      = "gid"      // numeric group
	DiffMtime    = "mtime"    // modification time, to the nanosecond
	DiffTarget   = "target"   // symlink target, as stored
	DiffHardlink = "hardlink" // linked with another path on one side only
	DiffRdev     = "rdev"     // device number of a device node
	DiffXattr    = "xattr"    // an extended attribute or POSIX ACL, by name
	DiffSparse   = "sparse"   // a regular file has holes on one side only
)

// CompareOptions tunes Compare. The zero value compares everything.
type CompareOptions struct {
	// IgnoreOwner skips uid and gid, for copies made without the right to
	// chown.
	IgnoreOwner bool
	// IgnoreDirTimes skips directories' mtimes, which a copier that does not
	// restore them last gets wrong.
	IgnoreDirTimes bool
	// IgnoreRootDir skips the mode, owner and mtime of the roots themselves,
	// which are usually made by whoever set up the comparison.
	IgnoreRootDir bool
	// MaxDiffs stops the comparison after that many differences; 0 means no
	// limit.
	MaxDiffs int
	// IgnoreXattrs skips extended attributes and POSIX ACLs, for copies
	// made without them (rsync without -X -A, tar without --xattrs).
	IgnoreXattrs bool
	// IgnoreSparse skips the sparseness of regular files, for copies that
	// fill holes (rsync without -S, cp --sparse=never).
	IgnoreSparse bool
}

// Difference is one way in which the trees differ at Path.
type Difference struct {
	// Path is slash-separated and relative to the roots; "." is the root.
	Path string
	// What is one of the Diff* constants.
	What string
	// A and B are the values found in each tree, formatted for people
	// (modes in octal, times in RFC 3339 UTC with nanoseconds, symlink
	// targets quoted); empty where the entry does not exist.
	A, B string
}

// String returns "PATH: WHAT A != B", such as "wp-config.php: mode 0600 !=
// 0644", or "PATH: missing (KIND only in a)" and "PATH: extra (KIND only in
// b)".
func (d Difference) String() string {
	switch d.What {
	case DiffMissing:
		return fmt.Sprintf("%s: missing (%s only in a)", d.Path, d.A)
	case DiffExtra:
		return fmt.Sprintf("%s: extra (%s only in b)", d.Path, d.B)
	}
	return fmt.Sprintf("%s: %s %s != %s", d.Path, d.What, d.A, d.B)
}

// Compare walks the trees at a and b side by side and returns how b differs
// from a, sorted by path: entries present on one side only (reported once,
// at the top of a missing or extra subtree), kinds, regular files' sizes and
// contents (xxh3-128 of both sides), permission bits including setuid,
// setgid and sticky, uid and gid, mtimes to the nanosecond (symlinks'
// own, directories' too), symlink targets, device numbers, hardlink
// groups of every kind but directories (two paths that share an inode in
// one tree must share one in the other: regular files, symlinks, fifos,
// devices), extended attributes and POSIX ACLs (every name and value, the
// "system." namespace included, one difference per name), and sparseness:
// a regular file that allocates fewer bytes than its size (it has holes)
// must do so on both sides, and b's copy of a sparse file must not
// allocate more than a's plus 64 KiB.
//
// Compare never follows symlinks, the roots included: every entry is
// reached from its parent directory's descriptor with O_NOFOLLOW and
// AT_SYMLINK_NOFOLLOW, so a tree that changes during the comparison cannot
// lead it outside a or b. It walks the trees itself rather than through
// Walk, so that a bug in the walker cannot hide in the check of its own
// output. Both roots must be directories (ErrNotDir otherwise). Any error
// reading either tree stops the comparison; the error names the path. With
// o.MaxDiffs set, Compare stops after that many differences (found in walk
// order) and returns them sorted. Cancelling ctx returns ctx.Err().
//
// Memory: the names of one directory per level, plus about 100 bytes per
// file with more than one link. Safe for concurrent use on any trees.
func Compare(ctx context.Context, a, b string, o CompareOptions) ([]Difference, error) {
	c := &comparer{name: [2]string{a, b}, o: o, buf: make([]byte, 1<<20)}
	var roots [2]*os.File
	for s, name := range c.name {
		c.hashes[s] = map[cmpInode]xxh3.Uint128{}
		fd, err := unix.Open(name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			err = ErrNotDir
		}
		if err != nil {
			return nil, fmt.Errorf("compare %s: %w", name, err)
		}
		roots[s] = os.NewFile(uintptr(fd), name)
		defer roots[s].Close()
	}
	st, err := c.stat(roots, ".")
	if err != nil {
		return nil, err
	}
	if _, err := c.entry(ctx, roots, ".", ".", st); err != nil {
		return nil, err
	}
	if err := c.dir(ctx, roots, "."); err != nil {
		return nil, err
	}
	c.hardlinks()
	if o.MaxDiffs > 0 && len(c.diffs) > o.MaxDiffs {
		c.diffs = c.diffs[:o.MaxDiffs]
	}
	slices.SortStableFunc(c.diffs, func(x, y Difference) int {
		return cmp.Or(cmp.Compare(x.Path, y.Path), cmp.Compare(x.What, y.What))
	})
	return c.diffs, nil
}

// cmpInode identifies an inode on one side.
type cmpInode struct{ dev, ino uint64 }

// cmpLinked is a path that is of the same kind, not a directory, on both
// sides and has more than one link on at least one of them.
type cmpLinked struct {
	path string
	ino  [2]cmpInode
}

// comparer holds the state of one Compare; index 0 is tree a, 1 is tree b.
// Not safe for concurrent use.
type comparer struct {
	name   [2]string
	hashes [2]map[cmpInode]xxh3.Uint128 // digests of multiply-linked inodes
	o      CompareOptions
	diffs  []Difference
	links  []cmpLinked
	buf    []byte
}

func (c *comparer) full() bool { return c.o.MaxDiffs > 0 && len(c.diffs) >= c.o.MaxDiffs }

func (c *comparer) add(p, what, a, b string) {
	c.diffs = append(c.diffs, Difference{Path: p, What: what, A: a, B: b})
}

// fail wraps err with side s's full path for rel.
func (c *comparer) fail(s int, rel string, err error) error {
	return fmt.Errorf("compare %s: %w", filepath.Join(c.name[s], filepath.FromSlash(rel)), err)
}

// stat returns the Lstat of name in each side's directory dirs.
func (c *comparer) stat(dirs [2]*os.File, rel string) ([2]unix.Stat_t, error) {
	var st [2]unix.Stat_t
	name := path.Base(rel)
	for s := range dirs {
		if err := unix.Fstatat(int(dirs[s].Fd()), name, &st[s], unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return st, c.fail(s, rel, err)
		}
	}
	return st, nil
}

// dir compares the contents of directory rel, open on both sides as dirs,
// and recurses into the subdirectories present on both.
func (c *comparer) dir(ctx context.Context, dirs [2]*os.File, rel string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var names [2][]string
	for s := range dirs {
		var err error
		if names[s], err = dirs[s].Readdirnames(-1); err != nil {
			return c.fail(s, rel, err)
		}
		slices.Sort(names[s])
	}
	na, nb := names[0], names[1]
	for (len(na) > 0 || len(nb) > 0) && !c.full() {
		var name string
		inA, inB := false, false
		switch {
		case len(nb) == 0 || len(na) > 0 && na[0] < nb[0]:
			name, na, inA = na[0], na[1:], true
		case len(na) == 0 || nb[0] < na[0]:
			name, nb, inB = nb[0], nb[1:], true
		default:
			name, na, nb, inA, inB = na[0], na[1:], nb[1:], true, true
		}
		child := name
		if rel != "." {
			child = rel + "/" + name
		}
		if !inA || !inB {
			s := 0
			if inB {
				s = 1
			}
			var st unix.Stat_t
			if err := unix.Fstatat(int(dirs[s].Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return c.fail(s, child, err)
			}
			if inA {
				c.add(child, DiffMissing, cmpKindName(st.Mode), "")
			} else {
				c.add(child, DiffExtra, "", cmpKindName(st.Mode))
			}
			continue
		}
		st, err := c.stat(dirs, child)
		if err != nil {
			return err
		}
		both, err := c.entry(ctx, dirs, name, child, st)
		if err != nil {
			return err
		}
		if both {
			if err := c.subdir(ctx, dirs, name, child); err != nil {
				return err
			}
		}
	}
	return nil
}

// subdir opens directory name of dirs on both sides, without following a
// symlink that might have replaced it, and compares its contents.
func (c *comparer) subdir(ctx context.Context, dirs [2]*os.File, name, rel string) error {
	var sub [2]*os.File
	for s := range dirs {
		fd, err := unix.Openat(int(dirs[s].Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if s == 1 {
				sub[0].Close()
			}
			return c.fail(s, rel, err)
		}
		sub[s] = os.NewFile(uintptr(fd), rel)
	}
	defer sub[0].Close()
	defer sub[1].Close()
	return c.dir(ctx, sub, rel)
}

// entry compares the attributes of rel (called name in dirs), present on
// both sides with Lstat results st, and reports whether it is a directory on
// both (so its contents are to be compared).
func (c *comparer) entry(ctx context.Context, dirs [2]*os.File, name, rel string, st [2]unix.Stat_t) (bool, error) {
	sa, sb := &st[0], &st[1]
	ka, kb := sa.Mode&unix.S_IFMT, sb.Mode&unix.S_IFMT
	if ka != kb {
		c.add(rel, DiffKind, cmpKindName(sa.Mode), cmpKindName(sb.Mode))
		return false, nil
	}
	isDir := ka == unix.S_IFDIR
	if rel == "." && c.o.IgnoreRootDir {
		return isDir, nil
	}
	if ma, mb := sa.Mode&0o7777, sb.Mode&0o7777; ka != unix.S_IFLNK && ma != mb {
		c.add(rel, DiffMode, fmt.Sprintf("%04o", ma), fmt.Sprintf("%04o", mb))
	}
	if !c.o.IgnoreOwner {
		if sa.Uid != sb.Uid {
			c.add(rel, DiffUID, strconv.FormatUint(uint64(sa.Uid), 10), strconv.FormatUint(uint64(sb.Uid), 10))
		}
		if sa.Gid != sb.Gid {
			c.add(rel, DiffGID, strconv.FormatUint(uint64(sa.Gid), 10), strconv.FormatUint(uint64(sb.Gid), 10))
		}
	}
	if ta, tb := sa.Mtim.Nano(), sb.Mtim.Nano(); ta != tb && !(isDir && c.o.IgnoreDirTimes) {
		c.add(rel, DiffMtime, cmpTime(ta), cmpTime(tb))
	}
	if !c.o.IgnoreXattrs {
		if err := c.xattrs(dirs, name, rel); err != nil {
			return false, err
		}
	}
	if !isDir && (sa.Nlink > 1 || sb.Nlink > 1) {
		// Every kind but a directory can be hardlinked: devices, fifos
		// and symlinks too (rsync -H links them).
		c.links = append(c.links, cmpLinked{path: rel, ino: [2]cmpInode{{uint64(sa.Dev), sa.Ino}, {uint64(sb.Dev), sb.Ino}}})
	}
	switch ka {
	case unix.S_IFREG:
		if !c.o.IgnoreSparse {
			c.sparse(rel, sa, sb)
		}
		return false, c.file(ctx, dirs, name, rel, sa, sb)
	case unix.S_IFLNK:
		var target [2]string
		for s := range dirs {
			var err error
			if target[s], err = c.readlink(dirs[s], name); err != nil {
				return false, c.fail(s, rel, err)
			}
		}
		if target[0] != target[1] {
			c.add(rel, DiffTarget, strconv.Quote(target[0]), strconv.Quote(target[1]))
		}
	case unix.S_IFCHR, unix.S_IFBLK:
		if sa.Rdev != sb.Rdev {
			c.add(rel, DiffRdev, strconv.FormatUint(uint64(sa.Rdev), 10), strconv.FormatUint(uint64(sb.Rdev), 10))
		}
	}
	return isDir, nil
}

// readlink returns the target of symlink name in dir.
func (c *comparer) readlink(dir *os.File, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(int(dir.Fd()), name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// file compares the size and contents of regular file rel (name in dirs).
func (c *comparer) file(ctx context.Context, dirs [2]*os.File, name, rel string, sa, sb *unix.Stat_t) error {
	ino := [2]cmpInode{{uint64(sa.Dev), sa.Ino}, {uint64(sb.Dev), sb.Ino}}
	if sa.Size != sb.Size {
		c.add(rel, DiffSize, strconv.FormatInt(sa.Size, 10), strconv.FormatInt(sb.Size, 10))
		return nil
	}
	if sa.Size == 0 || ino[0] == ino[1] {
		return nil // nothing to read, or the very same inode
	}
	var sum [2]xxh3.Uint128
	for s, st := range [2]*unix.Stat_t{sa, sb} {
		var err error
		if sum[s], err = c.hash(ctx, s, dirs[s], name, ino[s], st.Nlink > 1); err != nil {
			return c.fail(s, rel, err)
		}
	}
	if sum[0] != sum[1] {
		c.add(rel, DiffContent, cmpDigest(sum[0]), cmpDigest(sum[1]))
	}
	return nil
}

// hash returns the xxh3-128 digest of regular file name in dir on side s,
// whose Lstat found inode ino; linked inodes are hashed once.
func (c *comparer) hash(ctx context.Context, s int, dir *os.File, name string, ino cmpInode, linked bool) (xxh3.Uint128, error) {
	if sum, ok := c.hashes[s][ino]; ok {
		return sum, nil
	}
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return xxh3.Uint128{}, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	// The entry might have been replaced since Lstat: hash only that inode.
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return xxh3.Uint128{}, err
	}
	if uint64(st.Dev) != ino.dev || st.Ino != ino.ino {
		return xxh3.Uint128{}, errors.New("changed during comparison")
	}
	h := xxh3.New()
	for {
		if err := ctx.Err(); err != nil {
			return xxh3.Uint128{}, err
		}
		n, err := f.Read(c.buf)
		h.Write(c.buf[:n])
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return xxh3.Uint128{}, err
		}
	}
	sum := h.Sum128()
	if linked {
		c.hashes[s][ino] = sum
	}
	return sum, nil
}

// hardlinks reports the paths whose link groups differ: for each group of
// paths sharing an inode on one side, every member must share the leader's
// (the smallest path's) inode on the other side too. Paths of every kind
// but directories count (files, symlinks, fifos, devices) when they are
// of the same kind on both sides; the rest are reported already.
func (c *comparer) hardlinks() {
	for s := range 2 {
		other := 1 - s
		groups := map[cmpInode][]cmpLinked{}
		for _, l := range c.links {
			groups[l.ino[s]] = append(groups[l.ino[s]], l)
		}
		for _, l := range c.links {
			g := groups[l.ino[s]]
			leader := slices.MinFunc(g, func(x, y cmpLinked) int { return cmp.Compare(x.path, y.path) })
			if l.path == leader.path || l.ino[other] == leader.ino[other] {
				continue
			}
			linked, unlinked := "linked to "+strconv.Quote(leader.path), "not linked to "+strconv.Quote(leader.path)
			if s == 0 {
				c.add(l.path, DiffHardlink, linked, unlinked)
			} else {
				c.add(l.path, DiffHardlink, unlinked, linked)
			}
		}
	}
}

// cmpKindName names the kind of an entry from its st_mode: a Kind's name,
// or "socket".
func cmpKindName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return KindFile.String()
	case unix.S_IFDIR:
		return KindDir.String()
	case unix.S_IFLNK:
		return KindSymlink.String()
	case unix.S_IFIFO:
		return KindFifo.String()
	case unix.S_IFCHR:
		return KindCharDev.String()
	case unix.S_IFBLK:
		return KindBlkDev.String()
	case unix.S_IFSOCK:
		return "socket"
	}
	return "unknown"
}

// cmpTime formats nanoseconds since the epoch with all nine digits, so that
// a difference of 1 ns shows.
func cmpTime(ns int64) string {
	return time.Unix(0, ns).UTC().Format("2006-01-02T15:04:05.000000000Z")
}

// cmpDigest formats an xxh3-128 digest in hex.
func cmpDigest(u xxh3.Uint128) string {
	b := u.Bytes()
	return fmt.Sprintf("xxh3:%x", b[:])
}

// sparse compares the sparseness of regular file rel: holes on both sides
// or on neither, and b allocating at most a's bytes plus 64 KiB (extent
// blocks) when a has holes.
func (c *comparer) sparse(rel string, sa, sb *unix.Stat_t) {
	alloc := func(st *unix.Stat_t) int64 { return st.Blocks * 512 }
	holes := func(st *unix.Stat_t) bool { return alloc(st) < st.Size }
	if holes(sa) != holes(sb) || holes(sa) && alloc(sb) > alloc(sa)+64<<10 {
		c.add(rel, DiffSparse, fmt.Sprintf("%d of %d bytes allocated", alloc(sa), sa.Size), fmt.Sprintf("%d of %d bytes allocated", alloc(sb), sb.Size))
	}
}

// xattrs compares the extended attributes of name in dirs, one difference
// per attribute name that is missing on a side or has another value.
func (c *comparer) xattrs(dirs [2]*os.File, name, rel string) error {
	var m [2]map[string]string
	for s := range dirs {
		n := name
		if rel == "." {
			n = ""
		}
		attrs, err := ListXattrsAt(int(dirs[s].Fd()), n)
		if err != nil {
			return c.fail(s, rel, err)
		}
		m[s] = make(map[string]string, len(attrs))
		for _, a := range attrs {
			m[s][a.Name] = string(a.Value)
		}
	}
	var names []string
	for n := range m[0] {
		names = append(names, n)
	}
	for n := range m[1] {
		if _, ok := m[0][n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		va, oka := m[0][n]
		vb, okb := m[1][n]
		if oka != okb || va != vb {
			c.add(rel, DiffXattr, cmpXattr(n, va, oka), cmpXattr(n, vb, okb))
		}
	}
	return nil
}

// cmpXattr formats an attribute for a Difference: "NAME=VALUE" (quoted),
// or "no NAME".
func cmpXattr(name, value string, ok bool) string {
	if !ok {
		return "no " + name
	}
	return name + "=" + strconv.Quote(value)
}
