package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/zeebo/xxh3"

	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
	"github.com/restoresync/restoresync/treewalk"
)

// remoteLister lists a remote sender's roots: through the agent (a sender
// stream per root, the raw method's file list), or agent-less with the
// remote's GNU find when --remote-path is none or no agent answers.
type remoteLister struct {
	o  ListOptions
	d  transport.Dialer
	cd transport.CommandDialer // nil when d cannot run commands
	// agent is false once the listing is agent-less; the first path's
	// listing settles it, the parallel ones read it.
	agent atomic.Bool
}

func newRemoteLister(o ListOptions, loc transport.Location) (*remoteLister, error) {
	ro := Options{SSH: o.SSH, Dialer: o.Dialer}
	d, err := dialer(ro, loc)
	if err != nil {
		return nil, err
	}
	l := &remoteLister{o: o, d: d}
	l.agent.Store(o.SSH.RemotePath != NoAgent)
	l.cd, _ = d.(transport.CommandDialer)
	if !l.agent.Load() && l.cd == nil {
		return nil, fmt.Errorf("%w: --remote-path none needs an SSH connection (built-in or -e)", ErrUsage)
	}
	return l, nil
}

func (l *remoteLister) timeouts() transfer.Timeouts {
	return transfer.Timeouts{Connect: l.o.SSH.Timeout, Idle: l.o.IdleTimeout}
}

func (l *remoteLister) list(ctx context.Context, root transfer.SourceRoot, depth, filters []string, sums bool) (treewalk.List, map[string]string, error) {
	if l.agent.Load() {
		list, m, err := l.agentList(ctx, root, append(depth, filters...), sums)
		if err == nil || !agentMissing(err) || l.cd == nil {
			return list, m, err
		}
		l.agent.Store(false) // no agent: the remote's own find from here on
	}
	return l.findList(ctx, root, depth, filters, sums)
}

// glob expands pattern through the agent (transfer.Glob); agent-less,
// the remote shell would have to expand it, and a pattern there is
// refused rather than quoted into a command line.
func (l *remoteLister) glob(ctx context.Context, pattern string) ([]string, error) {
	if !l.agent.Load() {
		return nil, fmt.Errorf("%w: %s: a pattern in PATH is expanded by the restoresync agent; with --remote-path none, let the local shell expand a list of PATHs", ErrUsage, pattern)
	}
	m, err := transfer.Glob(ctx, l.d, pattern, l.o.Version, l.timeouts())
	if err != nil && agentMissing(err) && l.cd != nil {
		l.agent.Store(false)
		return l.glob(ctx, pattern)
	}
	var re *transfer.RemoteError
	if errors.As(err, &re) {
		return nil, fmt.Errorf("%w: %s: %w", ErrUsage, pattern, err)
	}
	return m, err
}

// agentList lists root on a sender stream of its own and, when sums is
// set, asks the agent for its regular files' hashes on another.
func (l *remoteLister) agentList(ctx context.Context, root transfer.SourceRoot, filters []string, sums bool) (treewalk.List, map[string]string, error) {
	h := transfer.Hello{Role: transfer.RoleSender, Path: root.Base, Roots: []transfer.SourceRoot{root}, Filters: filters, Version: l.o.Version, Compression: "none"}
	_, c, err := transfer.Open(ctx, l.d, h, l.timeouts())
	if err != nil {
		var re *transfer.RemoteError
		if errors.As(err, &re) { // the agent refused this path
			return treewalk.List{}, nil, pathFailed(err)
		}
		return treewalk.List{}, nil, err
	}
	list, err := c.List(ctx)
	cerr := c.Close()
	if err == nil && cerr != nil && !errors.Is(cerr, context.Canceled) {
		err = cerr
	}
	if err != nil || !sums {
		return list, nil, err
	}
	// The agent hashes the files where they are (transfer.RoleSums): their
	// bytes do not cross the network.
	m, err := transfer.Sums(ctx, l.d, transfer.Selection{Roots: h.Roots, Filters: h.Filters}, l.o.Version, l.timeouts())
	var re *transfer.RemoteError
	if errors.As(err, &re) { // refused (too many files): the list stands
		list.Errors = append(list.Errors, &treewalk.PathError{Path: root.Rel, Err: fmt.Errorf("checksums: %w", err)})
		return list, nil, nil
	}
	return list, m, err
}

// findListCommandAt is the remote command that lists root agent-less:
// find from Base, at the depth depthRule (depthRules) keeps to; the
// filters are applied on this side.
func findListCommandAt(root transfer.SourceRoot, depthRule []string) string {
	depth := ""
	switch {
	case len(depthRule) == 0:
	case depthRule[0] == "- /*", root.Rel != ".":
		depth = " -maxdepth 0"
	default:
		depth = " -maxdepth 1"
	}
	base := root.Base
	if base == "" {
		base = "."
	}
	return "cd -- " + transport.ShellQuote(base) + " && LC_ALL=C exec find " + transport.ShellQuote(findStart(root.Rel)) + depth + " -printf '" + findFormat + "'"
}

// findStart is find's starting point for rel beneath the base: "./rel",
// so that a name starting with "-" is not an option.
func findStart(rel string) string {
	if rel == "." {
		return "."
	}
	return "./" + rel
}

// findList lists root with the remote's find, applies filters here, and
// hashes regular files with the remote's cat when sums is set.
func (l *remoteLister) findList(ctx context.Context, root transfer.SourceRoot, depth, filters []string, sums bool) (treewalk.List, map[string]string, error) {
	f, err := treewalk.ParseFilter(append(depth, filters...))
	if err != nil {
		return treewalk.List{}, nil, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	raw, _, err := runFind(ctx, l.cd, findListCommandAt(root, depth), l.o.SSH.Timeout, l.o.IdleTimeout)
	if err != nil {
		if ctx.Err() == nil && strings.Contains(err.Error(), "No such file or directory") {
			return raw, nil, pathFailed(fmt.Errorf("%s: %w", path.Join(root.Base, root.Rel), errNotExist))
		}
		return raw, nil, err
	}
	list := treewalk.List{Errors: raw.Errors}
	var pruned []string // excluded directories: nothing below them
	for _, e := range raw.Entries {
		if root.Rel != "." {
			if e.Path == "." {
				e.Path = root.Rel
			} else {
				e.Path = root.Rel + "/" + e.Path
			}
			if e.LinkTo != "" {
				e.LinkTo = root.Rel + "/" + e.LinkTo
			}
		}
		below := false
		for _, p := range pruned {
			if strings.HasPrefix(e.Path, p+"/") {
				below = true
				break
			}
		}
		if below {
			continue
		}
		if e.Path != "." && f.Excluded(e.Path, e.Kind == treewalk.KindDir) {
			if e.Kind == treewalk.KindDir {
				pruned = append(pruned, e.Path)
			}
			continue
		}
		list.Entries = append(list.Entries, e)
	}
	if !sums {
		return list, nil, nil
	}
	m := map[string]string{}
	for _, e := range list.Entries {
		if e.Kind != treewalk.KindFile {
			continue
		}
		base := root.Base
		if base == "" {
			base = "."
		}
		cmd := "cd -- " + transport.ShellQuote(base) + " && exec cat -- " + transport.ShellQuote("./"+e.Path)
		s, err := l.cd.WithCommand(cmd).Dial(ctx)
		if err != nil {
			return list, nil, err
		}
		h := xxh3.New()
		n, err := io.Copy(h, s)
		s.Close()
		if err == nil && n == e.Size {
			m[e.Path] = transfer.SumHex(h.Sum64())
		} else if ctx.Err() != nil {
			return list, nil, ctx.Err()
		} else {
			list.Errors = append(list.Errors, &treewalk.PathError{Path: e.Path, Err: fmt.Errorf("read for its checksum: %d of %s bytes", n, strconv.FormatInt(e.Size, 10))})
		}
	}
	return list, m, nil
}
