// Package bench makes realistic, reproducible directory trees to restore in
// benchmarks and tests: a shared-hosting account (WordPress, uploads, a
// Maildir, a database dump, logs, links and awkward names), big media files,
// masses of small files, or one huge file.
//
// Generate plans the whole tree from GenOptions alone, then writes it: the
// same options give the same names, contents, modes and mtimes (to the
// nanosecond), whatever the machine, the Go release or the number of CPUs,
// because every file draws from its own PCG stream named by its path, and
// only integer arithmetic turns random numbers into sizes and choices. Text
// (PHP, JavaScript, CSS, mail, SQL, logs) is assembled from word lists, so it
// compresses about as well as the real thing; media stand-ins are random
// bytes behind a real magic number, so they do not compress at all.
//
// Generate writes only beneath the directory it is given, through an
// os.Root. An interrupted Generate leaves a partial tree behind, with wrong
// modes and times; remove it and start again.
//
// Run times restores of a tree (the restoresync binary as a subprocess, with
// each method, codec and job count, and the rsync and tar baselines), each
// into a fresh temporary destination that it verifies and removes, and
// reports medians (WriteResults, WriteChart). It only reads its source; the
// delta rows restore from a changed copy (MakeDeltaCopy). An interrupted Run
// removes its temporary directory on return; a killed one leaves
// restoresync-bench-* in the temporary directory (and, for a remote delta
// run, restoresync-bench-delta-* on the source host). Relay is the lab's
// delaying TCP link.
package bench
