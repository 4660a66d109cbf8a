// Package testsshd starts a real OpenSSH sshd on 127.0.0.1 for tests, with
// fresh host and client keys in the test's temporary directory. Each Start
// runs its own sshd on its own port, so tests using it can run in parallel.
//
// sshd must run as root here (it needs privilege separation); without
// /usr/sbin/sshd the test is skipped, or fails when CI is set or
// RESTORESYNC_REQUIRE_SSHD=1.
//
// Guarantees: sshd listens on 127.0.0.1 only and accepts only the
// generated client key; Start stops (kills) its sshd when the test ends,
// and every file it writes (keys, known_hosts, sshd_config, the log) is
// in t.TempDir, removed with the test; outside it, only sshd's privilege
// separation directory /run/sshd is made if missing. A killed test
// process may leave its sshd running.
//
// Files: testsshd.go — Server, Start, StartWith (extra sshd_config lines), Addr, Config (an ssh_config for
// -F), and the keys, free port and sshd log behind them; silent.go —
// Silent, a host that answers with a banner at most.
package testsshd
