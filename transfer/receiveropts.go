package transfer

// ReceiverOptions are the receiver's options of a push, sent by the client
// in Hello.Receiver and handed to ServerConfig.NewSink. They are a wire
// type: every field has an explicit JSON name, and a receiver refuses a
// Hello with a field it does not know (ErrProtocol, naming the field), so
// that an option such as --numeric-ids is never dropped silently between
// two versions. Renaming a field's JSON name changes the protocol
// (ProtocolVersion). The zero value is restore's default: owners mapped by
// name, default block and buffer sizes, everything carried.
type ReceiverOptions struct {
	// Owner is the ownership and permission policy.
	Owner ReceiverOwner `json:"owner"`
	// BlockSizeBytes: files larger than this are split into blocks of
	// this size, which may arrive on different streams; 0 means the
	// receiver's default (16 MiB).
	BlockSizeBytes int64 `json:"block_size"`
	// WriteBufferBytes is the buffer between the network and each file
	// write; 0 means the receiver's default (1 MiB).
	WriteBufferBytes int `json:"write_buffer"`
	// Force deletes a non-empty directory in the way of a file or symlink
	// (rsync's --force).
	Force bool `json:"force,omitempty"`
	// Delta asks the receiver to send, with its plan, the signatures of
	// its copies of needed files, so their data can come as deltas.
	Delta bool `json:"delta,omitempty"`
	// DryRun opens the destination only to compare it with a file list
	// (--dry-run, --itemize-changes): nothing is written.
	DryRun bool `json:"dry_run,omitempty"`
	// Roots are the file-list paths of the SRCs: the scope of --delete
	// and of itemized deletions.
	Roots []string `json:"roots,omitempty"`
	// Filters are the restore's include/exclude rules in short form
	// ("+ PATTERN", "- PATTERN"); what they exclude is protected from
	// --delete.
	Filters []string `json:"filters,omitempty"`
	// NoXattrs, NoACLs, NoSparse, NoSpecials and NoDevices are
	// --no-xattrs, --no-acls, --no-sparse, --no-specials, --no-devices.
	NoXattrs   bool `json:"no_xattrs,omitempty"`
	NoACLs     bool `json:"no_acls,omitempty"`
	NoSparse   bool `json:"no_sparse,omitempty"`
	NoSpecials bool `json:"no_specials,omitempty"`
	NoDevices  bool `json:"no_devices,omitempty"`
}

// ReceiverOwner holds the receiver's ownership and permission options on the
// wire, as rsync(1) spells them; restore.OwnerOptions documents their
// meaning and syntax, and the receiver checks them (a bad value fails
// NewSink). The zero value maps owners by name and keeps the sender's
// modes.
type ReceiverOwner struct {
	// NumericIDs is --numeric-ids.
	NumericIDs bool `json:"numeric_ids,omitempty"`
	// Chown is --chown=USER:GROUP, "" when not given.
	Chown string `json:"chown,omitempty"`
	// Usermap and Groupmap are the values of --usermap and --groupmap, in
	// the order given.
	Usermap  []string `json:"usermap,omitempty"`
	Groupmap []string `json:"groupmap,omitempty"`
	// Chmod holds the values of --chmod, in the order given.
	Chmod []string `json:"chmod,omitempty"`
	// ChmodUmask is the client's umask (permission bits, at most 0777;
	// JSON number, 18 for 022), with which the receiver resolves the
	// Chmod items that name no class ("+w", "D=rX"), as rsync resolves
	// --chmod on the client. The client sends it with Chmod; nil (a client
	// that predates it) means the receiver's own umask. A receiver that
	// predates it refuses the Hello (unknown field), rather than apply
	// its own umask.
	ChmodUmask *uint32 `json:"chmod_umask,omitempty"`
	// KeepSetID keeps setuid and setgid bits when an owner is changed.
	KeepSetID bool `json:"keep_setid,omitempty"`
}
