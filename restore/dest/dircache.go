package dest

import (
	"fmt"
	"path"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/restoresync/restoresync/treewalk"
)

// dirCacheMax bounds the directory descriptors the data path keeps open:
// enough for every stream's current directory and the next few, far
// below any descriptor limit.
const dirCacheMax = 64

// dirCache keeps the descriptors of the directories WriteItem and Commit
// write into, keyed by their path beneath DST, so that the files of one
// directory share one resolution (openat2 RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS, as every other path of the Writer) instead of one
// each. A descriptor names the directory that was at that path when it was
// opened: files land in that directory even if it is renamed meanwhile,
// as with one open per file, where the window is one file long. The
// Writer itself never removes a directory that files of the list are
// written into. At most dirCacheMax descriptors are kept while idle; the
// least recently used idle one is closed first. Safe for concurrent use.
type dirCache struct {
	mu    sync.Mutex
	dirs  map[string]*cachedDir
	clock uint64
}

// cachedDir is one open directory of a dirCache.
type cachedDir struct {
	path string
	fd   int
	// defaultACL says that the directory has a default ACL (or that
	// it could not be read): a file made in it inherits an access ACL,
	// so its xattrs are listed before they are set.
	defaultACL bool
	// noTmpfile says that the directory's file system refused O_TMPFILE:
	// its files are made under their temporary names.
	noTmpfile atomic.Bool

	refs    int    // users between get and release; guarded by dirCache.mu
	used    uint64 // dirCache.clock at the last get
	evicted bool   // out of the map: closed at the last release
}

// splitPath returns the directory of rel ("." for the root) and its last
// component.
func splitPath(rel string) (dir, base string) {
	dir, base = path.Split(rel)
	if dir == "" {
		return ".", base
	}
	return dir[:len(dir)-1], base
}

// get returns the open directory dir beneath w's DST, opening it if it is
// not cached. The caller releases it.
func (c *dirCache) get(w *Writer, dir string) (*cachedDir, error) {
	c.mu.Lock()
	if d, ok := c.dirs[dir]; ok {
		d.refs++
		c.clock++
		d.used = c.clock
		c.mu.Unlock()
		return d, nil
	}
	c.mu.Unlock()

	fd, err := openDirBeneath(w.rootFd, dir)
	if err != nil {
		return nil, fmt.Errorf("open directory %s: %w", dir, err)
	}
	d := &cachedDir{path: dir, fd: fd, refs: 1}
	if !w.opts.NoACLs {
		_, err := unix.Fgetxattr(fd, treewalk.XattrACLDefault, nil)
		d.defaultACL = err != unix.ENODATA && err != unix.ENOTSUP
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if other, ok := c.dirs[dir]; ok { // opened meanwhile by another stream
		unix.Close(fd)
		other.refs++
		return other, nil
	}
	if c.dirs == nil {
		c.dirs = map[string]*cachedDir{}
	}
	c.clock++
	d.used = c.clock
	c.dirs[dir] = d
	c.evictLocked()
	return d, nil
}

// evictLocked closes idle descriptors, least recently used first, until
// at most dirCacheMax are cached; those in use are left alone.
func (c *dirCache) evictLocked() {
	for len(c.dirs) > dirCacheMax {
		var lru *cachedDir
		for _, d := range c.dirs {
			if d.refs == 0 && (lru == nil || d.used < lru.used) {
				lru = d
			}
		}
		if lru == nil {
			return
		}
		delete(c.dirs, lru.path)
		unix.Close(lru.fd)
	}
}

// release ends a use of d that get began.
func (c *dirCache) release(d *cachedDir) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d.refs--
	if d.refs == 0 && d.evicted {
		unix.Close(d.fd)
		return
	}
	c.evictLocked()
}

// closeAll closes every cached descriptor; those in use are closed at
// their release.
func (c *dirCache) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, d := range c.dirs {
		delete(c.dirs, p)
		if d.refs == 0 {
			unix.Close(d.fd)
		} else {
			d.evicted = true
		}
	}
}
