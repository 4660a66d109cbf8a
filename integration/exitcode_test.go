package integration

// The exit statuses restoresync documents (README, "Summary and exit
// codes"; rsync's codes where one fits). They are the binary's contract
// with scripts, so these tests state them here, apart from package main's
// own constants: a change to a code there is a failure here.
const (
	exitUsage    = 1   // syntax or usage error
	exitFileIO   = 11  // SRC or DST cannot be opened
	exitProtocol = 12  // the peer broke the protocol or the stream ended early
	exitSignal   = 20  // interrupted by SIGINT or SIGTERM
	exitPartial  = 23  // some files could not be restored
	exitPostHook = 26  // the restore succeeded, --post-hook failed
	exitTimeout  = 30  // --timeout or a stall
	exitSSH      = 255 // the SSH connection failed
)
