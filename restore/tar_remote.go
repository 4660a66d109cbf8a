package restore

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/restoresync/restoresync/restore/dest"
	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/transport"
)

// runTarAgentless pulls src with the remote host's own tar, on one stream:
//
//	tar -C PATH --format=posix -cf - .      (GNU tar; --format=pax for others)
//
// piped through the remote's gzip, zstd or lz4 when --compress asks for
// one, and extracted here like any archive. A missing tool is a clear
// error before anything is sent. The remote command exits with tar's
// status: a failure after a complete archive (GNU tar exits 1 or 2 when it
// skipped unreadable or changing files) is recorded as a per-entry error on
// ".", with tar's messages; a failure before any entry is the run's error.
func runTarAgentless(ctx context.Context, o Options, d transport.Dialer, src, dst transport.Location, rep *Report) error {
	cd, ok := d.(transport.CommandDialer)
	if !ok {
		return fmt.Errorf("%w: agent-less tar needs an SSH connection", ErrUsage)
	}
	cmd, err := remoteTarCommand(src.Path, o.Compression)
	if err == nil {
		cmd = remoteTarMetaFlags(cmd, o.Writer)
	}
	if err != nil {
		return err
	}
	rep.Jobs = 1
	s, err := cd.WithCommand(cmd).Dial(ctx)
	if err != nil {
		return err
	}
	s = transport.IdleTimeoutStream(transport.FirstByteTimeout(s, o.SSH.Timeout), o.IdleTimeout)
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	var wire atomic.Int64
	br := bufio.NewReaderSize(transport.CountingReader(s, &wire), 256<<10)
	// Wait for the first byte (or the end) before DST is created, so that
	// a missing tool or path fails the restore without touching DST.
	if _, err := br.Peek(1); err != nil {
		rep.WireBytes = wire.Load()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == io.EOF {
			err = errors.New("remote tar sent nothing")
		}
		return fmt.Errorf("agent-less tar on %s: %w", src.Host, err)
	}
	ar, _, err := decompressed(br)
	if err != nil {
		return fmt.Errorf("agent-less tar on %s: %w", src.Host, err)
	}
	x, err := openExtractor(o, dst.Path, false)
	if err != nil {
		return err
	}
	defer closeExtractor(x, rep)
	err = x.Extract(ctx, ar)
	if err == nil {
		// The archive ended: what follows is the remote command's exit.
		if _, derr := io.Copy(io.Discard, ar); derr != nil && ctx.Err() == nil {
			x.Fail(".", fmt.Errorf("remote tar: %w", derr))
		}
		err = x.Finish(ctx)
	} else if ctx.Err() == nil {
		err = fmt.Errorf("agent-less tar on %s: %w", src.Host, err)
	}
	rep.WireBytes = wire.Load()
	if err == nil {
		err = ctx.Err()
	}
	if terr := transport.IdleTimedOut(s); err != nil && terr != nil {
		err = terr
	}
	return err
}

// remoteTarCommand is the shell command line of agent-less tar: it checks
// for each tool it needs (naming the missing one), sends the tree as a pax
// archive on stdout, compressed by the remote's tool for c, and exits with
// tar's status (a POSIX shell has no pipefail: the status comes back
// through file descriptor 3).
func remoteTarCommand(dir string, c transfer.Compression) (string, error) {
	if dir == "" {
		dir = "."
	}
	var comp string
	if c.Codec == transfer.CodecAuto {
		// No per-file choice through one remote pipe: the remote's
		// zstd at its fastest level, auto's first choice.
		c = transfer.Compression{Codec: transfer.CodecZstd, Level: 1}
	}
	switch lvl := c.Level; c.Codec {
	case transfer.CodecNone:
	case transfer.CodecGzip:
		comp = "gzip -c -" + strconv.Itoa(cmp.Or(lvl, 1))
	case transfer.CodecZstd:
		comp = "zstd -q -c -" + strconv.Itoa(cmp.Or(lvl, 1))
		if lvl > 19 {
			comp = "zstd -q -c --ultra -" + strconv.Itoa(lvl)
		}
	case transfer.CodecLZ4:
		comp = "lz4 -q -c -" + strconv.Itoa(cmp.Or(lvl, 1))
	default:
		return "", fmt.Errorf("%w: agent-less tar cannot compress with %s", ErrUsage, c.Codec)
	}
	need := func(tool, why string) string {
		msg := transport.ShellQuote("restoresync: " + tool + " is not installed on the remote host" + why)
		return "command -v " + tool + " >/dev/null 2>&1 || { echo " + msg + " >&2; exit 127; }; "
	}
	var b strings.Builder
	b.WriteString(need("tar", " (agent-less --method tar runs it; or install restoresync there)"))
	if comp != "" {
		tool, _, _ := strings.Cut(comp, " ")
		b.WriteString(need(tool, " (needed for --compress "+c.Codec.String()+"; use --compress none or another codec)"))
	}
	// GNU tar: pax with nanosecond mtimes, without atime and ctime records.
	b.WriteString("if tar --version 2>/dev/null | grep -q 'GNU tar'; then f='--format=posix --pax-option=delete=atime,delete=ctime'; else f='--format=pax'; fi; ")
	tarCmd := "tar $f -C " + transport.ShellQuote(dir) + " -cf - ."
	if comp == "" {
		b.WriteString(tarCmd)
		return b.String(), nil
	}
	b.WriteString("exec 4>&1; st=$( { { " + tarCmd + "; echo $? >&3; } | " + comp + " >&4; } 3>&1 ); exit \"${st:-1}\"")
	return b.String(), nil
}

// remoteTarMetaFlags adds to an agent-less tar command line the GNU tar
// options that carry extended metadata: --xattrs (every namespace), --acls
// and --sparse, each unless the restore leaves it out, and each only if
// the remote's tar lists it in its --help (older or other tars, or a GNU
// tar built without ACL support, send the tree without them).
func remoteTarMetaFlags(cmd string, o dest.WriterOptions) string {
	var probe strings.Builder
	for _, f := range []struct {
		off  bool
		flag string
	}{{o.NoXattrs, "--xattrs"}, {o.NoACLs, "--acls"}, {o.NoSparse, "--sparse"}} {
		if !f.off {
			probe.WriteString("tar --help 2>/dev/null | grep -q -e '" + f.flag + "\\b' && f=\"$f " + f.flag + "\"; ")
		}
	}
	if probe.Len() == 0 {
		return cmd
	}
	const marker = "fi; "
	i := strings.Index(cmd, marker)
	if i < 0 {
		return cmd
	}
	i += len(marker)
	return cmd[:i] + probe.String() + cmd[i:]
}
