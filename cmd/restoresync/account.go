package main

import (
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"syscall"

	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/transport"
)

// applyAccount resolves --account NAME on this host before anything is
// written: the files get the account's user and group (the group named
// NAME, else the user's primary group) through --chown unless --chown,
// --usermap or --groupmap say otherwise, and an existing DST must belong to
// the account's user unless --ignore-dst-owner (an empty DST owned by root,
// as mkdir or an interrupted run leaves it, is accepted). DST must be
// local: the account is looked up here.
func (o *restoreOptions) applyAccount(r *restore.Options) error {
	name := o.ops.account
	if name == "" {
		return nil
	}
	dst, err := transport.ParseLocation(r.Dst)
	if err != nil {
		return nil // restore.Run says what is wrong with DST
	}
	if dst.Remote() {
		return &usageError{fmt.Sprintf("--account %s: DST must be local (the account is looked up on this host); run restoresync on the web server and pull", name)}
	}
	u, err := user.Lookup(name)
	if err != nil {
		return &usageError{fmt.Sprintf("--account %s: %v", name, err)}
	}
	group := name
	if _, err := user.LookupGroup(name); err != nil {
		group = u.Gid
		if g, err := user.LookupGroupId(u.Gid); err == nil {
			group = g.Name
		}
	}
	ow := &r.Writer.Owner
	if ow.Chown == "" && len(ow.Usermap) == 0 && len(ow.Groupmap) == 0 {
		ow.Chown = u.Username + ":" + group
	}
	fi, err := os.Stat(dst.Path)
	if err != nil || o.ops.ignoreDstOwner {
		return nil // a DST that does not exist yet is made for the account
	}
	uid := fi.Sys().(*syscall.Stat_t).Uid
	if uid == 0 && isEmptyDir(dst.Path) {
		return nil // made by mkdir, or by a run interrupted before its chown
	}
	if strconv.FormatUint(uint64(uid), 10) != u.Uid {
		owner := strconv.FormatUint(uint64(uid), 10)
		if ou, err := user.LookupId(owner); err == nil {
			owner = ou.Username + " (uid " + owner + ")"
		} else {
			owner = "uid " + owner
		}
		return &exitError{exitUsage, fmt.Errorf("DST %s is owned by %s, not by account %s (uid %s): refusing to restore into it (--ignore-dst-owner to do it anyway)",
			dst.Path, owner, name, u.Uid)}
	}
	return nil
}

// isEmptyDir reports whether dir is a directory with no entries.
func isEmptyDir(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	return err == io.EOF && len(names) == 0
}
