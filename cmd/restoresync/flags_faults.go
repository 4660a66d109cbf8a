package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/restoresync/restoresync/restore"
)

// faultsFlags are the restore flags about failures: rsync's --timeout and
// --contimeout, and --verify.
type faultsFlags struct {
	timeoutSec    int
	contimeoutSec int
}

// addFaultsFlags registers --timeout, --contimeout and --verify.
func (o *restoreOptions) addFaultsFlags(f *pflag.FlagSet) {
	f.IntVar(&o.faultFlags.timeoutSec, "timeout", 0, "I/O timeout in seconds: fail (exit 30) when no data moves on a stream for this long while waiting for the remote side; 0: none")
	f.IntVar(&o.faultFlags.contimeoutSec, "contimeout", 30, "seconds allowed for each SSH connection's dial and handshake")
	f.BoolVar(&o.opts.Verify, "verify", false, "check an end-to-end checksum (xxh3-128) of each file's data before putting it in place (raw method)")
}

// applyFaultsFlags checks the flags and sets them in r.
func (o *restoreOptions) applyFaultsFlags(r *restore.Options) error {
	if o.faultFlags.timeoutSec < 0 {
		return &usageError{fmt.Sprintf("--timeout %d: must be 0 (none) or a number of seconds", o.faultFlags.timeoutSec)}
	}
	if o.faultFlags.contimeoutSec < 1 {
		return &usageError{"--contimeout must be at least 1 second"}
	}
	r.IdleTimeout = time.Duration(o.faultFlags.timeoutSec) * time.Second
	r.SSH.Timeout = time.Duration(o.faultFlags.contimeoutSec) * time.Second
	return nil
}
