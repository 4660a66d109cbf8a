package restore

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/transfer"
	"github.com/restoresync/restoresync/treewalk"
)

// The streams' replies for the blocks of one split file come in any order:
// the report keeps one error for the file, and it is the cause, even when a
// block that only found the temporary file gone replied first: a --verify
// checksum mismatch is reported as such, not as "temporary file is gone".
func TestTrackerSplitErrorPrefersCause(t *testing.T) {
	e := treewalk.Entry{Path: "media/victim.bin", Kind: treewalk.KindFile, Size: 3 << 20}
	blocks := make([]transfer.Item, 3)
	for i := range blocks {
		blocks[i] = transfer.Item{Entry: e, Offset: int64(i) << 20, Length: 1 << 20, Split: true}
	}
	gone := &transfer.RemoteError{Msg: "block at 2097152: temporary file is gone", Kind: transfer.ErrSplitGone}
	cause := &transfer.RemoteError{Msg: transfer.ErrVerifyFailed.Error()}
	other := fmt.Errorf("block at 1048576: %w", transfer.ErrSplitGone)
	for _, order := range [][]int{{0, 1, 2}, {0, 2, 1}, {2, 0, 1}, {1, 2, 0}} {
		errs := []error{nil, cause, gone}
		if order[0] == 1 { // another run: the cause is last, two consequences first
			errs = []error{other, cause, gone}
		}
		rep := &Report{}
		b := &batch{items: blocks}
		tr := newTracker(context.Background(), nil, rep, []*batch{b})
		for _, i := range order {
			tr.done(&batch{items: blocks[i : i+1]}, errs[i:i+1])
		}
		if len(rep.Errors) != 1 || rep.Errors[0].Path != e.Path || !strings.Contains(rep.Errors[0].Error, "checksum mismatch") {
			t.Errorf("replies in order %v: errors %+v; want one checksum mismatch", order, rep.Errors)
		}
		if rep.Files != 0 {
			t.Errorf("replies in order %v: %d files counted", order, rep.Files)
		}
	}
	// With no cause at all (the destination changed), the consequence stands.
	rep := &Report{}
	tr := newTracker(context.Background(), nil, rep, []*batch{{items: blocks}})
	tr.done(&batch{items: blocks}, []error{nil, gone, gone})
	if len(rep.Errors) != 1 || !strings.Contains(rep.Errors[0].Error, "temporary file is gone") {
		t.Errorf("only consequences: errors %+v", rep.Errors)
	}
}
