// Package transfer moves file lists and file contents between the two ends
// of a restore: the SSH transports (the built-in x/crypto/ssh client, an
// external command like rsync's -e, and the read-only "serve --listen"
// endpoint), the wire protocol, the codecs, and the in-process pipes used
// for tests.
//
// A restore opens several streams, each its own SSH connection running
// "restoresync serve --stdio" on the far side. Each stream starts with a
// versioned JSON handshake (Hello) that names the server's role (sender for
// a pull, receiver for a push), the path and the codec. After it, each
// direction is a sequence of frames (frame.go), each compressed on its own
// and naming its codec, carrying the messages of proto.go: file lists,
// batches of items and their data, plans, commits.
//
// Selections (selection.go, protocol 3): the Hello may name several parts
// of the sender's tree (Roots: several SRCs, --relative, --files-from) and
// include/exclude rules (Filters), which the sender applies as it walks,
// so the file list holds only what was selected. A receiver may be asked
// to delete what a list lacks (msgDelete) and to itemize what a list would
// change without writing (msgItemize).
//
// Native delta (signature.go, delta.go): an item may carry the receiver's
// block signature of its current copy of the file (rsync's algorithm:
// rolling weak sums and truncated strong hashes); the sender answers with
// literal chunks and copies of basis blocks, ending with an xxh3-128 hash
// of the data, and the receiver's reader serves the rebuilt bytes and fails
// rather than end if they do not match (ErrDeltaFailed: send it again
// whole).
//
// Everything read from a peer is validated before use: frame sizes are
// bounded (so is the memory a hostile peer can make us use), paths must be
// clean and relative (treewalk.ValidPath), counts and ranges must fit.
//
// Faults: a sender checks each file's size and mtime after reading it
// (ErrSourceChanged); with Hello.Verify whole items end with an xxh3-128 of
// the bytes read, checked by the receiver (ErrVerifyFailed); a Conn with an
// idle timeout (SetIdleTimeout, rsync's --timeout) closes its stream when no
// byte moves while a request is outstanding (ErrTimeout); an
// RsyncStream's (RsyncStream.SetIdleTimeout) when no byte moves while a
// Read or Write on it waits on the peer.
//
// Sealed wire types: what crosses the wire is a type of this package,
// never a struct of another layer. The handshake's JSON (Hello, its
// ReceiverOptions, helloReply) has an explicit name for every field, and a
// field the reader does not know is refused (ErrProtocol, naming it) unless
// the peer announced another ProtocolVersion, which is then reported. The
// bytes of every message and of a frame of each codec are pinned by
// golden_test.go against testdata/golden (go test -run TestGoldenWire
// -update rewrites them, with a ProtocolVersion bump when they change).
//
// Per-item errors versus stream errors: a request that concerns several
// items or entries (Conn's RecvRead, SendWrite, RecvWrite, Plan, Finish,
// Delete, List) returns their errors first, one per item (nil where it
// succeeded) or per failed entry (treewalk.PathError), and a stream error
// last; Commit returns (itemErr, err) likewise. A non-nil last error means
// the stream is unusable (out of sync, closed, or its peer failed): close
// it, the run cannot go on with it; a per-item error concerns that item
// only, and the stream goes on. A peer's per-item error is a RemoteError
// whose Kind is the sentinel the wire carries (ErrDeltaFailed,
// ErrSplitGone), chosen with errors.Is on the sending side. A handshake
// that found no agent on the remote host wraps ErrNoAgent with ErrProtocol,
// so that callers fall back without reading messages. Every Conn
// method that takes a ctx closes the stream when ctx ends, so that a call
// blocked on the peer returns ctx's error. The sentinels are in errors.go,
// the handshake's wire types in proto.go and receiveropts.go, the replies
// with per-item results in reply.go.
//
// An interrupted stream leaves nothing behind on its own: writing is the
// business of restore's safe writer, which the server side calls through
// Sink.
package transfer
