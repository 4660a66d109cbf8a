package restore

import (
	"context"
	"fmt"
	"time"

	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
)

// SizeOptions configure Sizes.
type SizeOptions struct {
	// Paths are the locations to size (PATH or [user@]host:PATH, as
	// restore's SRC), all on one host or all local.
	Paths []string
	// SSH says how to reach the remote side (the agent sizes the paths).
	SSH transport.SSHOptions
	// IdleTimeout is restore's --timeout; 0 means none.
	IdleTimeout time.Duration
	// Version is announced to the remote agent.
	Version string
	// Dialer, when not nil, reaches the remote side instead of SSH (tests).
	Dialer transport.Dialer
}

// Sizes returns the payload bytes and the regular files of each of
// o.Paths (a file with several links counted once), one PathSize per
// path, in order; a path that cannot be walked has its Error set. Remote
// paths are sized by the agent in one request on one stream, whatever
// their number, and no file list crosses the link (transfer.Sizes,
// protocol 8); local ones are walked here. The error is the request's
// as a whole: the host cannot be reached, it has no agent (or an older
// one: ErrProtocol), the paths are not on one host. Safe for concurrent
// use.
func Sizes(ctx context.Context, o SizeOptions) ([]transfer.PathSize, error) {
	if len(o.Paths) == 0 {
		return nil, nil
	}
	var paths []string
	var first transport.Location
	for i, p := range o.Paths {
		l, err := transport.ParseLocation(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrUsage, p, err)
		}
		if i == 0 {
			first = l
		} else if l.Remote() != first.Remote() || l.Host != first.Host || l.User != first.User || l.Port != first.Port {
			return nil, fmt.Errorf("%w: all paths must be on the same host (or all local): %s and %s are not", ErrUsage, o.Paths[0], p)
		}
		paths = append(paths, l.Path)
	}
	if !first.Remote() {
		out := make([]transfer.PathSize, len(paths))
		for i, p := range paths {
			n, files, err := transfer.SizeOf(ctx, p)
			if err != nil {
				out[i].Error = err.Error()
				continue
			}
			out[i] = transfer.PathSize{Bytes: n, Files: files}
		}
		return out, ctx.Err()
	}
	d, err := dialer(Options{SSH: o.SSH, Dialer: o.Dialer}, first)
	if err != nil {
		return nil, err
	}
	return transfer.Sizes(ctx, d, paths, o.Version, transfer.Timeouts{Connect: o.SSH.Timeout, Idle: o.IdleTimeout})
}
