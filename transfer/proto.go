package transfer

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/restoresync/restoresync/delta"
	"github.com/restoresync/restoresync/transport"
	"github.com/restoresync/restoresync/treewalk"
)

// ProtocolVersion is the wire protocol this build speaks. A peer announcing
// another version is refused in the handshake with a message naming both.
// Version 2 added native delta: signatures in items and plan replies, copy
// and sum tags in item data, and error kinds in write replies. Version 3
// added selections (Hello.Roots and Hello.Filters, which an older sender
// would ignore and send everything), the delete and itemize requests, and
// extended metadata in entries: xattrs, POSIX ACLs, the sparse flag.
// Optional features asked for in Hello (Verify) are acknowledged in the
// reply, so an older agent that ignores them is recognised. Version 4 added
// the error kind of a block whose split file had already failed
// (ErrSplitGone) and SourceRoot.ImpliesRoot. Version 5 made the handshake
// a sealed wire type: Hello.Receiver is ReceiverOptions, with JSON names of
// its own, and either side refuses a handshake field it does not know.
// Version 6 added the per-entry errors to the itemize reply (an entry a
// restore could not change, as a dry run reports it), and allows LinkTo on
// every kind of entry but directories (hardlinked symlinks, fifos and
// devices), which version 5 refused in the file list; a version-6 sender
// merges Roots that overlap (-R, --files-from), as rsync does; and it has
// RoleGlob and RoleSums with helloReply.Matches and helloReply.Sums: the
// agent expands a pattern beneath the tree it serves, and hashes files
// where they are. Version 7 streams the file list: each msgList asks for
// the next chunk of the sender's walk (treewalk.Chunk: entries, the
// errors met listing them, the indices of its hardlink leaders, and
// whether it is the last), which the sender walks while the receiver
// works and while it serves reads on the same stream; the receiver checks
// the chunks in turn (treewalk.ListChecker: tree order, hardlinks only to
// marked leaders). It also added --compress auto (Hello.Compression
// "auto": each side chooses each frame's codec, which the frame header
// names as before), Hello.SkipCompress, and the stats request (msgStats):
// what the server's frames carried, by codec. Version 8 added the
// receiver's reports (msgRate: the frame bytes a pull's client has read and
// the time since its handshake, sent ahead of each read request), from
// which the sender's --compress auto measures a link that its writes
// into the buffers on the way do not, and FrameStats.PeerBytes and
// PeerSeconds in the stats reply.
// Version 8 also streams a push's list: msgPlanChunk plans each chunk
// of the client's walk, which the receiver checks in turn
// (treewalk.ListChecker), and msgFinishPlanned finishes planned entries by
// path (pushchunks.go).
// Version 8 also added RoleSizes (Hello.SizePaths, helloReply.Sizes):
// the agent sizes many trees in one request without sending their lists,
// and msgNext: a client ends a session and keeps the agent for another
// handshake on the same stream.
// Version 9 does --delete, --dry-run and --itemize-changes of a push
// chunk by chunk: msgPlanChunk opens with the chunk's options
// (ChunkOptions: delete, itemize, dry run), and its reply carries the
// chunk's changes (lines, deleted count, errors) before the plan, which
// a dry run leaves out (chunkchanges.go).
// Version 10 pipelines a pull's list with its data on stream 0: the
// client sends the next msgList as soon as a chunk arrives, ahead of the
// reads of that chunk, and a sender whose walk has no chunk ready while
// further requests wait behind the msgList replies with an empty chunk
// (not the last) instead of holding them; the client asks again.
const ProtocolVersion = 10

// magic opens the handshake in both directions, so that a peer that is not a
// restoresync agent (a login banner, "command not found") is recognised.
const magic = "\x00RSTSYNC"

// Roles a server plays, as requested in Hello.Role.
const (
	RoleSender   = "sender"   // the server walks and reads its tree (pull)
	RoleReceiver = "receiver" // the server writes into its tree (push)
)

// Hello is the client's half of the handshake, sent as JSON after the magic
// and a 4-byte big-endian length. It is a wire type: every field has an
// explicit JSON name, and the server refuses a field it does not know
// (readHandshake); anything that changes the handshake, the frames or the
// messages bumps ProtocolVersion.
type Hello struct {
	// Proto is the client's ProtocolVersion (set by Handshake).
	Proto int `json:"proto"`
	// Version is the client's software version, for messages.
	Version string `json:"version"`
	// Role is the role asked of the server: RoleSender or RoleReceiver.
	Role string `json:"role"`
	// Path is the tree on the server's side, as the user wrote it.
	Path string `json:"path"`
	// Compression is the codec and level both sides use for the frames
	// they send, in ParseCompression form; "auto" (protocol 7) lets each
	// side choose per frame.
	Compression string `json:"compression"`
	// SkipCompress (protocol 7) is the --skip-compress LIST that "auto"
	// sends uncompressed, in rsync's form (suffixes separated by
	// slashes; "" skips none); nil means DefaultSkipCompress.
	SkipCompress *string `json:"skip_compress,omitempty"`
	// Receiver carries the receiver's options (owner mapping, block size)
	// for RoleReceiver, which the server hands to ServerConfig.NewSink;
	// nil means the zero ReceiverOptions.
	Receiver *ReceiverOptions `json:"receiver,omitempty"`
	// ReadBufferBytes is the read size the server uses as a sender
	// (--read-buffer): a whole item's data goes in runs of this many
	// bytes, each cut into chunks of at most chunkBytes that are read
	// straight into the frames; the tar role's read buffer. 0 means
	// chunkBytes. Capped at maxReadBuffer.
	ReadBufferBytes int `json:"read_buffer,omitempty"`
	// RsyncArgs are the rsync option words (e.g. "-tpr") for the
	// RoleRsyncSender role; the server checks them against a whitelist and
	// adds --server, --sender and the path itself.
	RsyncArgs []string `json:"rsync_args,omitempty"`
	// Shard and Shards split the tree of a RoleTarSender between parallel
	// streams: this stream sends shard Shard (0-based) of Shards. Shards 0
	// means 1: the whole tree on one stream.
	Shard  int `json:"shard,omitempty"`
	Shards int `json:"shards,omitempty"`

	// Selection (protocol 3): what a sender sends.
	//
	// Roots, when set, replaces Path: the parts of the sender's tree to
	// send, each at its Rel in the file list (several SRCs, --relative,
	// --files-from).
	Roots []SourceRoot `json:"roots,omitempty"`
	// Filters are the include/exclude rules the sender applies as it
	// walks, in short form ("+ PATTERN" / "- PATTERN").
	Filters []string `json:"filters,omitempty"`

	// Verify (--verify) asks for end-to-end checksums on the raw method's
	// streams: whichever side sends data ends each whole item with a sum
	// tag, the xxh3-128 of the bytes it read from disk, and the receiver
	// checks it against the bytes it got before the file is put in place
	// (ErrVerifyFailed otherwise). Delta items always carry one. The
	// server acknowledges it in its reply; an agent that does not is
	// refused by Handshake.
	Verify bool `json:"verify,omitempty"`

	// SizePaths (protocol 8) are the paths a RoleSizes request sizes.
	SizePaths []string `json:"size_paths,omitempty"`
}

// maxReadBuffer caps a client's --read-buffer request on the server.
const maxReadBuffer = 64 << 20

// helloReply is the server's half of the handshake, a wire type like Hello:
// explicit JSON names, unknown fields refused by the client.
type helloReply struct {
	Proto   int      `json:"proto"`
	Version string   `json:"version"`
	Codecs  []string `json:"codecs"`
	Error   string   `json:"error,omitempty"`
	// Verify acknowledges Hello.Verify.
	Verify bool `json:"verify,omitempty"`
	// Matches are the paths that match a RoleGlob's pattern (none: an
	// empty list); absent for the other roles.
	Matches []string `json:"matches,omitempty"`
	// Sums are a RoleSums reply's content hashes.
	Sums []FileSum `json:"sums,omitempty"`
	// Sizes are a RoleSizes reply's, one per Hello.SizePaths.
	Sizes []PathSize `json:"sizes,omitempty"`
}

const maxHelloBytes = 16 << 20 // a --files-from list travels in it

func writeHandshake(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, len(magic)+4+len(b))
	buf = append(buf, magic...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(b)))
	buf = append(buf, b...)
	_, err = w.Write(buf)
	return err
}

// readHandshake reads the magic, length and JSON into v. A wrong magic is
// reported with the bytes that came instead, which usually explain it.
func readHandshake(r *bufio.Reader, v any) error {
	head := make([]byte, len(magic)+4)
	n, err := io.ReadFull(r, head)
	if n < len(magic) || string(head[:len(magic)]) != magic {
		got := head[:n]
		if rest, _ := r.Peek(r.Buffered()); len(rest) > 0 {
			got = append(got, rest[:min(len(rest), 200)]...)
		}
		if len(got) == 0 && err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return fmt.Errorf("%w: peer closed the stream before the handshake", ErrProtocol)
			}
			// Keep the stream's error (ErrConnect from ssh, the remote
			// command's exit status) for the exit code and the message;
			// a connection that failed is not a protocol error.
			if errors.Is(err, transport.ErrConnect) {
				return err
			}
			return fmt.Errorf("%w: no handshake: %w", ErrProtocol, err)
		}
		err := fmt.Errorf("%w: peer is not a restoresync agent: it sent %q", ErrProtocol, got)
		if transport.IsSFTPOnlyAnswer(got) {
			err = transport.Mark(err, transport.ErrRemoteRefused, transport.ErrSFTPOnly)
		}
		return &noAgentError{err}
	}
	if err != nil {
		return fmt.Errorf("%w: handshake: %w", ErrProtocol, unexpected(err))
	}
	size := binary.BigEndian.Uint32(head[len(magic):])
	if size > maxHelloBytes {
		return fmt.Errorf("%w: handshake of %d bytes", ErrProtocol, size)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return fmt.Errorf("%w: handshake: %w", ErrProtocol, unexpected(err))
	}
	return decodeHandshake(b, v)
}

// decodeHandshake decodes the JSON of a Hello or a helloReply into v,
// refusing fields v does not have: a peer of another version could mean
// something by them that this side would silently drop. A peer that
// announces another ProtocolVersion is decoded leniently instead, so that
// the caller's version check reports the mismatch, naming both versions.
func decodeHandshake(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("data after the JSON object")
	}
	if err == nil {
		return nil
	}
	var peer struct {
		Proto int `json:"proto"`
	}
	if json.Unmarshal(b, &peer) == nil && peer.Proto != ProtocolVersion && json.Unmarshal(b, v) == nil {
		return nil
	}
	return fmt.Errorf("%w: handshake: %w: %w (install the same version on both hosts)", ErrProtocol, err, errHelloFields)
}

// Messages. Each request is one type byte followed by its fields; every
// reply starts with a status byte (statusOK, or statusFatal and a message
// after which the server ends the stream).
const (
	msgList     byte = 1  // pull: the next chunk of the walk; reply: last, entries, walk errors, leaders, closed (empty, not last: none ready yet)
	msgRead     byte = 2  // pull: items; reply: item data for each
	msgFileList byte = 3  // push: entries; reply: needed indices, plan errors
	msgWrite    byte = 4  // push: items, then item data; reply: per-item errors
	msgCommit   byte = 5  // push: an entry whose blocks are all written; reply: error text
	msgFinish   byte = 6  // push: bool "the planned list", else entries; reply: finish errors
	msgBye      byte = 7  // end of session; no reply
	msgStats    byte = 10 // what the server's frames carried so far; reply: FrameStats (framestats.go)
	msgRate     byte = 11 // pull: frame bytes received and microseconds since the handshake, on the client's clock; no reply
	// 8 and 9 were a push's --delete and --itemize-changes on a whole
	// list, until protocol 9 (msgPlanChunk's ChunkOptions).
	// push, a list streamed in chunks (pushchunks.go):
	msgPlanChunk     byte = 12 // options byte, the next chunk: last, entries, no errors, leaders, closed; reply: changes when the options ask for any, then, unless a dry run, as msgFileList's
	msgFinishPlanned byte = 13 // paths of planned entries to finish, in order; reply: finish errors
	msgNext          byte = 14 // end of session, then framesEnd; the server ends its frames with framesEnd and awaits another handshake

	statusOK    byte = 0
	statusFatal byte = 1

	// Item data tags: a file's bytes travel as chunks closed by an end or
	// an error tag. A delta item's data (Item.Delta set) mixes chunks of
	// literal bytes with copies of the receiver's basis blocks, and ends
	// with a sum tag (or an error tag) instead of the end tag.
	tagChunk byte = 1
	tagEnd   byte = 2
	tagErr   byte = 3
	tagCopy  byte = 4 // uvarint first block, uvarint count: basis blocks to copy
	tagSum   byte = 5 // 16 bytes: xxh3-128 of the item's data; ends a delta item, and a whole one with Hello.Verify

	// Kinds of a per-item error in a write reply.
	errKindOther byte = 0
	errKindDelta byte = 1 // wraps ErrDeltaFailed: send the item again whole
	errKindGone  byte = 2 // wraps ErrSplitGone: a consequence of another block's error

	// chunkBytes is the largest chunk a sender writes.
	chunkBytes = 256 << 10
	// maxString bounds any string field (paths, names, error texts).
	maxString = 1 << 20
	// maxCount bounds any count field, so a hostile count cannot make the
	// reader allocate without limit before the data proves it.
	maxCount = 1 << 26
)

// Item is one unit of data to move: a whole regular file, or one block of a
// file split across streams.
type Item struct {
	// Entry is the file's file-list entry (its metadata is applied on
	// arrival).
	Entry treewalk.Entry
	// Offset and Length are the byte range of the file this item carries.
	Offset, Length int64
	// Split marks a block of a split file: it is written into the file's
	// prepared temporary file, which Commit later puts in place.
	Split bool
	// Delta, when not nil, asks for the item as a delta against the
	// receiver's current copy of the file (the basis), which it describes:
	// the sender needs its sums, the receiver only its sizes. For a split
	// item it covers the basis blocks around the item's range.
	Delta *delta.Signature
}

// encoder writes message fields into a frame writer. Errors are sticky in
// the frame writer and surface at flush.
type encoder struct {
	fw  *frameWriter
	tmp [binary.MaxVarintLen64]byte
	// verify ends whole items with a sum tag (Hello.Verify).
	verify bool
}

func (e *encoder) byte(b byte)      { e.tmp[0] = b; e.fw.Write(e.tmp[:1]) }
func (e *encoder) uvarint(v uint64) { e.fw.Write(e.tmp[:binary.PutUvarint(e.tmp[:], v)]) }
func (e *encoder) varint(v int64)   { e.fw.Write(e.tmp[:binary.PutVarint(e.tmp[:], v)]) }
func (e *encoder) bytes(b []byte)   { e.uvarint(uint64(len(b))); e.fw.Write(b) }
func (e *encoder) str(s string)     { e.bytes([]byte(s)) }
func (e *encoder) bool(b bool)      { e.byte(map[bool]byte{false: 0, true: 1}[b]) }
func (e *encoder) flush() error     { return e.fw.Flush() }
func (e *encoder) status(err error) { // statusOK or statusFatal + text
	if err == nil {
		e.byte(statusOK)
		return
	}
	e.byte(statusFatal)
	e.str(err.Error())
}

// Entry encoding. Like rsync's file list (flist.c's XMIT_SAME_* flags), an
// entry is written relative to the one before it in the same list: the
// bytes its path shares with the previous path are not repeated, fields
// equal to the previous entry's are left out, and the mtime is a difference.
// A lone entry is written relative to the zero Entry.
//
//	flags   1 byte   (entrySame* bits)
//	prefix  uvarint  (bytes shared with the previous path)
//	suffix  string   (the rest of the path)
//	kind    1 byte
//	mode, uid, gid uvarint; user, group string  (each unless flagged same)
//	size    varint
//	mtime   varint   (minus the previous entry's)
//	target, linkto string; rdev uvarint
//	more    uvarint  (entryMore* bits; only with the entryMore flag)
//	xattrs  uvarint count, then name string, value bytes each (entryMoreXattrs)
//	acl, default acl: uvarint count, then per entry uvarint tag, perm,
//	        id and a name string (entryMoreACL, entryMoreDefaultACL)
const (
	entrySameMode  = 1 << iota // mode as the previous entry's
	entrySameUid               // uid as the previous entry's
	entrySameGid               // gid as the previous entry's
	entrySameUser              // user name as the previous entry's
	entrySameGroup             // group name as the previous entry's
	entryMore                  // a "more" field follows rdev
	entryFlagsMask = entrySameMode | entrySameUid | entrySameGid | entrySameUser | entrySameGroup | entryMore
)

// Bits of an entry's "more" field: extended metadata, present only on the
// entries that have it, so a list without any costs nothing more.
const (
	entryMoreXattrs         = 1 << iota // xattrs follow
	entryMoreACL                        // an access ACL follows
	entryMoreDefaultACL                 // a default ACL follows
	entryMoreSparse                     // the file has holes
	entryMoreSameACL                    // access ACL as the previous entry's (not empty)
	entryMoreSameDefaultACL             // default ACL as the previous entry's (not empty)
	entryMoreMask           = 1<<iota - 1
)

// Bounds on an entry's extended metadata, so that a hostile list cannot make
// the reader allocate beyond what it really sends, nor hand the writer what
// the kernel would refuse anyway: Linux caps a name at 255 bytes, a value at
// 64 KiB and the list of names at 64 KiB.
const (
	maxXattrs          = 4096    // attributes per entry
	maxXattrValueBytes = 4 << 20 // all values of one entry together
	maxACLEntries      = 8192    // entries per ACL
)

func (e *encoder) entry(en *treewalk.Entry) { e.entryAfter(&treewalk.Entry{}, en) }

func (e *encoder) entryAfter(prev, en *treewalk.Entry) {
	var flags byte
	if en.Mode == prev.Mode {
		flags |= entrySameMode
	}
	if en.Uid == prev.Uid {
		flags |= entrySameUid
	}
	if en.Gid == prev.Gid {
		flags |= entrySameGid
	}
	if en.User == prev.User {
		flags |= entrySameUser
	}
	if en.Group == prev.Group {
		flags |= entrySameGroup
	}
	if len(en.Xattrs) > 0 || len(en.ACL) > 0 || len(en.DefaultACL) > 0 || en.Sparse {
		flags |= entryMore
	}
	prefix := 0
	for prefix < len(en.Path) && prefix < len(prev.Path) && en.Path[prefix] == prev.Path[prefix] {
		prefix++
	}
	e.byte(flags)
	e.uvarint(uint64(prefix))
	e.str(en.Path[prefix:])
	e.byte(byte(en.Kind))
	if flags&entrySameMode == 0 {
		e.uvarint(uint64(en.Mode))
	}
	if flags&entrySameUid == 0 {
		e.uvarint(uint64(en.Uid))
	}
	if flags&entrySameGid == 0 {
		e.uvarint(uint64(en.Gid))
	}
	if flags&entrySameUser == 0 {
		e.str(en.User)
	}
	if flags&entrySameGroup == 0 {
		e.str(en.Group)
	}
	e.varint(en.Size)
	e.varint(en.MtimeNs - prev.MtimeNs) // wraps; decoding wraps back
	e.str(en.LinkTarget)
	e.str(en.LinkTo)
	e.uvarint(en.Rdev)
	if flags&entryMore != 0 {
		e.more(prev, en)
	}
}

// item encodes it; sums says whether its signature goes with its sums (to
// a sender) or as a header (to a receiver).
func (e *encoder) item(it *Item, sums bool) { e.itemAfter(&treewalk.Entry{}, it, sums) }

func (e *encoder) itemAfter(prev *treewalk.Entry, it *Item, sums bool) {
	e.entryAfter(prev, &it.Entry)
	e.varint(it.Offset)
	e.varint(it.Length)
	e.bool(it.Split)
	e.signature(it.Delta, sums)
}

func (e *encoder) pathErrors(errs []*treewalk.PathError) {
	e.uvarint(uint64(len(errs)))
	for _, pe := range errs {
		e.str(pe.Path)
		e.str(pe.Err.Error())
	}
}

// decoder reads message fields from a frame reader; it validates every
// value that could make the reader misbehave.
type decoder struct {
	fr *frameReader
	// verify expects whole items to end with a sum tag (Hello.Verify).
	verify bool
	// scratch holds the last short string field read (strBytes), so
	// that a string costs one allocation, and an entry's path, the
	// previous one's prefix joined to it, one too.
	scratch []byte
}

func (d *decoder) byte() (byte, error) { return d.fr.ReadByte() }

func (d *decoder) uvarint() (uint64, error) {
	v, err := binary.ReadUvarint(d.fr)
	return v, unexpected(err)
}

func (d *decoder) varint() (int64, error) {
	v, err := binary.ReadVarint(d.fr)
	return v, unexpected(err)
}

func (d *decoder) count() (int, error) {
	n, err := d.uvarint()
	if err != nil {
		return 0, err
	}
	if n > maxCount {
		return 0, fmt.Errorf("%w: count %d too large", ErrProtocol, n)
	}
	return int(n), nil
}

func (d *decoder) str() (string, error) {
	b, err := d.strBytes()
	return string(b), err
}

// maxScratchBytes is the longest string field read into the decoder's
// scratch buffer; a longer one gets a buffer of its own, so that one long
// field does not keep its size for the stream's life.
const maxScratchBytes = 4096

// strBytes reads a string field into a buffer that is valid until the
// next call (the decoder's scratch, or a new one for a long field).
func (d *decoder) strBytes() ([]byte, error) {
	n, err := d.uvarint()
	if err != nil {
		return nil, err
	}
	if n > maxString {
		return nil, fmt.Errorf("%w: string of %d bytes", ErrProtocol, n)
	}
	var b []byte
	if n <= maxScratchBytes {
		if d.scratch == nil {
			d.scratch = make([]byte, maxScratchBytes)
		}
		b = d.scratch[:n]
	} else {
		b = make([]byte, n)
	}
	if _, err := io.ReadFull(d.fr, b); err != nil {
		return nil, unexpected(err)
	}
	return b, nil
}

func (d *decoder) bool() (bool, error) {
	b, err := d.byte()
	if err != nil {
		return false, unexpected(err)
	}
	if b > 1 {
		return false, fmt.Errorf("%w: bool %d", ErrProtocol, b)
	}
	return b == 1, nil
}

// status reads a reply's status byte; a fatal status becomes an error
// carrying the server's message.
func (d *decoder) status() error {
	b, err := d.byte()
	if err != nil {
		return unexpected(err)
	}
	switch b {
	case statusOK:
		return nil
	case statusFatal:
		msg, err := d.str()
		if err != nil {
			return err
		}
		return &RemoteError{Msg: msg}
	}
	return fmt.Errorf("%w: status byte %d", ErrProtocol, b)
}

// RemoteError is an error the peer reported, with its text.
type RemoteError struct {
	// Msg is the peer's error text.
	Msg string
	// Kind, when not nil, is the sentinel the peer's error wrapped, when
	// the protocol carries it (ErrDeltaFailed, ErrSplitGone); errors.Is
	// sees it.
	Kind error
}

// Error returns "remote: MSG".
func (e *RemoteError) Error() string { return "remote: " + e.Msg }

// Unwrap returns Kind.
func (e *RemoteError) Unwrap() error { return e.Kind }

// entry decodes and validates one file-list entry.
func (d *decoder) entry() (treewalk.Entry, error) { return d.entryAfter(&treewalk.Entry{}) }

// entryAfter decodes an entry written relative to prev (see entryAfter on
// the encoder) and validates it.
func (d *decoder) entryAfter(prev *treewalk.Entry) (treewalk.Entry, error) {
	var en treewalk.Entry
	var err error
	var k, flags byte
	var mode, uid, gid, prefix uint64
	fail := func(e error) (treewalk.Entry, error) { return treewalk.Entry{}, e }
	if flags, err = d.byte(); err != nil {
		return fail(unexpected(err))
	}
	if flags&^entryFlagsMask != 0 {
		return fail(fmt.Errorf("%w: entry after %q: flags %#x", ErrProtocol, prev.Path, flags))
	}
	if prefix, err = d.uvarint(); err != nil {
		return fail(err)
	}
	if prefix > uint64(len(prev.Path)) {
		return fail(fmt.Errorf("%w: entry after %q: shares %d bytes of a %d-byte path", ErrProtocol, prev.Path, prefix, len(prev.Path)))
	}
	suffix, err := d.strBytes()
	if err != nil {
		return fail(err)
	}
	en.Path = prev.Path[:prefix] + string(suffix) // one allocation: the conversion borrows suffix
	if err := treewalk.ValidPath(en.Path); err != nil {
		return fail(fmt.Errorf("%w: entry %q: %w", ErrProtocol, en.Path, err))
	}
	if k, err = d.byte(); err != nil {
		return fail(unexpected(err))
	}
	en.Kind = treewalk.Kind(k)
	if en.Kind < treewalk.KindFile || en.Kind > treewalk.KindBlkDev {
		return fail(fmt.Errorf("%w: entry %q: unknown kind %d", ErrProtocol, en.Path, k))
	}
	mode, uid, gid = uint64(prev.Mode), uint64(prev.Uid), uint64(prev.Gid)
	if flags&entrySameMode == 0 {
		if mode, err = d.uvarint(); err != nil {
			return fail(err)
		}
	}
	if flags&entrySameUid == 0 {
		if uid, err = d.uvarint(); err != nil {
			return fail(err)
		}
	}
	if flags&entrySameGid == 0 {
		if gid, err = d.uvarint(); err != nil {
			return fail(err)
		}
	}
	if mode > 07777 || uid > 1<<32-1 || gid > 1<<32-1 {
		return fail(fmt.Errorf("%w: entry %q: mode or ids out of range", ErrProtocol, en.Path))
	}
	en.Mode, en.Uid, en.Gid = uint32(mode), uint32(uid), uint32(gid)
	en.User, en.Group = prev.User, prev.Group
	if flags&entrySameUser == 0 {
		if en.User, err = d.str(); err != nil {
			return fail(err)
		}
	}
	if flags&entrySameGroup == 0 {
		if en.Group, err = d.str(); err != nil {
			return fail(err)
		}
	}
	if en.Size, err = d.varint(); err != nil {
		return fail(err)
	}
	if en.Size < 0 || (en.Kind != treewalk.KindFile && en.Size != 0) {
		return fail(fmt.Errorf("%w: entry %q: size %d", ErrProtocol, en.Path, en.Size))
	}
	if en.MtimeNs, err = d.varint(); err != nil {
		return fail(err)
	}
	en.MtimeNs += prev.MtimeNs
	if en.LinkTarget, err = d.str(); err != nil {
		return fail(err)
	}
	if en.LinkTo, err = d.str(); err != nil {
		return fail(err)
	}
	if en.LinkTo != "" {
		if err := treewalk.ValidPath(en.LinkTo); err != nil || en.Kind == treewalk.KindDir || en.LinkTo == "." {
			return fail(fmt.Errorf("%w: entry %q: bad hardlink target %q", ErrProtocol, en.Path, en.LinkTo))
		}
	}
	if en.Kind == treewalk.KindSymlink && en.LinkTarget == "" {
		return fail(fmt.Errorf("%w: entry %q: symlink without a target", ErrProtocol, en.Path))
	}
	if en.Kind != treewalk.KindSymlink && en.LinkTarget != "" {
		return fail(fmt.Errorf("%w: entry %q: symlink target on a %s", ErrProtocol, en.Path, en.Kind))
	}
	if en.Rdev, err = d.uvarint(); err != nil {
		return fail(err)
	}
	if flags&entryMore != 0 {
		if err := d.more(prev, &en); err != nil {
			return fail(fmt.Errorf("entry %q: %w", en.Path, err))
		}
	}
	return en, nil
}

func (d *decoder) entries() ([]treewalk.Entry, error) {
	out, err := d.uncheckedEntries()
	if err != nil {
		return nil, err
	}
	// The list as a whole: no path twice, hardlinks only to earlier
	// leaders of the list, nothing beneath a listed file or symlink.
	if err := treewalk.CheckList(out); err != nil {
		var pe *treewalk.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%w: entry %q: %w", ErrProtocol, pe.Path, pe.Err)
		}
		return nil, fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	return out, nil
}

// uncheckedEntries decodes a list of entries, each checked on its own
// but not the list as a whole.
func (d *decoder) uncheckedEntries() ([]treewalk.Entry, error) {
	n, err := d.count()
	if err != nil {
		return nil, err
	}
	out := make([]treewalk.Entry, 0, min(n, 1<<10)) // grows as entries prove the count
	prev := &treewalk.Entry{}
	for range n {
		e, err := d.entryAfter(prev)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		prev = &out[len(out)-1]
	}
	return out, nil
}

// chunk encodes a list chunk (the msgList reply's body).
func (e *encoder) chunk(ch *treewalk.Chunk) {
	e.bool(ch.Last)
	e.entries(ch.Entries)
	e.pathErrors(ch.Errors)
	e.uvarint(uint64(len(ch.Leaders)))
	for _, i := range ch.Leaders {
		e.uvarint(uint64(i))
	}
	e.uvarint(uint64(ch.Closed))
}

// chunk decodes a list chunk; its entries are checked one by one, and
// the chunk as a part of the list by the caller (treewalk.ListChecker).
func (d *decoder) chunk() (treewalk.Chunk, error) {
	var ch treewalk.Chunk
	var err error
	if ch.Last, err = d.bool(); err != nil {
		return ch, err
	}
	if ch.Entries, err = d.uncheckedEntries(); err != nil {
		return ch, err
	}
	if ch.Errors, err = d.pathErrors(); err != nil {
		return ch, err
	}
	n, err := d.count()
	if err != nil {
		return ch, err
	}
	if n > len(ch.Entries) {
		return ch, fmt.Errorf("%w: %d hardlink leaders in a chunk of %d entries", ErrProtocol, n, len(ch.Entries))
	}
	for range n {
		i, err := d.uvarint()
		if err != nil {
			return ch, err
		}
		ch.Leaders = append(ch.Leaders, int(min(i, 1<<31)))
	}
	closed, err := d.uvarint()
	ch.Closed = int(min(closed, 1<<31)) // the caller's check bounds it
	return ch, err
}

func (e *encoder) entries(list []treewalk.Entry) {
	e.uvarint(uint64(len(list)))
	prev := &treewalk.Entry{}
	for i := range list {
		e.entryAfter(prev, &list[i])
		prev = &list[i]
	}
}

func (d *decoder) item() (Item, error) { return d.itemAfter(&treewalk.Entry{}) }

// itemAfter decodes an item whose entry is written relative to prev.
func (d *decoder) itemAfter(prev *treewalk.Entry) (Item, error) {
	var it Item
	var err error
	if it.Entry, err = d.entryAfter(prev); err != nil {
		return it, err
	}
	if it.Offset, err = d.varint(); err != nil {
		return it, err
	}
	if it.Length, err = d.varint(); err != nil {
		return it, err
	}
	if it.Split, err = d.bool(); err != nil {
		return it, err
	}
	if it.Delta, err = d.signature(); err != nil {
		return it, fmt.Errorf("item %q: %w", it.Entry.Path, err)
	}
	if !it.Entry.HasData() || it.Offset < 0 || it.Length < 0 || it.Offset > it.Entry.Size || it.Length > it.Entry.Size-it.Offset ||
		(!it.Split && (it.Offset != 0 || it.Length != it.Entry.Size)) {
		return it, fmt.Errorf("%w: item %q: range %d+%d of a %d-byte %s", ErrProtocol, it.Entry.Path, it.Offset, it.Length, it.Entry.Size, it.Entry.Kind)
	}
	return it, nil
}

func (d *decoder) items() ([]Item, error) {
	n, err := d.count()
	if err != nil {
		return nil, err
	}
	out := make([]Item, 0, min(n, 1<<10))
	prev := &treewalk.Entry{}
	for range n {
		it, err := d.itemAfter(prev)
		if err != nil {
			return nil, err
		}
		out = append(out, it)
		prev = &out[len(out)-1].Entry
	}
	return out, nil
}

// items encodes items for a sender: signatures with their sums.
func (e *encoder) items(items []Item) { e.itemList(items, true) }

// itemList encodes items; sums as for item.
func (e *encoder) itemList(items []Item, sums bool) {
	e.uvarint(uint64(len(items)))
	prev := &treewalk.Entry{}
	for i := range items {
		e.itemAfter(prev, &items[i], sums)
		prev = &items[i].Entry
	}
}

func (d *decoder) pathErrors() ([]*treewalk.PathError, error) {
	n, err := d.count()
	if err != nil {
		return nil, err
	}
	var out []*treewalk.PathError
	for range n {
		p, err := d.str()
		if err != nil {
			return nil, err
		}
		msg, err := d.str()
		if err != nil {
			return nil, err
		}
		out = append(out, &treewalk.PathError{Path: p, Err: &RemoteError{Msg: msg}})
	}
	return out, nil
}
