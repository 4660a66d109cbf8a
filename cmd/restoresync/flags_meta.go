package main

import "github.com/spf13/pflag"

// addMetaFlags registers the flags of what a restore preserves besides
// contents, owners, modes and times. Everything is on by default (a
// restore is exact, like rsync -aHAXS); rsync's --no-OPTION names turn a
// part off, and rsync's -A, -X, -S, -H, -D are accepted for habit.
func (o *restoreOptions) addMetaFlags(f *pflag.FlagSet) {
	w := &o.opts.Writer
	var on bool
	f.BoolVarP(&on, "acls", "A", true, "accepted for rsync habit: POSIX ACLs are always restored (see --no-acls)")
	f.BoolVarP(&on, "xattrs", "X", true, "accepted for rsync habit: extended attributes are always restored (see --no-xattrs)")
	f.BoolVarP(&on, "sparse", "S", true, "accepted for rsync habit: sparse files are always restored sparse (see --no-sparse)")
	f.BoolVarP(&on, "hard-links", "H", true, "accepted for rsync habit: hardlinks are always restored")
	f.BoolVarP(&on, "devices", "D", true, "accepted for rsync habit (-D is --devices --specials): devices are restored unless --no-devices")
	f.BoolVar(&on, "specials", true, "accepted for rsync habit: fifos are restored unless --no-specials")
	f.BoolVar(&w.NoACLs, "no-acls", false, "do not restore POSIX ACLs (leave DST's as they are)")
	f.BoolVar(&w.NoXattrs, "no-xattrs", false, "do not restore extended attributes (leave DST's as they are)")
	f.BoolVar(&w.NoSparse, "no-sparse", false, "write the zeros of sparse files instead of leaving holes")
	f.BoolVar(&w.NoSpecials, "no-specials", false, "do not restore fifos (sockets are never restored)")
	f.BoolVar(&w.NoDevices, "no-devices", false, "do not restore character and block devices")
}
