package transfer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/delta"
	"github.com/restoresync/restoresync/treewalk"
)

var update = flag.Bool("update", false, "rewrite transfer/testdata/golden from this build's encoder")

// The golden tests pin the bytes of every message on the wire: each case
// encodes a fixed value, compares the bytes with testdata/golden/NAME.hex,
// and decodes the golden bytes back to the same value. A change to the
// encoding fails them; if it is meant, bump ProtocolVersion and rerun with
// -update. The compressed frames depend on the compressors' output too, so
// a new version of one may need -update without any change of ours (the
// decoding of the old golden must still pass).

// goldenEntries is a file list shaped like a hosting account, with every
// kind of entry, hardlinks of every kind but directories, and every kind
// of extended metadata.
func goldenEntries() []treewalk.Entry {
	acl := []treewalk.ACLEntry{
		{Tag: treewalk.ACLUserObj, Perm: 6, ID: treewalk.ACLUndefinedID},
		{Tag: treewalk.ACLUser, Perm: 4, ID: 33, Name: "www-data"},
		{Tag: treewalk.ACLGroupObj, Perm: 4, ID: treewalk.ACLUndefinedID},
		{Tag: treewalk.ACLMask, Perm: 4, ID: treewalk.ACLUndefinedID},
		{Tag: treewalk.ACLOther, Perm: 4, ID: treewalk.ACLUndefinedID},
	}
	const t0 = 1_700_000_000_123_456_789
	return []treewalk.Entry{
		{Path: ".", Kind: treewalk.KindDir, Mode: 0o755, Uid: 1000, Gid: 1000, User: "alice", Group: "alice", MtimeNs: t0},
		{Path: "index.php", Kind: treewalk.KindFile, Mode: 0o644, Uid: 1000, Gid: 1000, User: "alice", Group: "alice", Size: 1400, MtimeNs: t0 + 1e9,
			Xattrs: []treewalk.Xattr{{Name: "user.origin", Value: []byte("backup")}}, ACL: acl},
		{Path: "index2.php", Kind: treewalk.KindFile, Mode: 0o644, Uid: 1000, Gid: 1000, User: "alice", Group: "alice", Size: 1400, MtimeNs: t0 + 1e9,
			LinkTo: "index.php"},
		{Path: "current", Kind: treewalk.KindSymlink, Mode: 0o777, Uid: 1000, Gid: 1000, User: "alice", Group: "alice", MtimeNs: t0 - 5, LinkTarget: "index.php"},
		{Path: "uploads", Kind: treewalk.KindDir, Mode: 0o2775, Uid: 1000, Gid: 33, User: "alice", Group: "www-data", MtimeNs: t0,
			ACL: acl, DefaultACL: acl},
		{Path: "uploads/disk.img", Kind: treewalk.KindFile, Mode: 0o600, Uid: 0, Gid: 0, User: "root", Group: "root", Size: 1 << 30, MtimeNs: t0, Sparse: true},
		{Path: "uploads/fifo", Kind: treewalk.KindFifo, Mode: 0o600, Uid: 1000, Gid: 1000, User: "alice", Group: "alice", MtimeNs: t0},
		{Path: "uploads/null", Kind: treewalk.KindCharDev, Mode: 0o666, Uid: 0, Gid: 0, MtimeNs: t0, Rdev: 0x103},
		{Path: "uploads/sda", Kind: treewalk.KindBlkDev, Mode: 0o660, Uid: 0, Gid: 6, Group: "disk", MtimeNs: t0, Rdev: 0x800},
		{Path: "suid-ñame\n.bin", Kind: treewalk.KindFile, Mode: 0o4755, Uid: 1000, Gid: 1000, User: "alice", Group: "alice", Size: 0, MtimeNs: t0},
		// Hardlinks of the other kinds (protocol 6).
		{Path: "current.old", Kind: treewalk.KindSymlink, Mode: 0o777, Uid: 1000, Gid: 1000, User: "alice", Group: "alice", MtimeNs: t0 - 5,
			LinkTarget: "index.php", LinkTo: "current"},
		{Path: "uploads/fifo.2", Kind: treewalk.KindFifo, Mode: 0o600, Uid: 1000, Gid: 1000, User: "alice", Group: "alice", MtimeNs: t0, LinkTo: "uploads/fifo"},
		{Path: "uploads/sda.2", Kind: treewalk.KindBlkDev, Mode: 0o660, Uid: 0, Gid: 6, Group: "disk", MtimeNs: t0, Rdev: 0x800, LinkTo: "uploads/sda"},
	}
}

// goldenFile is the content of the golden items: 1400 bytes of PHP.
var goldenFile = []byte(strings.Repeat("<?php echo esc_html( get_option( 'blogname' ) ); ?>\n", 27)[:1400])

// goldenSignature is the full signature of goldenBasis (two 700-byte
// blocks, the smallest).
func goldenSignature(t testing.TB) *delta.Signature {
	sig, err := delta.ComputeSignature(bytes.NewReader(goldenBasis()), int64(len(goldenBasis())), nil)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// goldenBasis is the receiver's older copy of goldenFile: its first block
// differs, its second is the same.
func goldenBasis() []byte {
	b := bytes.Clone(goldenFile)
	copy(b[10:], "OLD VERSION")
	return b
}

// goldenItems are a whole item, a split block and a delta item.
func goldenItems(t testing.TB) []Item {
	en := goldenEntries()
	return []Item{
		{Entry: en[1], Length: 1400},
		{Entry: en[5], Offset: 1 << 29, Length: 1 << 29, Split: true},
		{Entry: en[1], Length: 1400, Delta: goldenSignature(t)},
	}
}

// headerOnly returns items as a receiver decodes them: signatures without
// their sums.
func headerOnly(items []Item) []Item {
	out := slices.Clone(items)
	for i := range out {
		if s := out[i].Delta; s != nil {
			out[i].Delta = &delta.Signature{BlockSizeBytes: s.BlockSizeBytes, FileSizeBytes: s.FileSizeBytes}
		}
	}
	return out
}

// goldenPathErrors are per-entry errors as the decoder returns them.
var goldenPathErrors = []*treewalk.PathError{
	{Path: "locked", Err: &RemoteError{Msg: "open locked: permission denied"}},
	{Path: "uploads/fifo", Err: &RemoteError{Msg: "mkfifo uploads/fifo: operation not permitted"}},
}

// sentPathErrors are goldenPathErrors as the sender has them.
func sentPathErrors() []*treewalk.PathError {
	var out []*treewalk.PathError
	for _, pe := range goldenPathErrors {
		out = append(out, &treewalk.PathError{Path: pe.Path, Err: errors.New(pe.Err.(*RemoteError).Msg)})
	}
	return out
}

// itemResult is what recvItemData made of one item's data.
type itemResult struct {
	Data    string
	ItemErr error
}

// collect reads one item's data with recvItemData into memory (with the
// golden basis for a delta item).
func collect(d *decoder, it *Item) (itemResult, error) {
	w := &basisWriter{basis: goldenBasis()}
	itemErr, err := recvItemData(context.Background(), d, w, it)
	return itemResult{w.out.String(), itemErr}, err
}

// goldenUmask is goldenHello's --chmod umask, 002.
var goldenUmask uint32 = 0o002

// goldenHello asks for every option a Hello can carry.
var goldenHello = Hello{
	Proto: ProtocolVersion, Version: "1.2.3", Role: RoleReceiver, Path: "/home/alice", Compression: "zstd:3",
	Receiver: &ReceiverOptions{
		Owner: ReceiverOwner{NumericIDs: true, Chown: "alice:www-data", Usermap: []string{"1000-1999:alice"},
			Groupmap: []string{"*:www-data"}, Chmod: []string{"Dg+s", "F644"}, ChmodUmask: &goldenUmask, KeepSetID: true},
		BlockSizeBytes: 16 << 20, WriteBufferBytes: 1 << 20, Force: true, Delta: true, DryRun: true,
		Roots: []string{"."}, Filters: []string{"- *.log"},
		NoXattrs: true, NoACLs: true, NoSparse: true, NoSpecials: true, NoDevices: true,
	},
	ReadBufferBytes: 1 << 20, RsyncArgs: []string{"-tpr"}, Shard: 1, Shards: 4,
	Roots:   []SourceRoot{{Base: "/snapshots/daily.0", Rel: "alice", ImpliesRoot: true}},
	Filters: []string{"+ /public_html/", "- *.tmp"}, Verify: true,
}

var (
	goldenReply   = helloReply{Proto: ProtocolVersion, Version: "1.2.3", Codecs: []string{"none", "lz4", "zstd", "gzip"}, Verify: true}
	goldenRefusal = helloReply{Proto: ProtocolVersion, Version: "1.2.3", Codecs: []string{"none"}, Error: "open /srv: permission denied"}
	goldenSkip    = "gz/jpg/mp[34]"
	goldenAuto    = Hello{Proto: ProtocolVersion, Version: "1.2.3", Role: RoleSender, Path: "/snapshots/daily.0/home/alice", Compression: "auto", SkipCompress: &goldenSkip}
	goldenStats   = FrameStats{WireBytes: 1 << 20, WriteSeconds: 0.25, PeerBytes: 3 << 19, PeerSeconds: 0.75, Decisions: 3, Final: "zstd:3", Codecs: []CodecStats{
		{Codec: "zstd:1", Frames: 4, Files: 120, RawBytes: 1 << 20, WireBytes: 340000, CompressSeconds: 0.0085, CompressCPUSeconds: 0.004},
		{Codec: "none", Frames: 2, Files: 3, RawBytes: 500000, WireBytes: 500006},
	}}
	goldenGlob    = Hello{Proto: ProtocolVersion, Version: "1.2.3", Role: RoleGlob, Path: "/snapshots/daily.*/home/alice/wp-config.php", Compression: "none"}
	goldenMatches = helloReply{Proto: ProtocolVersion, Version: "1.2.3", Codecs: []string{"none"},
		Matches: []string{"/snapshots/daily.0/home/alice/wp-config.php", "/snapshots/daily.1/home/alice/wp-config.php"}}
	goldenSums = Hello{Proto: ProtocolVersion, Version: "1.2.3", Role: RoleSums, Compression: "none",
		Roots: []SourceRoot{{Base: "/snapshots/daily.0/home/alice", Rel: "wp-config.php"}}, Filters: []string{"- /*/*"}}
	goldenSumsReply = helloReply{Proto: ProtocolVersion, Version: "1.2.3", Codecs: []string{"none"},
		Sums: []FileSum{{Path: "wp-config.php", XXH3: "4c1f0a92d6e3b871"}}}
	goldenSizes = Hello{Proto: ProtocolVersion, Version: "1.2.3", Role: RoleSizes, Compression: "none",
		SizePaths: []string{"/snapshots/daily.0/home/alice", "/snapshots/daily.0/home/bob"}}
	goldenSizesReply = helloReply{Proto: ProtocolVersion, Version: "1.2.3", Codecs: []string{"none"},
		Sizes: []PathSize{{Bytes: 9764606, Files: 418}, {Error: "lstat /snapshots/daily.0/home/bob: no such file or directory"}}}
)

// goldenCase is one message (or one exchange) on the wire.
type goldenCase struct {
	name string
	// wire returns the bytes: a handshake, or frames.
	wire func(t *testing.T) []byte
	// decode reads the bytes back; want is what it must return.
	decode func(t *testing.T, b []byte) (any, error)
	want   any
}

// framed encodes fn's messages as uncompressed frames, with verify set as
// Hello.Verify sets it.
func framed(verify bool, fn func(e *encoder)) func(t *testing.T) []byte {
	return func(t *testing.T) []byte {
		return messageWire(t, Compression{}, func(e *encoder) { e.verify = verify; fn(e) })
	}
}

// unframed decodes frames with fn, and checks that nothing is left.
func unframed(verify bool, fn func(d *decoder) (any, error)) func(t *testing.T, b []byte) (any, error) {
	return func(t *testing.T, b []byte) (any, error) {
		fr := newFrameReader(bufio.NewReader(bytes.NewReader(b)))
		defer fr.Close()
		d := &decoder{fr: fr, verify: verify}
		v, err := fn(d)
		if err != nil {
			return nil, err
		}
		if rest, err := io.ReadAll(fr); err != nil || len(rest) > 0 {
			return nil, fmt.Errorf("after the message: %d bytes, %v", len(rest), err)
		}
		return v, nil
	}
}

// msgByte decodes a message type byte and what follows with fn.
func msgByte(want byte, fn func(d *decoder) (any, error)) func(d *decoder) (any, error) {
	return func(d *decoder) (any, error) {
		m, err := d.byte()
		if err != nil {
			return nil, err
		}
		if m != want {
			return nil, fmt.Errorf("message %d, want %d", m, want)
		}
		if fn == nil {
			return nil, nil
		}
		return fn(d)
	}
}

// okStatus decodes a statusOK and what follows with fn.
func okStatus(fn func(d *decoder) (any, error)) func(d *decoder) (any, error) {
	return func(d *decoder) (any, error) {
		if err := d.status(); err != nil {
			return nil, err
		}
		return fn(d)
	}
}

func handshake(v any) func(t *testing.T) []byte {
	return func(t *testing.T) []byte {
		var b bytes.Buffer
		if err := writeHandshake(&b, v); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
}

func unhandshake[T any]() func(t *testing.T, b []byte) (any, error) {
	return func(t *testing.T, b []byte) (any, error) {
		var v T
		err := readHandshake(bufio.NewReader(bytes.NewReader(b)), &v)
		return v, err
	}
}

type listReply struct {
	Entries []treewalk.Entry
	Errors  []*treewalk.PathError
	Leaders []int
	Last    bool
	Closed  int
}

// goldenLeaders are the indices of the entries of list that a hardlink
// names.
func goldenLeaders(list []treewalk.Entry) []int {
	var out []int
	for i := range list {
		for j := range list {
			if list[j].LinkTo == list[i].Path {
				out = append(out, i)
				break
			}
		}
	}
	return out
}

func goldenCases(t *testing.T) []goldenCase {
	entries := goldenEntries()
	items := goldenItems(t)
	sig := goldenSignature(t)
	return []goldenCase{
		{"hello", handshake(goldenHello), unhandshake[Hello](), goldenHello},
		{"hello_reply", handshake(goldenReply), unhandshake[helloReply](), goldenReply},
		{"hello_reply_refusal", handshake(goldenRefusal), unhandshake[helloReply](), goldenRefusal},
		{"hello_auto", handshake(goldenAuto), unhandshake[Hello](), goldenAuto},
		{"hello_glob", handshake(goldenGlob), unhandshake[Hello](), goldenGlob},
		{"hello_reply_matches", handshake(goldenMatches), unhandshake[helloReply](), goldenMatches},
		{"hello_sums", handshake(goldenSums), unhandshake[Hello](), goldenSums},
		{"hello_reply_sums", handshake(goldenSumsReply), unhandshake[helloReply](), goldenSumsReply},
		{"hello_sizes", handshake(goldenSizes), unhandshake[Hello](), goldenSizes},
		{"hello_reply_sizes", handshake(goldenSizesReply), unhandshake[helloReply](), goldenSizesReply},

		{"list", framed(false, func(e *encoder) { e.byte(msgList) }), unframed(false, msgByte(msgList, nil)), nil},
		{"list_reply", framed(false, func(e *encoder) {
			e.status(nil)
			e.chunk(&treewalk.Chunk{Entries: entries, Errors: sentPathErrors(), Leaders: goldenLeaders(entries), Last: true, Closed: 1})
		}),
			unframed(false, okStatus(func(d *decoder) (any, error) {
				ch, err := d.chunk()
				return listReply{ch.Entries, ch.Errors, ch.Leaders, ch.Last, ch.Closed}, err
			})), listReply{entries, goldenPathErrors, goldenLeaders(entries), true, 1}},
		{"fatal_reply", framed(false, func(e *encoder) { e.status(errors.New("open /srv: no such file or directory")) }),
			unframed(false, func(d *decoder) (any, error) { return d.status(), nil }), &RemoteError{Msg: "open /srv: no such file or directory"}},

		{"read", framed(false, func(e *encoder) { e.byte(msgRead); e.items(items) }),
			unframed(false, msgByte(msgRead, func(d *decoder) (any, error) { return d.items() })), items},
		{"item_data_whole", framed(false, func(e *encoder) {
			sendItemData(context.Background(), e, &memSource{files: map[string][]byte{"index.php": goldenFile}}, &items[0], 512)
		}), unframed(false, func(d *decoder) (any, error) { return collect(d, &items[0]) }), itemResult{string(goldenFile), nil}},
		{"item_data_verify", framed(true, func(e *encoder) {
			sendItemData(context.Background(), e, &memSource{files: map[string][]byte{"index.php": goldenFile}}, &items[0], 512)
		}), unframed(true, func(d *decoder) (any, error) { return collect(d, &items[0]) }), itemResult{string(goldenFile), nil}},
		{"item_data_error", framed(false, func(e *encoder) {
			sendItemData(context.Background(), e, &memSource{files: map[string][]byte{"index.php": goldenFile}, failAt: map[string]int{"index.php": 100}}, &items[0], 512)
		}), unframed(false, func(d *decoder) (any, error) { return collect(d, &items[0]) }),
			itemResult{string(goldenFile[:100]), &RemoteError{Msg: errReadFailed.Error()}}},
		{"item_data_delta", framed(false, func(e *encoder) {
			sendItemData(context.Background(), e, &memSource{files: map[string][]byte{"index.php": goldenFile}}, &items[2], 512)
		}), unframed(false, func(d *decoder) (any, error) {
			it := headerOnly(items)[2]
			return collect(d, &it)
		}), itemResult{string(goldenFile), nil}},

		{"file_list", framed(false, func(e *encoder) { e.byte(msgFileList); e.entries(entries) }),
			unframed(false, msgByte(msgFileList, func(d *decoder) (any, error) { return d.entries() })), entries},
		{"plan_reply", framed(false, func(e *encoder) {
			e.status(nil)
			e.planReply(PlanResult{Need: []int{1, 5}, Errors: sentPathErrors(), Signatures: map[int]*delta.Signature{1: sig}})
		}), unframed(false, okStatus(func(d *decoder) (any, error) { return d.planReply(entries) })),
			PlanResult{Need: []int{1, 5}, Errors: goldenPathErrors, Signatures: map[int]*delta.Signature{1: sig}}},
		{"write", framed(false, func(e *encoder) { e.byte(msgWrite); e.itemList(items, false) }),
			unframed(false, msgByte(msgWrite, func(d *decoder) (any, error) { return d.items() })), headerOnly(items)},
		{"write_reply", framed(false, func(e *encoder) {
			e.status(nil)
			e.itemErrors([]itemError{
				{0, errKind(errors.New("write index.php: no space left on device")), "write index.php: no space left on device"},
				{1, errKind(fmt.Errorf("%w: basis changed", ErrDeltaFailed)), "delta transfer failed: basis changed"},
				{2, errKind(ErrSplitGone), ErrSplitGone.Error()},
			})
		}), unframed(false, okStatus(func(d *decoder) (any, error) { return d.itemErrors(4) })), []error{
			&RemoteError{Msg: "write index.php: no space left on device"},
			&RemoteError{Msg: "delta transfer failed: basis changed", Kind: ErrDeltaFailed},
			&RemoteError{Msg: ErrSplitGone.Error(), Kind: ErrSplitGone},
			nil,
		}},
		{"commit", framed(false, func(e *encoder) { e.byte(msgCommit); e.entry(&entries[5]) }),
			unframed(false, msgByte(msgCommit, func(d *decoder) (any, error) { return d.entry() })), entries[5]},
		{"commit_reply", framed(false, func(e *encoder) { e.status(nil); e.str("rename uploads/disk.img: no space left on device") }),
			unframed(false, okStatus(func(d *decoder) (any, error) { return d.str() })), "rename uploads/disk.img: no space left on device"},
		{"finish_planned", framed(false, func(e *encoder) { e.byte(msgFinish); e.bool(true) }),
			unframed(false, msgByte(msgFinish, func(d *decoder) (any, error) { return d.bool() })), true},
		{"finish_list", framed(false, func(e *encoder) { e.byte(msgFinish); e.bool(false); e.entries(entries[:3]) }),
			unframed(false, msgByte(msgFinish, func(d *decoder) (any, error) {
				if same, err := d.bool(); err != nil || same {
					return nil, fmt.Errorf("same %v, %v", same, err)
				}
				return d.entries()
			})), entries[:3]},
		{"plan_chunk", framed(false, func(e *encoder) {
			e.byte(msgPlanChunk)
			e.byte(ChunkOptions{Delete: true, Itemize: true}.flags())
			e.chunk(&treewalk.Chunk{Entries: entries, Leaders: goldenLeaders(entries), Closed: 1})
		}), unframed(false, msgByte(msgPlanChunk, func(d *decoder) (any, error) {
			if b, err := d.byte(); err != nil || b != 3 {
				return nil, fmt.Errorf("options %#x, %v", b, err)
			}
			ch, err := d.chunk()
			return listReply{ch.Entries, ch.Errors, ch.Leaders, ch.Last, ch.Closed}, err
		})), listReply{entries, nil, goldenLeaders(entries), false, 1}},
		{"finish_planned_paths", framed(false, func(e *encoder) { e.byte(msgFinishPlanned); e.strings([]string{"uploads/link", "uploads/"}) }),
			unframed(false, msgByte(msgFinishPlanned, func(d *decoder) (any, error) { return d.strings() })), []string{"uploads/link", "uploads/"}},
		{"chunk_changes_reply", framed(false, func(e *encoder) {
			e.status(nil)
			e.changes(Changes{Lines: []string{"*deleting   uploads/old.jpg", ">f+++++++++ uploads/new.jpg"}, Deleted: 1, Errors: sentPathErrors()})
		}), unframed(false, okStatus(func(d *decoder) (any, error) { return d.changes() })),
			Changes{Lines: []string{"*deleting   uploads/old.jpg", ">f+++++++++ uploads/new.jpg"}, Deleted: 1, Errors: goldenPathErrors}},
		{"finish_reply", framed(false, func(e *encoder) { e.status(nil); e.pathErrors(sentPathErrors()) }),
			unframed(false, okStatus(func(d *decoder) (any, error) { return d.pathErrors() })), goldenPathErrors},
		{"bye", framed(false, func(e *encoder) { e.byte(msgBye) }), unframed(false, msgByte(msgBye, nil)), nil},
		{"next", framed(false, func(e *encoder) { e.byte(msgNext) }), unframed(false, msgByte(msgNext, nil)), nil},
		{"stats", framed(false, func(e *encoder) { e.byte(msgStats) }), unframed(false, msgByte(msgStats, nil)), nil},
		{"rate", framed(false, func(e *encoder) { e.byte(msgRate); e.uvarint(3 << 20); e.uvarint(1500000) }),
			unframed(false, msgByte(msgRate, func(d *decoder) (any, error) {
				b, err := d.uvarint()
				if err != nil {
					return nil, err
				}
				us, err := d.uvarint()
				return [2]uint64{b, us}, err
			})), [2]uint64{3 << 20, 1500000}},
		{"stats_reply", framed(false, func(e *encoder) { e.status(nil); e.frameStats(goldenStats) }),
			unframed(false, okStatus(func(d *decoder) (any, error) { return d.frameStats() })), goldenStats},
	}
}

// frameCases pin one frame of each codec, at its default level.
func frameCases() []goldenCase {
	var out []goldenCase
	for _, c := range []Codec{CodecNone, CodecLZ4, CodecZstd, CodecGzip} {
		out = append(out, goldenCase{"frame_" + c.String(),
			func(t *testing.T) []byte {
				var b bytes.Buffer
				fw, err := newFrameWriter(&b, Compression{Codec: c})
				if err != nil {
					t.Fatal(err)
				}
				fw.Write(goldenFile)
				if err := fw.Close(); err != nil {
					t.Fatal(err)
				}
				if got := Codec(b.Bytes()[0]); got != c {
					t.Fatalf("the frame's codec is %s, want %s", got, c)
				}
				return b.Bytes()
			},
			unframed(false, func(d *decoder) (any, error) {
				b := make([]byte, len(goldenFile))
				_, err := io.ReadFull(d.fr, b)
				return string(b), err
			}), string(goldenFile)})
	}
	return out
}

// TestGoldenWire encodes each message from a fixed value and compares the
// bytes with its golden file, then decodes the golden file back to the
// value.
func TestGoldenWire(t *testing.T) {
	cases := append(goldenCases(t), frameCases()...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join("testdata", "golden", tc.name+".hex")
			got := tc.wire(t)
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, formatHex(tc.name, got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			text, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestGoldenWire -update to create it)", err)
			}
			golden, err := parseHex(text)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if !bytes.Equal(got, golden) {
				t.Errorf("the encoding of %s differs from %s at byte %d (bump ProtocolVersion and rerun with -update if that is meant):\n got %x\nwant %x",
					tc.name, path, commonPrefix(got, golden), got, golden)
			}
			v, err := tc.decode(t, golden)
			if err != nil {
				t.Fatalf("decode %s: %v", path, err)
			}
			if want := tc.want; !reflect.DeepEqual(v, want) {
				t.Errorf("decoding %s:\n got %#v\nwant %#v", path, v, want)
			}
		})
	}
}

// formatHex writes b as a golden file: a comment line, then 32 bytes of
// hex per line.
func formatHex(name string, b []byte) []byte {
	var out bytes.Buffer
	fmt.Fprintf(&out, "# %s: %d bytes of restoresync protocol %d (go test -run TestGoldenWire -update rewrites it)\n", name, len(b), ProtocolVersion)
	for len(b) > 0 {
		n := min(len(b), 32)
		out.WriteString(hex.EncodeToString(b[:n]))
		out.WriteByte('\n')
		b = b[n:]
	}
	return out.Bytes()
}

// parseHex reads a golden file: hex digits, whitespace ignored, lines
// starting with "#" skipped.
func parseHex(text []byte) ([]byte, error) {
	var digits strings.Builder
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		digits.WriteString(strings.Join(strings.Fields(line), ""))
	}
	return hex.DecodeString(digits.String())
}
