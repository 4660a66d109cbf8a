package transfer

import (
	"errors"
	"fmt"

	"github.com/restoresync/restoresync/treewalk"
)

// Replies of a push that carry per-item results, written by the server
// after the status byte and read by Conn.
//
//	plan reply:  uvarint count, uvarint index each (ascending, entries with
//	             data); path errors; signatures (signatures on the encoder)
//	write reply: uvarint count, then per failed item: uvarint index,
//	             1 byte kind (errKind*), string message

// planReply writes res, a receiver's answer to msgFileList.
func (e *encoder) planReply(res PlanResult) {
	e.uvarint(uint64(len(res.Need)))
	for _, i := range res.Need {
		e.uvarint(uint64(i))
	}
	e.pathErrors(res.Errors)
	e.signatures(res.Signatures)
}

// planReply reads a receiver's answer to the msgFileList of entries: every
// needed index must name an entry with data.
func (d *decoder) planReply(entries []treewalk.Entry) (PlanResult, error) {
	n, err := d.count()
	if err != nil {
		return PlanResult{}, err
	}
	var res PlanResult
	for range n {
		i, err := d.uvarint()
		if err != nil {
			return PlanResult{}, err
		}
		if i >= uint64(len(entries)) || !entries[i].HasData() {
			return PlanResult{}, fmt.Errorf("%w: receiver needs entry %d", ErrProtocol, i)
		}
		res.Need = append(res.Need, int(i))
	}
	if res.Errors, err = d.pathErrors(); err != nil {
		return PlanResult{}, err
	}
	if res.Signatures, err = d.signatures(res.Need); err != nil {
		return PlanResult{}, err
	}
	return res, nil
}

// itemError is one item's error in a write reply.
type itemError struct {
	i    int    // the item's index in the request
	kind byte   // errKind*
	msg  string // the error's text
}

// errKind returns the wire kind of a per-item error: the sentinel it wraps,
// found with errors.Is, that the client must see again (errKindDelta: send
// the item whole; errKindGone: a consequence of another block's error).
func errKind(err error) byte {
	switch {
	case errors.Is(err, ErrDeltaFailed):
		return errKindDelta
	case errors.Is(err, ErrSplitGone):
		return errKindGone
	}
	return errKindOther
}

// itemErrors writes a write reply's per-item errors.
func (e *encoder) itemErrors(errs []itemError) {
	e.uvarint(uint64(len(errs)))
	for _, ie := range errs {
		e.uvarint(uint64(ie.i))
		e.byte(ie.kind)
		e.str(ie.msg)
	}
}

// itemErrors reads a write reply's per-item errors for a request of n
// items: one error per item, nil where it succeeded, each a RemoteError
// whose Kind is the sentinel its wire kind names.
func (d *decoder) itemErrors(n int) ([]error, error) {
	errs := make([]error, n)
	count, err := d.count()
	if err != nil {
		return nil, err
	}
	for range count {
		i, err := d.uvarint()
		if err != nil {
			return nil, err
		}
		kind, err := d.byte()
		if err != nil {
			return nil, unexpected(err)
		}
		msg, err := d.str()
		if err != nil {
			return nil, err
		}
		if i >= uint64(n) || kind > errKindGone {
			return nil, fmt.Errorf("%w: error of kind %d for item %d of %d", ErrProtocol, kind, i, n)
		}
		switch kind {
		case errKindDelta:
			errs[i] = &RemoteError{Msg: msg, Kind: ErrDeltaFailed}
		case errKindGone:
			errs[i] = &RemoteError{Msg: msg, Kind: ErrSplitGone}
		default:
			errs[i] = &RemoteError{Msg: msg}
		}
	}
	return errs, nil
}
