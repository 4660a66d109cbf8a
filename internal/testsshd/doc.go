// Package testsshd starts a real OpenSSH sshd on 127.0.0.1 for tests, with
// fresh host and client keys in the test's temporary directory. Each Start
// runs its own sshd on its own port, so tests using it can run in parallel.
// StartConfig adds sshd_config lines: an SFTP-only account (Match User,
// ForceCommand internal-sftp, ChrootDirectory in a ChrootDir).
//
// sshd must run as root here (it needs privilege separation); without
// /usr/sbin/sshd the test is skipped, or fails when CI is set or
// RESTORESYNC_REQUIRE_SSHD=1.
//
// Guarantees: sshd listens on 127.0.0.1 only and accepts only the
// generated client key; Start stops (kills) its sshd when the test ends,
// and every file it writes (keys, known_hosts, sshd_config, the log) is
// in t.TempDir, removed with the test; outside it, only sshd's privilege
// separation directory /run/sshd is made if missing, and ChrootDir's
// directories (under /run, removed with the test). A killed test
// process may leave its sshd running.
//
// Files: testsshd.go — Server, Start, StartConfig, ChrootDir, Addr, Config (an ssh_config for
// -F), and the keys, free port and sshd log behind them; silent.go —
// Silent, a host that answers with a banner at most.
package testsshd
