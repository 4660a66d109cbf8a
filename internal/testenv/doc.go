// Package testenv says what a test may assume of the host it runs on, so
// that every package's tests treat a missing tool the same way: locally a
// missing program skips the test (a developer's laptop need not have
// setfattr), and in CI it fails it, since `make test` installs every tool
// the tests use and a skip there would hide a test that never ran. This is
// restic's SkipDisallowed rule (internal/test/helpers.go), keyed on the CI
// variable instead of a list of test names.
//
// It is for tests only and holds no state: every function is safe to call
// from parallel tests.
//
//	RequireTool(t, "rsync", "tar")
//	  found on $PATH      → its path
//	  missing, CI unset   → t.Skip  ("... make test installs it")
//	  missing, CI set     → t.Fatal ("... make test installs it")
//
// Files: doc.go — this overview; tool.go — InCI and RequireTool; race.go
// and norace.go — Race, whether the race detector is built in.
package testenv
