package transfer

import "errors"

// ErrDeltaFailed is an item error: a delta could not be applied (the
// rebuilt data does not match the sender's hash, or the basis changed or
// cannot be opened). Nothing is put in place; the caller sends the item
// again whole.
var ErrDeltaFailed = errors.New("delta transfer failed")

// ErrSplitGone is the item error of a block of a split file whose
// temporary file is no longer there: another block of the file failed
// first (its error is the one that says why), or the destination was
// changed during the restore. Receivers wrap it; the protocol carries it
// across (RemoteError.Kind), so that a report can prefer the first cause.
var ErrSplitGone = errors.New("temporary file is gone (another block of the file failed, or the destination was changed)")
