// Package dest is the safe writer: the only code that writes into a
// destination tree (DST), whichever method restores it. The raw method's
// streams write through a Writer (it implements transfer.Sink, ItemWriter,
// BasisOpener and ChunkChanger), tar streams through an Extractor,
// and the rsync method's files, placed by gokrazy/rsync's receiver, are
// completed by Writer.FixRsync. It imports treewalk, transfer (for the
// protocol types it implements) and the standard library only, so what
// can write into DST is auditable here.
//
// Guarantees of the safe writer:
//   - nothing is written outside DST, and no symlink found on DST is
//     followed: paths are resolved with openat2 (RESOLVE_BENEATH |
//     RESOLVE_NO_SYMLINKS), final components with O_NOFOLLOW /
//     AT_SYMLINK_NOFOLLOW; xattrs are read and written on an open
//     descriptor, or through /proc/self/fd/DIRFD/NAME, never a path from
//     DST's root;
//   - a file appears under its final name only complete and with its
//     owner, mode and mtime already set: it is written to an unnamed
//     file in its directory (O_TMPFILE), its metadata is set on the open
//     descriptor, then it is linked into place (linkat, which never
//     replaces a name); where the file system has no O_TMPFILE, or the
//     file replaces one DST has, it is written to a temporary name
//     (".restoresync-<hash>.tmp") and renamed into place;
//   - each directory the data path writes into is resolved once (with the
//     rules above) and its descriptor kept in a small bounded cache, so a
//     small file new to DST costs six system calls (open, write, chown,
//     mtime, link, close), with chmod only when the umask or an ACL
//     changes its mode and no xattr listing for a file just made (see
//     item.go, dircache.go);
//   - directory modes and mtimes are set after their contents, deepest
//     first; symlinks, hardlinks (of files, symlinks, fifos and devices),
//     empty files and empty directories are recreated as such, and a
//     hardlink group's new name is linked to a member DST holds up to
//     date instead of being sent;
//   - extended attributes and POSIX ACLs are set with the rest of the
//     metadata, in rsync's order but with xattrs after chown (owner, ACLs,
//     mode, xattrs, mtime: see xattr_linux.go), and files that had holes
//     get holes where their blocks are zero (sparse.go), unless
//     WriterOptions say otherwise;
//   - owners and modes are a pure function of the entry and the options
//     (OwnerPolicy: --numeric-ids, --chown, --usermap, --groupmap,
//     --chmod, as rsync(1) defines them);
//   - a delta is rebuilt into the temporary file from DST's copy (the
//     basis, opened without following symlinks and checked to be the
//     regular file its signature was made from) and must match the
//     sender's hash before the rename;
//   - Delete and DeleteIn remove only below the restored roots, never what
//     the filters exclude, never through a symlink, in rsync's order;
//     Itemize, ItemizeDeletesIn, an Itemizer and a DryRun Writer write
//     nothing;
//   - a tar archive is untrusted: every entry is checked before anything is
//     written (see extract.go).
//
// Concurrency: WriteItem, Commit and OpenBasis are safe for concurrent use
// by any number of streams, and several Writers (in several processes) may
// work on one DST, as the streams of a push do. Plan, Finish, FixRsync,
// RsyncQuickCheck, Delete and Itemize are passes over a file list (DeleteIn
// and an Itemizer's Lines over a directory or a chunk of it): call
// each from one goroutine, Plan before the items are written, Finish after
// all of them. Plan and Finish may also be given a list in pieces (the raw
// method's chunks, in list order, Plan and Finish on two goroutines): each
// piece is planned before its items are written, and a piece given to
// Finish holds entries whose data, and the data of everything beneath its
// directories, is all placed (a hardlink's leader too); a hardlink group
// is then only looked at within a piece (a new name is linked to a member
// DST holds up to date only when that member is in the leader's piece). An Extractor takes one goroutine per tar stream.
//
// What an interruption leaves behind (a dropped stream, cancellation, a
// killed process): completed files in place under their final names, and
// the directories Plan made with their final owner, their final mode plus
// rwx for that owner (interimDirMode) and the current time as mtime; a DST
// this Writer created is owned from NewWriter on by the owner the policy
// gives a root-owned directory (the account's with --chown), and from Plan
// on has the "." entry's owner and interim mode, or for a list without a
// "." entry the mode mkdir gave it. A file that fails has
// its temporary file removed at once (an unnamed one never had a name);
// Close removes those of split files not committed; only a killed writer
// leaves named temporary files. A rerun skips the completed files (quick
// check: same size and mtime), truncates and reuses the temporary names
// it needs, and its Finish removes the stale ones and sets every
// directory's metadata. An interrupted Delete
// leaves some extras, which a rerun removes.
//
// A restore through a Writer, the raw method:
//
//	w := NewWriter(dst, opts)            // DST made (mkdir 0777, owner-only, chowned) if missing, opened
//	plan := w.Plan(ctx, entries)         // mkdir (final owner, interim mode), quick check, split temps, signatures
//	for each item of plan.Need, on any stream:
//	    w.WriteItem(ctx, item, data)     // unnamed temp, metadata on the fd, link
//	for each split file, once its blocks are in:
//	    w.Commit(ctx, entry)             // metadata on the fd, rename
//	w.Delete(ctx, entries)               // --delete: extras below the roots
//	                                     // (or w.DeleteIn(ctx, dir, names) per directory
//	                                     // whose listing is complete: a streamed list)
//	w.Finish(ctx, entries)               // symlinks, specials, hardlinks; dirs deepest first
//	w.Close()                            // uncommitted split temps removed
//
// The tar method: NewExtractor, Extract per stream, Finish, Close. The
// rsync method: NewWriter, ClearForRsync (a non-empty directory in the
// way of a file or symlink, replaced with Force, else that entry's error),
// RsyncQuickCheck, RsyncMakeDirs, the rsync transfer, FixRsync, Finish,
// Close.
//
// Files: doc.go — this overview; errors.go — ErrNonEmptyDir,
// ErrUnknownName, SpecError and the parse errors; options.go —
// WriterOptions and their defaults; writer.go — Writer, NewWriter, Close,
// temporary names, metadata on a descriptor; cursor.go — the directory
// cursor and the pass over a file list; plan.go — Plan (mkdir with
// the final owner, quick check); item.go — WriteItem, Commit, OpenBasis, split files, unnamed
// temporary files; dircache.go — the data path's directory descriptors;
// signatures.go — basis signatures for deltas; finish.go — Finish
// (symlinks, special files, hardlinks, directory metadata); hardlink.go
// — hardlink groups, linking a name to a member DST holds up to date
// (no data sent); delete.go —
// Delete, DeleteIn, ItemizeDeletesIn (--delete), rsync's order of
// deletion; itemize.go — Itemize, Itemizer (--itemize-changes, --dry-run);
// chunkchanges.go — ChunkChanges: --delete, --dry-run and -i of a list
// streamed in chunks, for a pull's client and a push's receiver alike;
// itemize_way.go — the deletions of a directory in the way of a file;
// itemize_xattr.go — the 'a' and 'x' letters; escape.go —
// EscapeItemized, names printed as rsync prints them;
// fs_linux.go — symlink-proof *at operations, linking unnamed files;
// xattr_linux.go — xattrs and
// ACLs on DST; sparse.go — holes; owner.go — OwnerPolicy, IDLookup;
// idmap.go — --usermap, --groupmap; chmod.go — --chmod; extract.go —
// Extractor; extractentry.go — one archive entry's checks and writes;
// tarentry.go — tar header to file-list entry, pax metadata; rsyncfix.go
// — ClearForRsync, RsyncQuickCheck, RsyncMakeDirs, FixRsync.
package dest
