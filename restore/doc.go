// Package restore runs restores: it joins a source and a destination, one
// of which may be remote ([user@]host:PATH), and makes the destination
// (DST) hold the source's tree (SRC), with owners, modes, times, links,
// extended attributes and holes, by one of five methods. Run is the entry
// point (run.go): Options say what to restore and how, the Report says
// what was done, and the error what ended the run early.
//
// A raw restore, the default method's usual path (names are functions):
//
//	Run                                   pick the method (methodRuns)
//	  runAuto                             auto.go: the agent answers: raw
//	  runRaw                              raw.go
//	    openSession                       pull | push | local (session*.go),
//	                                      remote streams in a pool (pool.go)
//	    runSession                        chunkrun.go: the list chunk by chunk
//	      runStreams(produce)             streams.go: a producer, a finisher and a
//	                                      worker per -j slot
//	        producer, per chunk:          s.listChunks: the sender walks as asked
//	          s.plan(chunk)               quick check: size + mtime; signatures
//	          makeBatches → emit          batch.go: small files together, big
//	                                      files split; handed to running workers
//	                                      (at most maxPendingChunks ahead)
//	        worker: s.runStream(i, work,  waits for its stream (stream 0's also
//	                  done)               moves the list's requests, merge0),
//	                                      pipelines batches
//	                                      (Conn.RecvRead → progressWriter →
//	                                      dest.Writer.WriteItem: temp → rename)
//	          done → tracker.done         tracker.go: book each item, commit
//	                                      split files, keep failed deltas, which
//	                                      the producer hands out again whole
//	        finisher, per chunk in order  once its batches and the earlier
//	          s.finish(links, dirs)       chunks' are done: links, specials, the
//	                                      directories whose listing has ended
//	        --delete, -n, -i, per chunk,  dest.Writer.ChunkChanges: DeleteIn in
//	          before its plan             each directory the chunk completes
//	                                      (none after a list error), then
//	                                      dest.Itemizer.Lines; a push's far
//	                                      receiver runs the same as it plans
//	                                      (Conn.PlanChunk's ChunkOptions)
//	      tracker.commitDeferred          push: split files' commits
//	    s.close                           goodbye on every stream
//
// The methods, each in the file named after it:
//
// raw (raw.go): the file list, streamed in chunks as the sender walks it,
// rsync's quick check on the receiver chunk by chunk, and meanwhile the
// contents over parallel streams (-j, SSH connections to the remote
// agent): pull, push or local → local; memory does not grow with the tree
// (a push too, planning, deleting, itemizing and finishing each chunk on
// the receiver); --delete deletes in each directory once its listing is
// complete (rsync's --delete-during). Over a network, a file DST holds in
// another version travels as a delta against that copy (the rsync
// algorithm of Tridgell and Mackerras, delta/signature.go), rebuilt and
// checked against the sender's hash before its rename; a delta that fails is sent again whole in the same run. It
// is the only method that does the selection options (selection.go).
//
// tar (tar.go): the agent sends the tree as POSIX pax archives (IEEE
// 1003.1-2001), one shard per stream, extracted straight into place; local
// → local runs the same sender in-process. Without an agent the remote's
// own tar runs on one stream (tar_remote.go). A tar archive as SRC ("-" or
// a local file, plain, gzip, zstd or lz4) is restored whatever the method
// (tar_input.go). Every file is sent, even on a rerun.
//
// rsync (rsync.go): the rsync protocol, version 27, with gokrazy/rsync's
// receiver here and the remote's "rsync --server --sender" (through the
// agent, or directly without one), so changed files cross the wire as
// rsync deltas; the source's file list (the agent's, or GNU find's
// agent-less: rsync_list.go) then completes owners, set-id bits, ns mtimes,
// links and directories. --timeout for protocol 27: rsync_timeout.go. Pull
// only. One entry it cannot restore is one error, as with raw and tar:
// gokrazy's receiver ends its whole run at the first entry it cannot
// write and at the sender's first error message, so entries too long for
// it (a path over 4,095 bytes, a file name over 235 bytes, for its
// temporary names) and files where DST keeps a non-empty directory
// (without --force) are held back before the run, kept out of the
// sender's file list by exclude rules and reported (rsync_held.go; with
// the agent, the long-named files then come from its raw sender through
// the safe writer), and
// the sender's error messages are taken out of the stream and become
// warnings (rsync_msgs.go).
//
// sftp (sftp.go): pull from any SFTP server (SFTP version 3, pkg/sftp):
// a READDIR walk over -j SSH connections into a file list (sftp_list.go),
// then the same Itemize, Plan (quick check to the second), Delete, data and
// Finish through dest.Writer as raw; numeric owners, whole-second mtimes,
// no hardlinks, xattrs, ACLs or deltas. Pull only.
//
// auto (auto.go): raw when the agent answers or both sides are local;
// without an agent, rsync when DST already holds files, else tar; sftp
// when the remote allows SFTP only (sftp_detect.go); the reason is in
// Report.MethodReason.
//
// The safe writer (package restore/dest) is the only code that writes into
// DST, for every method; its guarantees (nothing outside DST, no DST
// symlink followed, files appear complete with their metadata) are there.
//
// What an interruption leaves behind (Ctrl-C, a dropped stream, a dead
// agent, a timeout): cancelling Run's context, or the first stream failure,
// tears every stream down at once. Raw and tar leave complete files under
// their final names, no temporary file (the writer removes those of the
// files it did not finish; only a killed process leaves some, which a rerun
// reuses or removes), directories whose contents were all placed with
// their final metadata, and the others with their final owner, their
// final mode plus rwx for that owner, and the current mtime.
// rsync makes the missing directories through the safe writer before the
// transfer, with their final owner, and leaves the files gokrazy renamed
// into place complete but with its
// interim metadata (their 0777 bits, mtimes to the second), and maybe a
// gokrazy temporary file at the top of DST. A rerun of the same command
// completes the restore: raw and rsync skip what is in place (quick check),
// tar sends every file again; every directory then gets its metadata. An
// interrupted --delete leaves some extras, which a rerun removes.
//
// Errors: per-item failures (an unreadable or changed source file, a full
// or read-only DST, a --verify mismatch, a failed commit) go into
// Report.Errors and the run goes on; the command exits 23 at the end.
// Run-fatal failures (transport.ErrConnect and ErrTimeout, transfer.ErrProtocol, a
// stream that breaks, DST that cannot be opened, ErrUsage) end the run and
// are Run's error; the first stream failure is the error, not what the
// other streams see as they are torn down. context.Canceled is never a
// per-item error: a cancelled run returns it (Report.addError drops it).
// Every internal step follows one shape: results and per-item errors as
// values, then err, which is run-fatal (see session).
//
// Files: doc.go — this map; run.go — Options, Run (method choice), dialer;
// method.go — Method, the method registry; errors.go — ErrUsage and the
// package's other sentinels; raw.go — MethodRaw, runRaw, openSession,
// runSession; session.go — the session interface, localSession;
// session_remote.go — pullSession, pushSession; pool.go — the pool of SSH
// streams to one agent, dialed in the background (with --jobs auto, one
// at a time when jobs.go's jobsController says so); codecs.go —
// CodecReport and the report's streams and codecs; batch.go — makeBatches;
// streams.go — runStreams (producer, stream workers), pipeline; tracker.go — the tracker (per-item booking, split commits,
// delta retries); tar.go — MethodTar, runTar (agent shards); tar_remote.go
// — agent-less tar; tar_input.go — a tar archive as SRC, decompressed;
// rsync.go — MethodRsync, runRsync, rsyncPull; rsync_list.go — the
// agent-less file list from GNU find; rsync_held.go — the entries held
// back from gokrazy, their exclude rules; rsync_msgs.go — the sender's
// error messages taken out of the stream; rsync_timeout.go — --timeout with
// protocol 27 (genrLog); sftp.go — MethodSFTP, runSFTP, the SFTP
// connections and the file copies; sftp_list.go — the parallel SFTP walk;
// sftp_detect.go — recognising an SFTP-only remote for auto; auto.go —
// MethodAuto, runAuto; selection.go — SRCs,
// -R, --files-from, filters into a transfer.Selection; receiver.go —
// NewSink, a push's receiver, and the WriterOptions ↔ transfer.ReceiverOptions
// conversions; tar_extract.go — the dest.Extractor of the tar method's
// three sources; progress.go —
// Progress, WireProgress and the observer; report.go — Report, FileError,
// Summary, Change (a dry run's changes as objects); list.go — List,
// ListOptions, Listing, ListEntry ('restoresync ls'), the local lister;
// list_remote.go — the remote lister: the agent (sender, RoleGlob,
// RoleSums) or GNU find; sizes.go — Sizes, many trees sized in one
// request to the agent (restore --accounts' order).
package restore
