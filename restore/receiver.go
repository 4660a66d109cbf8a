package restore

import (
	"context"

	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/transfer"
)

// The receiver's options of a push cross the wire as transfer's
// ReceiverOptions, a type of the protocol, never as WriterOptions: a Go
// field renamed here must not change the bytes on the wire. The two
// conversions below are the only place that maps one onto the other;
// TestReceiverOptionsRoundTrip fails when a field of WriterOptions or
// OwnerOptions is added without them.

// receiverOptions returns the wire form of o, for Hello.Receiver. With
// --chmod and no Owner.ChmodUmask, it carries this process's umask, so the
// receiver resolves the items that name no class ("+w") with the client's
// umask, as rsync does.
func receiverOptions(o dest.WriterOptions) transfer.ReceiverOptions {
	umask := copyUmask(o.Owner.ChmodUmask)
	if umask == nil && len(o.Owner.Chmod) > 0 {
		u := dest.ProcessUmask()
		umask = &u
	}
	return transfer.ReceiverOptions{
		Owner: transfer.ReceiverOwner{
			NumericIDs: o.Owner.NumericIDs,
			Chown:      o.Owner.Chown,
			Usermap:    o.Owner.Usermap,
			Groupmap:   o.Owner.Groupmap,
			Chmod:      o.Owner.Chmod,
			ChmodUmask: umask,
			KeepSetID:  o.Owner.KeepSetID,
		},
		BlockSizeBytes:   o.BlockSizeBytes,
		WriteBufferBytes: o.WriteBufferBytes,
		Force:            o.Force,
		Delta:            o.Delta,
		DryRun:           o.DryRun,
		Roots:            o.Roots,
		Filters:          o.Filters,
		NoXattrs:         o.NoXattrs,
		NoACLs:           o.NoACLs,
		NoSparse:         o.NoSparse,
		NoSpecials:       o.NoSpecials,
		NoDevices:        o.NoDevices,
	}
}

// writerOptions returns the WriterOptions a receiver's wire options ask
// for; NewWriter checks them.
func writerOptions(r transfer.ReceiverOptions) dest.WriterOptions {
	return dest.WriterOptions{
		Owner: dest.OwnerOptions{
			NumericIDs: r.Owner.NumericIDs,
			Chown:      r.Owner.Chown,
			Usermap:    r.Owner.Usermap,
			Groupmap:   r.Owner.Groupmap,
			Chmod:      r.Owner.Chmod,
			ChmodUmask: copyUmask(r.Owner.ChmodUmask),
			KeepSetID:  r.Owner.KeepSetID,
		},
		BlockSizeBytes:   r.BlockSizeBytes,
		WriteBufferBytes: r.WriteBufferBytes,
		Force:            r.Force,
		Delta:            r.Delta,
		DryRun:           r.DryRun,
		Roots:            r.Roots,
		Filters:          r.Filters,
		NoXattrs:         r.NoXattrs,
		NoACLs:           r.NoACLs,
		NoSparse:         r.NoSparse,
		NoSpecials:       r.NoSpecials,
		NoDevices:        r.NoDevices,
	}
}

// copyUmask returns a copy of *u, or nil: the two option structs never
// share a umask.
func copyUmask(u *uint32) *uint32 {
	if u == nil {
		return nil
	}
	c := *u
	return &c
}

// NewSink is transfer.ServerConfig.NewSink for a push: it opens a Writer
// on dst with the client's receiver options. Its errors are NewWriter's (a
// bad owner option or filter, a dst that cannot be made or opened). Safe
// for concurrent use: each call opens a Writer of its own.
func NewSink(ctx context.Context, dst string, opts transfer.ReceiverOptions) (transfer.Sink, error) {
	w, err := dest.NewWriter(dst, writerOptions(opts))
	if err != nil {
		return nil, err // not a nil *Writer in a non-nil Sink
	}
	return w, nil
}
