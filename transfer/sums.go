package transfer

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/zeebo/xxh3"

	"github.com/restoresync/restoresync/transport"
	"github.com/restoresync/restoresync/treewalk"
)

// RoleSums asks the server to walk Hello.Roots through Hello.Filters, as a
// sender would, and to answer with the xxh3-64 of each regular file's
// contents (helloReply.Sums) instead of sending them: the stream ends
// after the reply. For comparing a few files across snapshots ('ls
// --versions'), so a selection of more than maxSumFiles files is refused.
// Protocol version 6 and later.
const RoleSums = "sums"

// maxSumFiles bounds the files of one RoleSums request: the reply is one
// JSON handshake, which readHandshake bounds too.
const maxSumFiles = 1000

// FileSum is one file's content hash in a RoleSums reply.
type FileSum struct {
	// Path is the file's path in the file list of the selection.
	Path string `json:"path"`
	// XXH3 is the xxh3-64 of its contents, 16 lower-case hex digits.
	XXH3 string `json:"xxh3"`
}

// Sums dials d and asks the agent for the content hashes of the regular
// files of sel (RoleSums), by file-list path; a file the agent could not
// read has none. The selection's own failures (a missing root) come back
// as a *RemoteError. Safe for concurrent use.
func Sums(ctx context.Context, d transport.Dialer, sel Selection, version string, t Timeouts) (map[string]string, error) {
	_, c, err := Open(ctx, d, Hello{Role: RoleSums, Roots: sel.Roots, Filters: sel.Filters, Version: version, Compression: "none"}, t)
	if err != nil {
		return nil, err
	}
	c.s.Close() // the server has ended its side after the reply
	m := make(map[string]string, len(c.sums))
	for _, s := range c.sums {
		m[s.Path] = s.XXH3
	}
	return m, nil
}

// sums hashes the regular files of the client's selection, hardlink
// followers under their own names too.
func (s *server) sums(ctx context.Context) ([]FileSum, error) {
	if len(s.hello.Roots) == 0 {
		return nil, fmt.Errorf("%w: a sums request without roots", ErrProtocol)
	}
	src, err := s.openSource()
	if err != nil {
		return nil, err
	}
	defer src.Close()
	list, err := src.List(ctx)
	if err != nil {
		return nil, err
	}
	var files []treewalk.Entry
	for _, e := range list.Entries {
		if e.Kind == treewalk.KindFile {
			files = append(files, e)
		}
	}
	if len(files) > maxSumFiles {
		return nil, fmt.Errorf("%d files to hash: more than %d in one request", len(files), maxSumFiles)
	}
	return SumFiles(ctx, src, files), nil
}

// SumFiles returns the xxh3-64 of each regular file among entries, read
// through src, in list order; a file that cannot be read is left out.
// The caller bounds how many files that is. Safe for concurrent use: each file is opened and read on its own.
func SumFiles(ctx context.Context, src *LocalSource, entries []treewalk.Entry) []FileSum {
	sums := []FileSum{}
	for _, e := range entries {
		if e.Kind != treewalk.KindFile {
			continue
		}
		it := Item{Entry: e, Length: e.Size}
		r, err := src.Open(ctx, &it)
		if err != nil {
			continue
		}
		h := xxh3.New()
		_, err = io.Copy(h, r)
		r.Close()
		if err == nil {
			sums = append(sums, FileSum{Path: e.Path, XXH3: SumHex(h.Sum64())})
		}
	}
	return sums
}

// SumHex is an xxh3-64 sum as FileSum.XXH3 writes it: 16 lower-case hex
// digits, most significant first.
func SumHex(sum uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], sum)
	return hex.EncodeToString(b[:])
}
