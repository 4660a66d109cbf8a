package main

import (
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/transport"
)

// applyAccount resolves --account NAME on this host before anything is
// written: the files get the account's user and group (the group named
// NAME, else the user's primary group), after the explicit --chown,
// --usermap and --groupmap rules (composeAccountOwner), and an existing DST must belong to
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
	composeAccountOwner(&r.Writer.Owner, u.Username, group)
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

// composeAccountOwner adds the account's mapping (every owner to user,
// every group to group) to ow after the rules ow already has, so that an
// explicit rule wins for what it matches and the account's mapping
// applies to the rest: --usermap and --groupmap rules come first (first
// match wins), a side that --chown sets is --chown's alone. Without any
// explicit rule it is --chown USER:GROUP.
func composeAccountOwner(ow *dest.OwnerOptions, user, group string) {
	if ow.Chown == "" && len(ow.Usermap) == 0 && len(ow.Groupmap) == 0 {
		ow.Chown = user + ":" + group
		return
	}
	cu, cg, _ := strings.Cut(ow.Chown, ":")
	if cu == "" {
		ow.Usermap = append(slices.Clone(ow.Usermap), "*:"+user)
	}
	if cg == "" {
		ow.Groupmap = append(slices.Clone(ow.Groupmap), "*:"+group)
	}
}
