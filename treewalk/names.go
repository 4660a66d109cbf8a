package treewalk

import (
	"os/user"
	"strconv"
)

// nameCache maps numeric ids to names on the sending host. Not safe for
// concurrent use: one walk owns one cache.
type nameCache struct {
	users, groups map[uint32]string
}

func newNameCache() *nameCache {
	return &nameCache{users: map[uint32]string{}, groups: map[uint32]string{}}
}

func (c *nameCache) user(id uint32) string {
	if n, ok := c.users[id]; ok {
		return n
	}
	n := ""
	if u, err := user.LookupId(strconv.FormatUint(uint64(id), 10)); err == nil {
		n = u.Username
	}
	c.users[id] = n
	return n
}

func (c *nameCache) group(id uint32) string {
	if n, ok := c.groups[id]; ok {
		return n
	}
	n := ""
	if g, err := user.LookupGroupId(strconv.FormatUint(uint64(id), 10)); err == nil {
		n = g.Name
	}
	c.groups[id] = n
	return n
}
