package restore

import "errors"

// ErrUsage marks bad arguments or a combination of options a method cannot
// do (exit code 1); Run wraps it with what is wrong.
var ErrUsage = errors.New("usage")

// errFindOutput marks remote find output that does not parse (the
// agent-less rsync method's file list, rsync_list.go); it is wrapped with
// transfer.ErrProtocol and the record concerned.
var errFindOutput = errors.New("unexpected output from the remote find")
