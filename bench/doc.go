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
// delaying TCP link. Scale times restoresync, rsync and tar on a tree served
// by this host's sshd, with the first file's arrival and both ends' memory
// and CPU (scripts/scale.sh).
//
//	Generate(ctx, dir, o)           // profile's build plans nodes; p.finish; w.write:
//	                                // mkdirs, files (in parallel), links, metadata
//	res := Run(ctx, o)              // probe, e.plan(res): the rows; deltaSource
//	for each run, for each row:     // interleaved: a slow spell hits no row alone
//	    e.runOnce(full)             // measure into a fresh dst, then verify;
//	                                // log the run and the overall ETA (benchETA)
//	    e.runOnce(delta)            // same dst, from the changed copy
//	s.finish(res); res.setVsRsync() // medians, min–max and spread per row
//	WriteResults(w, res, format); WriteChart(w, res)
//
// Files: gen.go — GenOptions, GenStats, Generate; profiles.go — the
// profiles (media, small files, big file); hosting.go — the hosting
// account; codetree.go — source trees, modes and sizes; plan.go — the
// planned tree's nodes; write.go — writing a plan beneath an os.Root;
// owners.go — owner classes resolved on the host; content.go — file
// contents; text.go — textGen and the plain, HTML, CSS, JSON and shell
// texts; code.go — PHP and JavaScript; data.go — mail, access logs, SQL
// dumps; words.go — the word lists; rng.go — the PCG streams; delta.go —
// MakeDeltaCopy, ParsePercent; run.go — RunOptions, Run and its rows;
// baseline.go — the rsync and tar baselines; measure.go — timing a row's
// commands, CPU and RSS, medians; verify.go — checking a result against
// its source; sshcmd.go — ssh and -e command lines; farside.go — far-side
// rusage (RunRusage, CollectRusage, MakeFarSetup); report.go — Results,
// Row, WriteResults; spread.go — each row's min–max and spread, the wide
// spread's note (WideSpreadPercent), benchETA; chart.go — WriteChart (SVG); chart_png.go —
// WriteChartPNG; relay.go — Relay; scale.go — Scale, ScaleOptions: the
// scale table's runs; scalereport.go — ScaleSample, ScaleResults, their
// medians and WriteScaleMarkdown; scalewatch_linux.go — the first-file
// watch (inotify).
package bench
