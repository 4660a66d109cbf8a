// Package integration holds restoresync's black-box tests: each runs the
// built binary as a subprocess, as an operator or a script would, against
// real peers, and checks what it left on disk, on stdout (the --json
// report), on stderr and in its exit status (the README's table). Package
// tests (restore/, transfer/, cmd/restoresync...) stay white-box and fast;
// these prove that the pieces work together through the command line.
//
// What they need, all installed by `make test` (scripts/deps.sh):
//   - the binary: $RESTORESYNC_BIN when set (the Makefile sets it after
//     `make build`), else TestMain builds ./cmd/restoresync once into a
//     temporary directory;
//   - a real OpenSSH sshd that each test starts on 127.0.0.1 on a port of
//     its own (internal/testsshd), and the binary's own 'serve --listen';
//   - the real ssh client (-e), rsync, GNU tar, gzip, scp, find, setpriv,
//     setfattr/setfacl/setcap; a missing one skips the test locally and
//     fails it in CI (internal/testenv);
//   - root: sshd's privilege separation, varied owners, --account's
//     throwaway users (useradd), device nodes, dropped capabilities.
//
// Every test makes its own temporary directories and ports, so the tests
// run in parallel, and this package in parallel with the others at go's
// default -p. Trees several tests only read ('bench gen' accounts) are
// made once per process under a directory TestMain removes. An interrupted
// run can leave that directory in $TMPDIR (restoresync-e2e-*) and, from an
// --account test, a user named rsopsNNNNNN; a test's sshd and 'serve
// --listen' are killed by their PIDs when it ends. -short skips them all.
//
// One test, with the binary built first:
//
//	make build
//	RESTORESYNC_BIN=$PWD/bin/restoresync go test -count=1 -run 'TestE2EPullSSHD$' ./integration/
//
// Files: doc.go — this overview; main_test.go — TestMain (the binary, the
// shared trees), runBin and its results, sharedTree; helpers_test.go —
// tree comparison (bench compare and rsync -ni), the --json report, the
// test sshd's flags, 'serve --listen' endpoints, small trees and owners;
// exitcode_test.go — the documented exit codes; restore_test.go — pull,
// push, -e, serve --listen, codecs and jobs, reruns, planted symlinks,
// --chown, --numeric-ids; auto_test.go — --method auto's choice;
// tar_test.go — --method tar with and without an agent; rsync_test.go —
// --method rsync, agent and agent-less, and its delta; delta_test.go — the
// raw method's delta beside rsync's; methods_test.go — every method on Go's
// src/net; meta_test.go — xattrs, ACLs, sparse files and devices exactly;
// chmod_test.go — --chmod's modes beside rsync's, local, pull and push,
// with the client's umask;
// select_test.go — -R, SRCs, excludes, --delete, --itemize-changes;
// ls_test.go — ls against rsync --list-only, --versions over cp -al
// snapshots, patterns; dryrun_test.go — -n --json's change_entries;
// account_test.go — --account ownership and the example post-restore hook;
// progress_test.go — --bwlimit and progress off and on a terminal;
// failure_test.go — exit codes of failed runs, interrupted runs and their
// reruns; faults_test.go — signals, a stalled server, unreadable sources,
// a changed host key; stall_test.go — --timeout and --contimeout against
// stopped, hung and killed agents; rsynctimeout_test.go — --timeout with
// --method rsync; bench_test.go — 'bench run' locally and over sshd;
// benchfail_test.go — a failing baseline row (exit 23); benchout_test.go —
// results that cannot be written at the end; baseline_bench_test.go —
// BenchmarkRestoreVsBaselines against rsync and tar|ssh|tar.
package integration
