package restore

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/restoresync/restoresync/transport"
	"github.com/restoresync/restoresync/treewalk"
)

// The agent-less rsync method needs the source's file list (nanosecond
// mtimes, owner names, hardlink groups, symlinks, setuid bits: what
// protocol 27 does not carry) to complete what gokrazy/rsync leaves undone.
// It gets it by running GNU find on the remote host over one more stream:
//
//	cd -- PATH && LC_ALL=C exec find . -printf FORMAT
//
// FORMAT prints, for every entry, findFields NUL-terminated fields. NUL is
// the one byte that can appear neither in a file name nor in a symlink
// target, so the output parses without any quoting; every field is bounded
// (maxFindField) and every path checked with treewalk.ValidPath, the
// remote's output being untrusted like any peer's.
const (
	findFormat   = `%y\0%m\0%U\0%G\0%u\0%g\0%s\0%T@\0%D\0%i\0%n\0%P\0%l\0%b\0`
	findFields   = 14
	maxFindField = 64 << 10
)

// findListCommand is the remote shell command that lists path.
func findListCommand(path string) string {
	return "cd -- " + transport.ShellQuote(path) + " && LC_ALL=C exec find . -printf '" + findFormat + "'"
}

// parseFindList reads find's output (findFormat) into a file list in find's
// order, the root "." first. Hardlink groups are found by device and inode:
// the first name seen leads. Sockets are skipped, as treewalk does; device
// nodes become per-entry errors (find cannot print their numbers). A
// malformed record is an error wrapping errFindOutput: the rest of the
// stream cannot be trusted either.
func parseFindList(r io.Reader) (treewalk.List, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var list treewalk.List
	leaders := map[string]string{}
	var f [findFields]string
	for n := 0; ; n++ {
		for i := range f {
			s, err := readField(br)
			if err == io.EOF && i == 0 {
				if n == 0 {
					return list, fmt.Errorf("%w: no entries (is PATH a directory?)", errFindOutput)
				}
				if err := treewalk.CheckList(list.Entries); err != nil {
					return list, fmt.Errorf("%w: %w", errFindOutput, err) // a name twice
				}
				return list, nil
			}
			if err != nil {
				return list, fmt.Errorf("record %d: %w", n, err)
			}
			f[i] = s
		}
		e, err := findEntry(f)
		if err != nil {
			return list, fmt.Errorf("%w: record %d (%q): %w", errFindOutput, n, f[11], err)
		}
		if n == 0 && e.Path != "." || n > 0 && e.Path == "." {
			return list, fmt.Errorf("%w: record %d: %q where the root belongs", errFindOutput, n, e.Path)
		}
		switch {
		case e.Kind == 0:
			continue // socket: skipped like treewalk does
		case e.Kind == treewalk.KindCharDev || e.Kind == treewalk.KindBlkDev:
			list.Errors = append(list.Errors, &treewalk.PathError{Path: e.Path,
				Err: errors.New("device node: the agent-less listing (find) cannot give its device number; use the restoresync agent")})
			continue
		case e.Kind != treewalk.KindDir && f[10] != "1": // every kind but directories, as rsync -H
			key := f[8] + ":" + f[9]
			if leader, ok := leaders[key]; ok {
				e.LinkTo = leader
			} else {
				leaders[key] = e.Path
			}
		}
		list.Entries = append(list.Entries, e)
	}
}

// readField reads one NUL-terminated field of at most maxFindField bytes.
func readField(br *bufio.Reader) (string, error) {
	var b []byte
	for {
		chunk, err := br.ReadSlice(0)
		if len(b)+len(chunk) > maxFindField+1 {
			return "", fmt.Errorf("%w: field longer than %d bytes", errFindOutput, maxFindField)
		}
		b = append(b, chunk...)
		switch {
		case err == nil:
			return string(b[:len(b)-1]), nil
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && len(b) > 0:
			return "", fmt.Errorf("%w: output ends inside a field", errFindOutput)
		default:
			return "", err
		}
	}
}

// findEntry converts one record: type, mode, uid, gid, user, group, size,
// mtime, device, inode, link count, path, symlink target, 512-byte blocks
// allocated (a regular file allocating fewer than its size has holes).
func findEntry(f [findFields]string) (treewalk.Entry, error) {
	var e treewalk.Entry
	e.Path = f[11]
	if e.Path == "" {
		e.Path = "."
	}
	if err := treewalk.ValidPath(e.Path); err != nil {
		return e, err
	}
	switch f[0] {
	case "f":
		e.Kind = treewalk.KindFile
	case "d":
		e.Kind = treewalk.KindDir
	case "l":
		e.Kind = treewalk.KindSymlink
		e.LinkTarget = f[12]
		if e.LinkTarget == "" {
			return e, errors.New("symlink without a target")
		}
	case "p":
		e.Kind = treewalk.KindFifo
	case "c":
		e.Kind = treewalk.KindCharDev
	case "b":
		e.Kind = treewalk.KindBlkDev
	case "s":
		return treewalk.Entry{Path: e.Path}, nil
	default:
		return e, fmt.Errorf("unknown file type %q", f[0])
	}
	mode, err := strconv.ParseUint(f[1], 8, 32)
	if err != nil || mode > 0o7777 {
		return e, fmt.Errorf("mode %q", f[1])
	}
	e.Mode = uint32(mode)
	uid, err1 := strconv.ParseUint(f[2], 10, 32)
	gid, err2 := strconv.ParseUint(f[3], 10, 32)
	if err1 != nil || err2 != nil {
		return e, fmt.Errorf("owner %q:%q", f[2], f[3])
	}
	e.Uid, e.Gid = uint32(uid), uint32(gid)
	// find prints the number when the id has no name.
	if f[4] != f[2] {
		e.User = f[4]
	}
	if f[5] != f[3] {
		e.Group = f[5]
	}
	if e.Kind == treewalk.KindFile {
		if e.Size, err = strconv.ParseInt(f[6], 10, 64); err != nil || e.Size < 0 {
			return e, fmt.Errorf("size %q", f[6])
		}
	}
	if e.MtimeNs, err = parseFindTime(f[7]); err != nil {
		return e, err
	}
	if _, err := strconv.ParseUint(f[10], 10, 64); err != nil {
		return e, fmt.Errorf("link count %q", f[10])
	}
	blocks, err := strconv.ParseInt(f[13], 10, 64)
	if err != nil || blocks < 0 {
		return e, fmt.Errorf("block count %q", f[13])
	}
	e.Sparse = e.Kind == treewalk.KindFile && blocks < (e.Size+511)/512
	return e, nil
}

// parseFindTime parses %T@: whole seconds rounded down (so "-2.25..." is
// -1.75 s), a dot, then up to 10 fraction digits.
func parseFindTime(s string) (int64, error) {
	secStr, frac, ok := strings.Cut(s, ".")
	sec, err := strconv.ParseInt(secStr, 10, 64)
	if !ok || err != nil || len(frac) == 0 || len(frac) > 10 || sec > 1<<33 || sec < -(1<<33) {
		return 0, fmt.Errorf("mtime %q", s)
	}
	frac = (frac + "000000000")[:9]
	ns, err := strconv.ParseUint(frac, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("mtime %q", s)
	}
	return sec*1e9 + int64(ns), nil
}
