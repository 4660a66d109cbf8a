package restore

import (
	"github.com/restoresync/restoresync/restore/dest"
)

// openExtractor opens the safe writer and the tar extractor on dst for
// the tar method's three sources: an agent's tar-sender streams (agent),
// the remote host's own tar, an archive SRC. Each file put in place is
// reported to o.ob as it lands, with unknown totals. Close it with
// closeExtractor.
func openExtractor(o Options, dst string, agent bool) (*dest.Extractor, error) {
	ob := o.ob
	x, err := dest.NewExtractor(dst, o.Writer, dest.ExtractOptions{
		Agent:       agent,
		ArchiveRoot: !agent,
		OnFile: func(p string, size int64) {
			ob.add(1, size)
			ob.file(p, size, ActionWrite)
		},
	})
	if err != nil {
		return nil, err
	}
	ob.start(-1, -1)
	return x, nil
}

// closeExtractor closes x and adds what it did to rep: its counts and its
// per-entry errors, in order. Not safe for concurrent use with other
// writes to rep.
func closeExtractor(x *dest.Extractor, rep *Report) {
	x.Close()
	s := x.Stats()
	rep.Files += s.Files
	rep.Bytes += s.Bytes
	rep.Skipped += s.Skipped
	rep.Dirs += s.Dirs
	rep.Symlinks += s.Symlinks
	rep.Hardlinks += s.Hardlinks
	for _, pe := range s.Errors {
		rep.addError(pe.Path, pe.Err)
	}
}
