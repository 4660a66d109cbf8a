package dest

// WriterOptions configure a Writer. The zero value is valid: owners mapped
// by name, 16 MiB blocks, 1 MiB write buffers.
type WriterOptions struct {
	// Owner is the ownership and permission policy (--numeric-ids,
	// --chown, --usermap, --groupmap, --chmod, --keep-setid).
	Owner OwnerOptions
	// BlockSizeBytes: files larger than this are split into blocks of this
	// size that may arrive on different streams; 0 means 16 MiB.
	BlockSizeBytes int64
	// WriteBufferBytes is the buffer between the network and each file
	// write; 0 means 1 MiB.
	WriteBufferBytes int
	// Force deletes a non-empty directory that is in the way of a file or
	// symlink (rsync's --force); without it that entry fails with
	// ErrNonEmptyDir.
	Force bool
	// Delta makes Plan compute the signatures of the destination's copies
	// of needed files, so that they can be sent as deltas (the raw method
	// over a network sets it). Off: every needed file is sent whole.
	Delta bool

	// Selection (--delete, --dry-run, --itemize-changes).
	//
	// DryRun opens DST only to compare it with a file list (Itemize):
	// nothing is created, written or deleted, and a missing DST reads as
	// empty. Plan, WriteItem, Commit, Finish and Delete must not be
	// called.
	DryRun bool
	// Roots are the restored scope for Delete and Itemize: the file-list
	// paths of the SRCs ("." for a whole tree restored as DST). Only below
	// those that the list has as directories is anything deleted.
	Roots []string
	// Filters are the include/exclude rules of the restore, in short form
	// ("+ PATTERN", "- PATTERN"): an entry of DST that they exclude is
	// protected from Delete, as rsync does without --delete-excluded.
	Filters []string

	// Extended metadata (rsync's -X, -A, -S; all on by default here).

	// NoXattrs (--no-xattrs) leaves extended attributes alone: the
	// source's are not set, and those DST has are kept.
	NoXattrs bool
	// NoACLs (--no-acls) likewise for POSIX ACLs.
	NoACLs bool
	// NoSparse (--no-sparse) writes the zeros of sparse files instead of
	// leaving holes.
	NoSparse bool
	// NoSpecials (--no-specials) and NoDevices (--no-devices) leave fifos,
	// and character and block devices, out: Finish does not create them,
	// and whatever DST holds there is left alone.
	NoSpecials bool
	NoDevices  bool

	// MtimeSeconds compares mtimes to the second, for a source whose
	// times have no fraction (SFTP version 3, the sftp method): Plan's
	// quick check, Itemize's 't' and the up-to-date test of symlinks and
	// special files take a DST entry whose mtime falls in the listed
	// second as having the listed mtime. Off: to the nanosecond.
	MtimeSeconds bool
}

// ApplyDefaults fills the zero fields of o with their defaults (NewWriter
// does it too): 16 MiB blocks, 1 MiB write buffers.
func (o *WriterOptions) ApplyDefaults() {
	if o.BlockSizeBytes <= 0 {
		o.BlockSizeBytes = DefaultBlockSize // spreads big files over streams, bounds one item's time
	}
	if o.WriteBufferBytes <= 0 {
		// Few syscalls, still small times --jobs. Measured (README,
		// Tuning): 256 KiB, 1 MiB and 4 MiB within the runs' spread on
		// the hosting and bigfile trees (22.5 and 44.0 MiB/s at 1 MiB,
		// 23.3 and 48.8 at 4 MiB, ±30%), so not 4 MiB, which holds four
		// times the memory per file in flight.
		o.WriteBufferBytes = 1 << 20
	}
}

// DefaultBlockSize is the default --block-size: 16 MiB. Measured (README,
// Tuning): a 205 MiB file over a loopback sshd, -j 4, moved at 46 MiB/s
// with 16 MiB blocks against 35 with 4 MiB (more requests, more commits)
// and 38 with 64 MiB (fewer blocks than streams for a while).
const DefaultBlockSize = 16 << 20
