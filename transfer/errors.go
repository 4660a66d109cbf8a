package transfer

import "errors"

// Sentinels of the protocol, its codecs and its sources, checked with
// errors.Is. The transports' sentinels (ErrConnect, ErrHostKey, ErrTimeout,
// ErrRemoteExited, ErrDaemonSyntax) live in package transport.

// ErrProtocol marks a peer that broke the wire protocol: a bad frame, an
// unknown message, a value out of range. Callers map it to exit code 12.
var ErrProtocol = errors.New("protocol error")

// ErrNoAgent marks, with ErrProtocol, a handshake that failed because the
// remote host has no restoresync agent: something else answered (a shell's
// "command not found", a login banner), or the remote command could not be
// run (exit status 127, "No such file or directory" on its stderr). The
// methods that can do without the agent fall back on the remote's own
// tools then. Check with errors.Is.
var ErrNoAgent = errors.New("no restoresync agent on the remote host")

// noAgentError marks err as ErrNoAgent without changing its text.
type noAgentError struct{ err error }

func (e *noAgentError) Error() string   { return e.err.Error() }
func (e *noAgentError) Unwrap() []error { return []error{e.err, ErrNoAgent} }

// ErrUnknownCodec is returned when a frame or a flag names a codec this
// build does not know.
var ErrUnknownCodec = errors.New("unknown codec")

// ErrSizeMismatch is reported for an item whose data was shorter or longer
// than its announced length.
var ErrSizeMismatch = errors.New("data length differs from the file list")

// ErrVerifyFailed is the item error of --verify (Hello.Verify) when the
// xxh3-128 of the bytes the receiver got differs from the sender's hash of
// the bytes it read from disk: the data was corrupted on the way, and the
// file is not put in place.
var ErrVerifyFailed = errors.New("checksum mismatch (--verify): the data received differs from what the sender read")

// ErrSourceChanged is the item error for a source file whose size or mtime
// differ, after its data was read, from the file list's: it was written to
// since it was listed, so the bytes read may mix two versions. The file is
// not put in place (it would carry the listed mtime, and the quick check
// would then take the mixed content for up to date); the other files go on,
// and a rerun sends it. rsync's wording for the same is "file has vanished"
// (for a deleted file) or a warning that it changed.
var ErrSourceChanged = errors.New("file changed while it was being read")

// ErrOutsideRoot is returned (and told to the client) for a path that
// would leave ServerConfig.Root.
var ErrOutsideRoot = errors.New("path leaves the served root")

// ErrACLText is wrapped by ParseACLText's errors.
var ErrACLText = errors.New("malformed ACL text")

// errHelloFields is wrapped by the error of a handshake whose JSON does not
// fit this version's Hello or helloReply, which Serve then refuses with a
// reply, as it does a version mismatch.
var errHelloFields = errors.New("the peers' versions differ")

// errNoSelection is told to a client whose receiver cannot delete or
// itemize (a Sink that is not a ChunkChanger).
var errNoSelection = errors.New("this receiver cannot delete or itemize")

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
