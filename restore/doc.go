// Package restore runs restores: it joins a source and a destination, one of
// which may be remote, and moves the tree with the chosen method (raw: file
// list, quick check, parallel streams). Every write into a destination
// tree goes through the safe writer of package restore/dest, whose doc
// says what it guarantees.
//
// Delta (the raw method over a network): for a needed file that DST holds
// as a regular file, Plan takes the signature of that copy (the basis); the
// data then comes as a delta, rebuilt into the temporary file from the
// basis, opened without following symlinks, and checked against the
// sender's hash before the rename. A delta that fails (the basis changed,
// the hash differs) is sent again whole, in the same run.
//
// Selection (selection.go; dest's delete.go, itemize.go): several SRCs, -R,
// --files-from and include/exclude rules choose what the sender lists;
// Writer.Delete removes what DST has and the list lacks, below the
// restored SRCs only, never what the rules exclude, with the same
// no-symlink resolution; Writer.Itemize compares a list with DST and
// writes nothing (--dry-run). An interrupted --delete leaves some extras
// in place: a rerun removes them.
//
// What an interruption leaves behind (a dropped stream, a dead agent,
// cancellation): completed files in place, and directories with mode 0700
// and the current time as mtime. The writer removes the temporary file of a
// file that fails, and on Close those of split files not committed; only a
// writer that is killed leaves temporary files. Cancelling Run's context
// tears the streams down at once. A rerun skips the completed files (quick
// check: same size and mtime), truncates and reuses the temporary files it
// needs, removes the stale ones and sets every directory's metadata.
//
// Per-file failures (an unreadable or changed source file, a full or
// read-only destination, a --verify mismatch) are reported and the run goes
// on; connection, protocol and timeout failures (transfer.ErrConnect,
// ErrProtocol, ErrTimeout) end it.
package restore
