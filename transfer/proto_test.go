package transfer

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/restoresync/restoresync/transport"
	"github.com/restoresync/restoresync/treewalk"
)

// messageWire returns the wire bytes (frames of c) of the messages fn
// encodes.
func messageWire(t testing.TB, c Compression, fn func(e *encoder)) []byte {
	t.Helper()
	var wire bytes.Buffer
	fw, err := newFrameWriter(&wire, c)
	if err != nil {
		t.Fatal(err)
	}
	fn(&encoder{fw: fw})
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	return wire.Bytes()
}

// messageBytes returns the message stream fn encodes, as the decoder sees
// it once the frames are undone.
func messageBytes(t testing.TB, fn func(e *encoder)) []byte {
	t.Helper()
	b, err := decodeFrames(messageWire(t, Compression{}, fn))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// messageDecoder returns a decoder of the message stream msgs, sent as
// uncompressed frames of at most chunk bytes, and a func that ends its
// frame reader.
func messageDecoder(msgs []byte, chunk int) (*decoder, func()) {
	var wire []byte
	for len(msgs) > 0 {
		n := min(len(msgs), chunk)
		wire = append(wire, rawFrame(0, uint64(n), uint64(n), msgs[:n])...)
		msgs = msgs[n:]
	}
	fr := newFrameReader(bufio.NewReader(bytes.NewReader(wire)))
	return &decoder{fr: fr}, func() { drainFrames(fr) }
}

// decodeMessages encodes with enc through zstd frames and decodes with dec.
func decodeMessages(t testing.TB, enc func(e *encoder), dec func(d *decoder) (any, error)) (any, error) {
	t.Helper()
	fr := newFrameReader(bufio.NewReader(bytes.NewReader(messageWire(t, DefaultCompression, enc))))
	defer drainFrames(fr)
	return dec(&decoder{fr: fr})
}

func equalEntries(a, b []treewalk.Entry) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}

// sampleEntries is a file list with every kind of entry and odd values.
func sampleEntries() []treewalk.Entry {
	const mtime = 1_700_000_000_123_456_789
	return []treewalk.Entry{
		{Path: ".", Kind: treewalk.KindDir, Mode: 0o750, Uid: 1001, Gid: 1001, User: "alice", Group: "alice", MtimeNs: mtime},
		{Path: "public_html", Kind: treewalk.KindDir, Mode: 0o755, Uid: 1001, Gid: 99, User: "alice", Group: "nobody", MtimeNs: mtime},
		{Path: "public_html/index.php", Kind: treewalk.KindFile, Mode: 0o644, Uid: 1001, Gid: 1001, Size: 41_234, MtimeNs: mtime},
		{Path: "public_html/index2.php", Kind: treewalk.KindFile, Mode: 0o644, Size: 41_234, MtimeNs: mtime, LinkTo: "public_html/index.php"},
		{Path: "public_html/current", Kind: treewalk.KindSymlink, Mode: 0o777, LinkTarget: "../releases/2024-01-01", MtimeNs: -1},
		{Path: "bin/su-helper", Kind: treewalk.KindFile, Mode: 0o4755, Uid: math.MaxUint32, Gid: math.MaxUint32, Size: 0, MtimeNs: math.MaxInt64},
		{Path: "run/queue", Kind: treewalk.KindFifo, Mode: 0o600, MtimeNs: math.MinInt64},
		{Path: "dev/null", Kind: treewalk.KindCharDev, Mode: 0o666, Rdev: 0x103},
		{Path: "dev/sda", Kind: treewalk.KindBlkDev, Mode: 0o660, Rdev: math.MaxUint64},
		{Path: "mail/cur/1700000000.M1P2.host,S=1234:2,S", Kind: treewalk.KindFile, Mode: 0o600, Size: 1234, User: "ü-user", Group: "grp\x00x"},
		{Path: "odd/name with\nnewline and \xff byte", Kind: treewalk.KindFile, Mode: 0o7777, Size: 1 << 40},
		// Extended metadata: xattrs (binary values), ACLs (the second
		// entry repeats the first's: sent as "same"), a sparse file.
		{Path: "shared", Kind: treewalk.KindDir, Mode: 0o2770, MtimeNs: 5,
			Xattrs:     []treewalk.Xattr{{Name: "trusted.md5", Value: []byte{0, 1, 0xff}}, {Name: "user.origin", Value: []byte("backup")}},
			ACL:        sampleACL,
			DefaultACL: sampleACL},
		{Path: "shared/doc.txt", Kind: treewalk.KindFile, Mode: 0o660, Size: 10, ACL: sampleACL},
		{Path: "shared/ping", Kind: treewalk.KindFile, Mode: 0o755, Size: 1 << 20, Sparse: true,
			Xattrs: []treewalk.Xattr{{Name: "security.capability", Value: []byte{1, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}}},
		{Path: "shared/vm.img", Kind: treewalk.KindFile, Mode: 0o600, Size: 1 << 30, Sparse: true},
	}
}

// sampleACL is a POSIX ACL with a named user and a named group.
var sampleACL = []treewalk.ACLEntry{
	{Tag: treewalk.ACLUserObj, Perm: 7, ID: treewalk.ACLUndefinedID},
	{Tag: treewalk.ACLUser, Perm: 6, ID: 33, Name: "www-data"},
	{Tag: treewalk.ACLGroupObj, Perm: 5, ID: treewalk.ACLUndefinedID},
	{Tag: treewalk.ACLGroup, Perm: 4, ID: 1234},
	{Tag: treewalk.ACLMask, Perm: 7, ID: treewalk.ACLUndefinedID},
	{Tag: treewalk.ACLOther, Perm: 0, ID: treewalk.ACLUndefinedID},
}

// sampleItems returns whole-file and split items of entries' data files.
func sampleItems(entries []treewalk.Entry) []Item {
	var items []Item
	for _, e := range entries {
		if !e.HasData() {
			continue
		}
		items = append(items, Item{Entry: e, Length: e.Size})
		if e.Size > 2 {
			items = append(items,
				Item{Entry: e, Offset: 0, Length: e.Size / 2, Split: true},
				Item{Entry: e, Offset: e.Size / 2, Length: e.Size - e.Size/2, Split: true},
				Item{Entry: e, Offset: e.Size, Length: 0, Split: true})
		}
	}
	return items
}

func TestEntriesRoundTrip(t *testing.T) {
	entries := sampleEntries()
	got, err := decodeMessages(t, func(e *encoder) { e.entries(entries) }, func(d *decoder) (any, error) { return d.entries() })
	if err != nil || !equalEntries(got.([]treewalk.Entry), entries) {
		t.Fatalf("entries round trip: %v\n got %+v\nwant %+v", err, got, entries)
	}
	items := sampleItems(entries)
	got, err = decodeMessages(t, func(e *encoder) { e.items(items) }, func(d *decoder) (any, error) { return d.items() })
	if err != nil || !reflect.DeepEqual(got, items) {
		t.Fatalf("items round trip: %v\n got %+v\nwant %+v", err, got, items)
	}
	pes := []*treewalk.PathError{{Path: "a", Err: errors.New("permission denied")}, {Path: "b/c", Err: errors.New("")}}
	got, err = decodeMessages(t, func(e *encoder) { e.pathErrors(pes) }, func(d *decoder) (any, error) { return d.pathErrors() })
	if err != nil {
		t.Fatal(err)
	}
	for i, pe := range got.([]*treewalk.PathError) {
		var re *RemoteError
		if pe.Path != pes[i].Path || !errors.As(pe.Err, &re) || re.Msg != pes[i].Err.Error() {
			t.Errorf("path error %d: got %q, want %q", i, pe, pes[i])
		}
	}
}

// rawEntry is an entry's fields as integers, to encode values that
// treewalk.Entry cannot hold.
type rawEntry struct {
	path, user, group, target, linkTo string
	kind                              byte
	mode, uid, gid, rdev              uint64
	size, mtime                       int64
}

// encode writes r with no field shared with the entry before it (flags 0,
// prefix 0), which decodes the same wherever it stands in a list.
func (r rawEntry) encode(e *encoder) {
	e.byte(0)
	e.uvarint(0)
	e.str(r.path)
	e.byte(r.kind)
	e.uvarint(r.mode)
	e.uvarint(r.uid)
	e.uvarint(r.gid)
	e.str(r.user)
	e.str(r.group)
	e.varint(r.size)
	e.varint(r.mtime)
	e.str(r.target)
	e.str(r.linkTo)
	e.uvarint(r.rdev)
}

func TestDecoderRejectsEntries(t *testing.T) {
	file := rawEntry{path: "public_html/wp-config.php", kind: byte(treewalk.KindFile), mode: 0o640, size: 10}
	with := func(f func(r *rawEntry)) rawEntry { r := file; f(&r); return r }
	tests := []struct {
		name string
		e    rawEntry
		msg  string
	}{
		{"absolute", with(func(r *rawEntry) { r.path = "/etc/passwd" }), "absolute"},
		{"dotdot", with(func(r *rawEntry) { r.path = "../x" }), `".."`},
		{"dotdot only", with(func(r *rawEntry) { r.path = ".." }), `".."`},
		{"inner dotdot", with(func(r *rawEntry) { r.path = "a/../b" }), `".."`},
		{"trailing dotdot", with(func(r *rawEntry) { r.path = "a/.." }), `".."`},
		{"double slash", with(func(r *rawEntry) { r.path = "a//b" }), "not a clean path"},
		{"trailing slash", with(func(r *rawEntry) { r.path = "a/" }), "not a clean path"},
		{"empty", with(func(r *rawEntry) { r.path = "" }), "empty"},
		{"NUL", with(func(r *rawEntry) { r.path = "a\x00b" }), "NUL"},
		{"dot slash", with(func(r *rawEntry) { r.path = "./a" }), "not a clean path"},
		{"inner dot", with(func(r *rawEntry) { r.path = "a/./b" }), "not a clean path"},
		{"kind 0", with(func(r *rawEntry) { r.kind = 0 }), "unknown kind 0"},
		{"kind 7", with(func(r *rawEntry) { r.kind = 7 }), "unknown kind 7"},
		{"kind 255", with(func(r *rawEntry) { r.kind = 255 }), "unknown kind 255"},
		{"mode 010000", with(func(r *rawEntry) { r.mode = 0o10000 }), "out of range"},
		{"mode huge", with(func(r *rawEntry) { r.mode = math.MaxUint64 }), "out of range"},
		{"uid 2^32", with(func(r *rawEntry) { r.uid = 1 << 32 }), "out of range"},
		{"gid 2^32", with(func(r *rawEntry) { r.gid = 1 << 32 }), "out of range"},
		{"negative size", with(func(r *rawEntry) { r.size = -1 }), "size -1"},
		{"min size", with(func(r *rawEntry) { r.size = math.MinInt64 }), "size"},
		{"size on a dir", with(func(r *rawEntry) { r.kind = byte(treewalk.KindDir) }), "size 10"},
		{"size on a symlink", with(func(r *rawEntry) { r.kind = byte(treewalk.KindSymlink); r.target = "x" }), "size 10"},
		{"symlink without target", with(func(r *rawEntry) { r.kind = byte(treewalk.KindSymlink); r.size = 0 }), "symlink"},
		{"target on a file", with(func(r *rawEntry) { r.target = "/etc/shadow" }), "symlink target"},
		{"target on a dir", with(func(r *rawEntry) { r.kind = byte(treewalk.KindDir); r.size = 0; r.target = "x" }), "symlink target"},
		{"LinkTo dotdot", with(func(r *rawEntry) { r.linkTo = "../x" }), `hardlink target "../x"`},
		{"LinkTo absolute", with(func(r *rawEntry) { r.linkTo = "/etc/shadow" }), "hardlink target"},
		{"LinkTo dot", with(func(r *rawEntry) { r.linkTo = "." }), "hardlink target"},
		{"LinkTo NUL", with(func(r *rawEntry) { r.linkTo = "a\x00" }), "hardlink target"},
		{"LinkTo on a dir", with(func(r *rawEntry) { r.kind = byte(treewalk.KindDir); r.size = 0; r.linkTo = "a" }), "hardlink target"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The bad entry comes second: the first must not hide it.
			_, err := decodeMessages(t, func(e *encoder) {
				e.uvarint(2)
				file.encode(e)
				tt.e.encode(e)
			}, func(d *decoder) (any, error) { return d.entries() })
			checkNamedProtocolError(t, err, tt.e.path, tt.msg)
			// The same entry alone, as in msgCommit, and inside an item.
			_, err = decodeMessages(t, tt.e.encode, func(d *decoder) (any, error) { return d.entry() })
			checkNamedProtocolError(t, err, tt.e.path, tt.msg)
			_, err = decodeMessages(t, func(e *encoder) {
				e.uvarint(1)
				tt.e.encode(e)
				e.varint(0)
				e.varint(tt.e.size)
				e.bool(false)
			}, func(d *decoder) (any, error) { return d.items() })
			checkNamedProtocolError(t, err, tt.e.path, tt.msg)
		})
	}
}

// checkNamedProtocolError checks that err is a protocol error naming the
// entry at path and saying msg.
func checkNamedProtocolError(t *testing.T, err error, path, msg string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("entry %q accepted", path)
	case !errors.Is(err, ErrProtocol):
		t.Errorf("entry %q: error %q does not wrap ErrProtocol", path, err)
	case !strings.Contains(err.Error(), strconv.Quote(path)):
		t.Errorf("entry %q: error %q does not name it", path, err)
	case !strings.Contains(err.Error(), msg):
		t.Errorf("entry %q: error %q does not say %q", path, err, msg)
	}
}

func TestDecoderRejectsItems(t *testing.T) {
	file := treewalk.Entry{Path: "uploads/big.tar", Kind: treewalk.KindFile, Mode: 0o644, Size: 1000}
	dir := treewalk.Entry{Path: "uploads", Kind: treewalk.KindDir, Mode: 0o755}
	link := treewalk.Entry{Path: "uploads/same.tar", Kind: treewalk.KindFile, Size: 1000, LinkTo: "uploads/big.tar"}
	fifo := treewalk.Entry{Path: "uploads/fifo", Kind: treewalk.KindFifo}
	tests := []struct {
		name string
		it   Item
	}{
		{"negative offset", Item{Entry: file, Offset: -1, Length: 1, Split: true}},
		{"negative length", Item{Entry: file, Offset: 0, Length: -1, Split: true}},
		{"offset past end", Item{Entry: file, Offset: 1001, Length: 0, Split: true}},
		{"range past end", Item{Entry: file, Offset: 500, Length: 501, Split: true}},
		{"length overflow", Item{Entry: file, Offset: 500, Length: math.MaxInt64, Split: true}},
		{"offset overflow", Item{Entry: file, Offset: math.MaxInt64, Length: math.MaxInt64, Split: true}},
		{"whole file short", Item{Entry: file, Offset: 0, Length: 999}},
		{"whole file long", Item{Entry: file, Offset: 0, Length: 1001}},
		{"whole file offset", Item{Entry: file, Offset: 1, Length: 999}},
		{"directory", Item{Entry: dir}},
		{"hardlink follower", Item{Entry: link, Length: 1000}},
		{"fifo", Item{Entry: fifo}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			good := Item{Entry: file, Length: file.Size}
			_, err := decodeMessages(t, func(e *encoder) { e.items([]Item{good, tt.it}) }, func(d *decoder) (any, error) { return d.items() })
			checkNamedProtocolError(t, err, tt.it.Entry.Path, "range")
		})
	}
	// A split flag that is not a bool.
	_, err := decodeMessages(t, func(e *encoder) {
		e.uvarint(1)
		e.entry(&file)
		e.varint(0)
		e.varint(file.Size)
		e.byte(2)
	}, func(d *decoder) (any, error) { return d.items() })
	if !errors.Is(err, ErrProtocol) {
		t.Errorf("split byte 2: %v", err)
	}
}

func TestDecoderLimitsAndTruncation(t *testing.T) {
	entries := sampleEntries()
	full := messageBytes(t, func(e *encoder) { e.entries(entries) })
	// Every truncation of a valid list is an unexpected EOF.
	for n := 0; n < len(full); n += 1 + n/50 {
		d, stop := messageDecoder(full[:n], 13)
		_, err := d.entries()
		stop()
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("list cut at %d of %d bytes: error %v, want unexpected EOF", n, len(full), err)
		}
	}
	tests := []struct {
		name string
		enc  func(e *encoder)
		dec  func(d *decoder) (any, error)
		want error
	}{
		{"huge count", func(e *encoder) { e.uvarint(maxCount + 1) }, func(d *decoder) (any, error) { return d.entries() }, ErrProtocol},
		{"huge item count", func(e *encoder) { e.uvarint(math.MaxUint64) }, func(d *decoder) (any, error) { return d.items() }, ErrProtocol},
		{"huge error count", func(e *encoder) { e.uvarint(1 << 40) }, func(d *decoder) (any, error) { return d.pathErrors() }, ErrProtocol},
		{"count without entries", func(e *encoder) { e.uvarint(maxCount) }, func(d *decoder) (any, error) { return d.entries() }, io.ErrUnexpectedEOF},
		{"huge string", func(e *encoder) { e.uvarint(maxString + 1) }, func(d *decoder) (any, error) { return d.str() }, ErrProtocol},
		{"string without bytes", func(e *encoder) { e.uvarint(maxString) }, func(d *decoder) (any, error) { return d.str() }, io.ErrUnexpectedEOF},
		{"status 2", func(e *encoder) { e.byte(2) }, func(d *decoder) (any, error) { return nil, d.status() }, ErrProtocol},
		{"no status", func(e *encoder) {}, func(d *decoder) (any, error) { return nil, d.status() }, io.ErrUnexpectedEOF},
		{"bool 7", func(e *encoder) { e.byte(7) }, func(d *decoder) (any, error) { return d.bool() }, ErrProtocol},
		{"no bool", func(e *encoder) {}, func(d *decoder) (any, error) { return d.bool() }, io.ErrUnexpectedEOF},
		{"no varint", func(e *encoder) {}, func(d *decoder) (any, error) { return d.varint() }, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		got, err := decodeMessages(t, tt.enc, tt.dec)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: got %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
	// A fatal status carries the server's message.
	_, err := decodeMessages(t, func(e *encoder) { e.status(errors.New("open /srv/backup: no such file")) }, func(d *decoder) (any, error) { return nil, d.status() })
	var re *RemoteError
	if !errors.As(err, &re) || re.Msg != "open /srv/backup: no such file" {
		t.Errorf("fatal status: %v", err)
	}
}

// itemRecord is what a recordingWriter saw of one item.
type itemRecord struct {
	data []byte
	err  error // the reader's error, io.EOF excluded
}

// recordingWriter is an ItemWriter that keeps what it reads. With stopAfter
// set, it returns errStopped after reading that many bytes of an item of
// that length, without draining it.
type recordingWriter struct {
	records   []itemRecord
	stopAfter int64
}

var errStopped = errors.New("disk full")

func (w *recordingWriter) WriteItem(ctx context.Context, it *Item, r io.Reader) error {
	var rec itemRecord
	buf := make([]byte, 3)
	for {
		if w.stopAfter > 0 && int64(len(rec.data)) >= w.stopAfter {
			w.records = append(w.records, itemRecord{rec.data, errStopped})
			return errStopped
		}
		n, err := r.Read(buf)
		rec.data = append(rec.data, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			rec.err = err
			break
		}
	}
	w.records = append(w.records, rec)
	return rec.err
}

// TestItemDataErrorsKeepStreamInSync sends item data as a misbehaving
// sender would and checks each item's outcome and that the next item
// still decodes.
func TestItemDataErrorsKeepStreamInSync(t *testing.T) {
	chunks := func(e *encoder, end byte, parts ...string) {
		for _, p := range parts {
			e.byte(tagChunk)
			e.str(p)
		}
		e.byte(end)
	}
	type step struct {
		name      string
		length    int64
		enc       func(e *encoder)
		stopAfter int64
		want      string // bytes the writer sees
		wantErr   error  // ErrSizeMismatch, errStopped, or a *RemoteError to match by text
	}
	big := strings.Repeat("x", 300_000) // longer than a frame: crosses frames
	steps := []step{
		{"ok", 5, func(e *encoder) { chunks(e, tagEnd, "hel", "lo") }, 0, "hello", nil},
		{"sender error mid-file", 10, func(e *encoder) {
			chunks(e, tagErr, "abc")
			e.str("read wp-config.php: input/output error")
		}, 0, "abc", &RemoteError{Msg: "read wp-config.php: input/output error"}},
		{"ok after error", 3, func(e *encoder) { chunks(e, tagEnd, "xyz") }, 0, "xyz", nil},
		{"sender error at open", 2, func(e *encoder) { e.byte(tagErr); e.str("open: permission denied") }, 0, "", &RemoteError{Msg: "open: permission denied"}},
		{"one chunk too long", 3, func(e *encoder) { chunks(e, tagEnd, "abcdef") }, 0, "", ErrSizeMismatch},
		{"extra chunk", 3, func(e *encoder) { chunks(e, tagEnd, "abc", "d") }, 0, "abc", ErrSizeMismatch},
		{"extra chunk then error", 3, func(e *encoder) { chunks(e, tagErr, "abc", "d"); e.str("late") }, 0, "abc", ErrSizeMismatch},
		{"too few", 6, func(e *encoder) { chunks(e, tagEnd, "abc") }, 0, "abc", ErrSizeMismatch},
		{"nothing of a file", 6, func(e *encoder) { e.byte(tagEnd) }, 0, "", ErrSizeMismatch},
		{"empty", 0, func(e *encoder) { e.byte(tagEnd) }, 0, "", nil},
		{"empty chunks", 4, func(e *encoder) { chunks(e, tagEnd, "", "da", "", "ta", "") }, 0, "data", nil},
		{"big", int64(len(big)), func(e *encoder) { chunks(e, tagEnd, big[:chunkBytes], big[chunkBytes:]) }, 0, big, nil},
		{"big too long", int64(len(big)) - 1, func(e *encoder) { chunks(e, tagEnd, big[:chunkBytes], big[chunkBytes:]) }, 0, big[:chunkBytes], ErrSizeMismatch},
		{"writer gives up", int64(len(big)), func(e *encoder) { chunks(e, tagEnd, big[:chunkBytes], big[chunkBytes:]) }, 3, "xxx", errStopped},
		{"last ok", 4, func(e *encoder) { chunks(e, tagEnd, "last") }, 0, "last", nil},
	}
	for _, c := range []Compression{{}, DefaultCompression} {
		wire := messageWire(t, c, func(e *encoder) {
			for _, s := range steps {
				s.enc(e)
			}
		})
		fr := newFrameReader(bufio.NewReader(bytes.NewReader(wire)))
		d := &decoder{fr: fr}
		for _, s := range steps {
			w := &recordingWriter{stopAfter: s.stopAfter}
			it := &Item{Entry: treewalk.Entry{Path: s.name, Kind: treewalk.KindFile, Size: s.length}, Length: s.length}
			itemErr, fatal := recvItemData(context.Background(), d, w, it)
			if fatal != nil {
				t.Fatalf("%s: %s: stream error %v", c, s.name, fatal)
			}
			if len(w.records) != 1 {
				t.Fatalf("%s: %s: WriteItem called %d times", c, s.name, len(w.records))
			}
			rec := w.records[0]
			if string(rec.data) != s.want {
				t.Errorf("%s: %s: writer got %d bytes %.20q, want %d bytes %.20q", c, s.name, len(rec.data), rec.data, len(s.want), s.want)
			}
			var wantRemote *RemoteError
			switch {
			case s.wantErr == nil:
				if itemErr != nil || rec.err != nil {
					t.Errorf("%s: %s: item error %v, reader error %v", c, s.name, itemErr, rec.err)
				}
			case errors.As(s.wantErr, &wantRemote):
				var re *RemoteError
				if !errors.As(itemErr, &re) || re.Msg != wantRemote.Msg {
					t.Errorf("%s: %s: item error %#v, want %#v", c, s.name, itemErr, wantRemote)
				}
				if !errors.As(rec.err, &re) {
					t.Errorf("%s: %s: the writer's reader failed with %v, want the sender's error", c, s.name, rec.err)
				}
			default:
				if !errors.Is(itemErr, s.wantErr) {
					t.Errorf("%s: %s: item error %v, want %v", c, s.name, itemErr, s.wantErr)
				}
				if s.wantErr == ErrSizeMismatch && !errors.Is(rec.err, ErrSizeMismatch) {
					t.Errorf("%s: %s: the writer's reader failed with %v, want %v", c, s.name, rec.err, ErrSizeMismatch)
				}
			}
		}
		if b, err := d.byte(); err != io.EOF {
			t.Errorf("%s: after the last item: byte %d, %v; want io.EOF", c, b, err)
		}
		drainFrames(fr)
	}
}

func TestItemDataWireErrors(t *testing.T) {
	tests := []struct {
		name string
		enc  func(e *encoder)
		want error
	}{
		{"unknown tag", func(e *encoder) { e.byte(9) }, ErrProtocol},
		{"chunk too big", func(e *encoder) { e.byte(tagChunk); e.uvarint(maxFrameRaw + 1) }, ErrProtocol},
		{"cut in a chunk", func(e *encoder) { e.byte(tagChunk); e.uvarint(10); e.fw.Write([]byte("abc")) }, io.ErrUnexpectedEOF},
		{"cut before the end tag", func(e *encoder) { e.byte(tagChunk); e.str("abc") }, io.ErrUnexpectedEOF},
		{"cut in an error", func(e *encoder) { e.byte(tagErr); e.uvarint(10) }, io.ErrUnexpectedEOF},
		{"nothing", func(e *encoder) {}, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		fr := newFrameReader(bufio.NewReader(bytes.NewReader(messageWire(t, Compression{}, tt.enc))))
		it := &Item{Entry: treewalk.Entry{Path: "f", Kind: treewalk.KindFile, Size: 3}, Length: 3}
		itemErr, fatal := recvItemData(context.Background(), &decoder{fr: fr}, &recordingWriter{}, it)
		if !errors.Is(fatal, tt.want) || itemErr != nil {
			t.Errorf("%s: item error %v, stream error %v; want stream error %v", tt.name, itemErr, fatal, tt.want)
		}
		drainFrames(fr)
	}
}

// memSource is an ItemSource over in-memory files. A missing path fails to
// open; short holds files that yield fewer bytes than their entry says,
// and failAt files whose read fails after that many bytes.
type memSource struct {
	files  map[string][]byte
	short  map[string]int
	failAt map[string]int
}

var errReadFailed = errors.New("read: input/output error")

func (s *memSource) Open(ctx context.Context, it *Item) (io.ReadCloser, error) {
	b, ok := s.files[it.Entry.Path]
	if !ok {
		return nil, fmt.Errorf("open %s: no such file or directory", it.Entry.Path)
	}
	b = b[min(int64(len(b)), it.Offset):min(int64(len(b)), it.Offset+it.Length)]
	if n, ok := s.short[it.Entry.Path]; ok {
		b = b[:n]
	}
	var r io.Reader = bytes.NewReader(b)
	if n, ok := s.failAt[it.Entry.Path]; ok {
		r = io.MultiReader(bytes.NewReader(b[:n]), errReader{errReadFailed})
	}
	return io.NopCloser(r), nil
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// TestSendItemDataToRecv runs sendItemData against recvItemData: the
// sender's failures reach the receiver as RemoteErrors with their text.
func TestSendItemDataToRecv(t *testing.T) {
	big := textBytes(11, 3*chunkBytes+5)
	src := &memSource{
		files:  map[string][]byte{"big.sql": big, "short.php": []byte("<?php echo 1;"), "bad.jpg": big, "empty": nil},
		short:  map[string]int{"short.php": 5},
		failAt: map[string]int{"bad.jpg": chunkBytes + 1},
	}
	item := func(p string, off, n int64) Item {
		return Item{Entry: treewalk.Entry{Path: p, Kind: treewalk.KindFile, Size: int64(len(src.files[p]))}, Offset: off, Length: n, Split: true}
	}
	items := []Item{
		item("big.sql", 0, int64(len(big))),
		item("missing.php", 0, 0),
		item("short.php", 0, 13),
		item("big.sql", chunkBytes-1, chunkBytes+2),
		item("bad.jpg", 0, int64(len(big))),
		item("empty", 0, 0),
	}
	var wire bytes.Buffer
	fw, err := newFrameWriter(&wire, Compression{Codec: CodecLZ4})
	if err != nil {
		t.Fatal(err)
	}
	enc := &encoder{fw: fw}
	var sendErrs []error
	for i := range items {
		sendErrs = append(sendErrs, sendItemData(context.Background(), enc, src, &items[i], chunkBytes))
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	wantSendErr := []string{"", "no such file", "shrank to 5 bytes", "", "input/output error", ""}
	fr := newFrameReader(bufio.NewReader(&wire))
	defer drainFrames(fr)
	d := &decoder{fr: fr}
	for i := range items {
		if (sendErrs[i] == nil) != (wantSendErr[i] == "") || (sendErrs[i] != nil && !strings.Contains(sendErrs[i].Error(), wantSendErr[i])) {
			t.Errorf("item %d: sendItemData = %v, want %q", i, sendErrs[i], wantSendErr[i])
		}
		w := &recordingWriter{}
		itemErr, fatal := recvItemData(context.Background(), d, w, &items[i])
		if fatal != nil {
			t.Fatalf("item %d: %v", i, fatal)
		}
		if sendErrs[i] == nil {
			it := items[i]
			if want := big[it.Offset : it.Offset+it.Length]; items[i].Entry.Path == "big.sql" && !bytes.Equal(w.records[0].data, want) {
				t.Errorf("item %d: got %d bytes, want %d", i, len(w.records[0].data), len(want))
			}
			if itemErr != nil {
				t.Errorf("item %d: %v", i, itemErr)
			}
			continue
		}
		var re *RemoteError
		if !errors.As(itemErr, &re) || re.Msg != sendErrs[i].Error() {
			t.Errorf("item %d: receiver got %#v, want RemoteError %q", i, itemErr, sendErrs[i])
		}
	}
}

// TestSendItemDataChunkSize reads files with disk buffers smaller and
// larger than a chunk: the wire carries chunks of at most chunkBytes.
func TestSendItemDataChunkSize(t *testing.T) {
	big := randomBytes(12, 3*chunkBytes+5)
	src := &memSource{files: map[string][]byte{"f": big}}
	it := &Item{Entry: treewalk.Entry{Path: "f", Kind: treewalk.KindFile, Size: int64(len(big))}, Length: int64(len(big))}
	for _, bufSize := range []int{1, 4096, chunkBytes, chunkBytes + 1, 3*chunkBytes + 1, 8 * chunkBytes} {
		msgs := messageBytes(t, func(e *encoder) {
			if err := sendItemData(context.Background(), e, src, it, bufSize); err != nil {
				t.Fatal(err)
			}
		})
		// Walk the tags by hand.
		r := bytes.NewReader(msgs)
		var got []byte
		for {
			tag, err := r.ReadByte()
			if err != nil {
				t.Fatalf("buffer %d: no end tag", bufSize)
			}
			if tag == tagEnd {
				break
			}
			n, err := binary.ReadUvarint(r)
			if tag != tagChunk || err != nil || n == 0 || n > chunkBytes {
				t.Fatalf("buffer %d: tag %d, chunk of %d bytes (%v)", bufSize, tag, n, err)
			}
			chunk := make([]byte, n)
			io.ReadFull(r, chunk)
			got = append(got, chunk...)
		}
		if !bytes.Equal(got, big) || r.Len() != 0 {
			t.Errorf("buffer %d: %d bytes in chunks, %d left over; want %d", bufSize, len(got), r.Len(), len(big))
		}
	}
}

// fakePeer returns a Stream whose far end is serve, run in a goroutine with
// the client's bytes and a writer to the client; stderr is what Stderr
// reports. What serve writes is buffered and sent when it returns, like a
// real peer's output sits in pipe and channel buffers, so that a peer that
// talks before it listens does not deadlock with the client.
func fakePeer(t *testing.T, stderr string, serve func(in *bufio.Reader, out io.Writer)) transport.Stream {
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	go func() {
		var out bytes.Buffer
		serve(bufio.NewReader(sr), &out)
		go io.Copy(io.Discard, sr) // a real peer's stdin would take it
		sw.Write(out.Bytes())
		sw.Close()
	}()
	return &testStream{r: cr, w: cw, stderr: stderr}
}

type testStream struct {
	r      *io.PipeReader
	w      *io.PipeWriter
	stderr string
}

func (s *testStream) Read(b []byte) (int, error)  { return s.r.Read(b) }
func (s *testStream) Write(b []byte) (int, error) { return s.w.Write(b) }
func (s *testStream) CloseWrite() error           { return s.w.Close() }
func (s *testStream) Close() error {
	s.w.CloseWithError(io.ErrClosedPipe)
	return s.r.CloseWithError(io.ErrClosedPipe)
}
func (s *testStream) Stderr() string { return s.stderr }

// replyWith is a fake server that reads the hello and answers rep.
func replyWith(rep any) func(in *bufio.Reader, out io.Writer) {
	return func(in *bufio.Reader, out io.Writer) {
		var h Hello
		if readHandshake(in, &h) == nil {
			writeHandshake(out, rep)
		}
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestHandshakeRefusals(t *testing.T) {
	ctx := testContext(t)
	hello := Hello{Version: "1.4.0", Role: RoleSender, Path: "/srv", Compression: "zstd"}
	tests := []struct {
		name   string
		stderr string
		peer   func(in *bufio.Reader, out io.Writer)
		want   []string // in the error text
		proto  bool     // wraps ErrProtocol
	}{
		{"newer protocol", "", replyWith(helloReply{Proto: 99, Version: "9.0.0", Codecs: CodecNames()}),
			[]string{"restoresync 9.0.0", "protocol 99", "restoresync 1.4.0", "speaks " + strconv.Itoa(ProtocolVersion)}, true},
		{"newer server refusing", "", replyWith(helloReply{Proto: 99, Version: "9.0.0", Codecs: CodecNames(), Error: "protocol error: the client speaks protocol " + strconv.Itoa(ProtocolVersion)}),
			[]string{"restoresync 9.0.0", "protocol 99", "speaks " + strconv.Itoa(ProtocolVersion)}, true},
		{"older protocol", "", replyWith(helloReply{Proto: 0, Version: "0.9.0", Codecs: CodecNames()}),
			[]string{"restoresync 0.9.0", "protocol 0", "speaks " + strconv.Itoa(ProtocolVersion)}, true},
		{"codec unsupported", "", replyWith(helloReply{Proto: ProtocolVersion, Version: "1.3.0", Codecs: []string{"none", "gzip"}}),
			[]string{"does not support codec zstd", "none gzip"}, true},
		{"command not found", "", func(in *bufio.Reader, out io.Writer) {
			io.WriteString(out, "bash: restoresync: command not found\n")
		}, []string{`"bash: restoresync: command not found\n"`, "not a restoresync agent"}, true},
		{"command not found on stderr", "bash: line 1: restoresync: command not found\n", func(in *bufio.Reader, out io.Writer) {},
			[]string{"before the handshake", "remote stderr: bash: line 1: restoresync: command not found"}, true},
		{"login banner", "", func(in *bufio.Reader, out io.Writer) {
			io.WriteString(out, "Welcome to Ubuntu 24.04 LTS\n\n * Documentation: https://help.ubuntu.com\n")
			out.Write([]byte(magic))
		}, []string{`"Welcome to Ubuntu 24.04 LTS\n`}, true},
		{"short garbage", "", func(in *bufio.Reader, out io.Writer) { io.WriteString(out, "nope") }, []string{`"nope"`}, true},
		{"truncated reply", "", func(in *bufio.Reader, out io.Writer) { out.Write([]byte(magic + "\x00\x00\x01")) }, []string{"handshake"}, true},
		{"bad JSON", "", func(in *bufio.Reader, out io.Writer) { writeHandshake(out, "not an object") }, []string{"handshake"}, true},
		{"huge reply", "", func(in *bufio.Reader, out io.Writer) { out.Write([]byte(magic + "\x7f\xff\xff\xff")) }, []string{"handshake of"}, true},
		{"unknown reply field", "", replyWith(map[string]any{"proto": ProtocolVersion, "version": "1.4.0", "codecs": CodecNames(), "resume": true}),
			[]string{`unknown field "resume"`, "versions differ"}, true},
		{"newer protocol, unknown field", "", replyWith(map[string]any{"proto": 99, "version": "9.0.0", "codecs": CodecNames(), "resume": true}),
			[]string{"restoresync 9.0.0", "protocol 99", "speaks " + strconv.Itoa(ProtocolVersion)}, true},
		{"server refuses", "", replyWith(helloReply{Proto: ProtocolVersion, Version: "1.4.0", Error: "open /srv: permission denied"}),
			[]string{"remote: open /srv: permission denied"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Handshake(ctx, fakePeer(t, tt.stderr, tt.peer), hello)
			if err == nil {
				c.Close()
				t.Fatal("handshake succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if errors.Is(err, ErrProtocol) != tt.proto {
				t.Errorf("error %q wraps ErrProtocol: %v, want %v", err, !tt.proto, tt.proto)
			}
		})
	}
	// Only a peer that is not the agent, or a command the remote shell
	// could not find, is ErrNoAgent.
	for _, tt := range []struct {
		name, stderr string
		peer         func(in *bufio.Reader, out io.Writer)
		want         bool
	}{
		{"command not found", "", func(in *bufio.Reader, out io.Writer) { io.WriteString(out, "bash: restoresync: command not found\n") }, true},
		{"command not found on stderr", "bash: line 1: restoresync: command not found\n", func(in *bufio.Reader, out io.Writer) {}, true},
		{"no such file on stderr", "sh: 1: /opt/restoresync: No such file or directory\n", func(in *bufio.Reader, out io.Writer) {}, true},
		{"login banner", "", func(in *bufio.Reader, out io.Writer) { io.WriteString(out, "Welcome to Ubuntu 24.04 LTS\n") }, true},
		{"newer protocol", "", replyWith(helloReply{Proto: 99, Version: "9.0.0", Codecs: CodecNames()}), false},
		{"closed without a word", "", func(in *bufio.Reader, out io.Writer) {}, false},
		{"server refuses", "", replyWith(helloReply{Proto: ProtocolVersion, Version: "1.4.0", Error: "open /srv: permission denied"}), false},
	} {
		_, err := Handshake(ctx, fakePeer(t, tt.stderr, tt.peer), hello)
		if err == nil || errors.Is(err, ErrNoAgent) != tt.want {
			t.Errorf("%s: %v: wraps ErrNoAgent %v, want %v", tt.name, err, errors.Is(err, ErrNoAgent), tt.want)
		}
	}
	// A codec this build does not know is refused before anything is sent.
	h := hello
	h.Compression = "brotli"
	if _, err := Handshake(ctx, fakePeer(t, "", func(*bufio.Reader, io.Writer) {}), h); !errors.Is(err, ErrUnknownCodec) {
		t.Errorf("Handshake with codec brotli: %v", err)
	}
}

// exitedStream is a remote command that wrote out and exited with status
// 1 before it read anything: every write fails as a write to its closed
// channel does, and reads return out and then the command's end.
type exitedStream struct {
	out io.Reader
	end error
}

func (s *exitedStream) Read(b []byte) (int, error) {
	n, err := s.out.Read(b)
	if err == io.EOF {
		err = s.end
	}
	return n, err
}
func (s *exitedStream) Write([]byte) (int, error) {
	return 0, fmt.Errorf("%w: remote command exited with status 1", transport.ErrRemoteExited)
}
func (s *exitedStream) CloseWrite() error { return nil }
func (s *exitedStream) Close() error      { return nil }
func (s *exitedStream) Stderr() string    { return "" }

// A remote command that ended before the hello reached it is judged by
// what it sent: an SFTP-only server's answer is ErrSFTPOnly whether the
// hello's write came before the command's exit or after.
func TestHandshakeAfterRemoteExited(t *testing.T) {
	end := transport.Mark(fmt.Errorf("%w: remote command exited with status 1", transport.ErrRemoteExited), transport.ErrRemoteRefused)
	s := &exitedStream{out: strings.NewReader("This service allows sftp connections only.\n"), end: end}
	_, err := Handshake(testContext(t), s, Hello{Version: "1.4.0", Role: RoleSender, Path: "/srv", Compression: "none"})
	if !errors.Is(err, transport.ErrSFTPOnly) || !errors.Is(err, transport.ErrRemoteRefused) {
		t.Errorf("handshake with an SFTP-only server that exited first: %v; want ErrSFTPOnly", err)
	}
	if !strings.Contains(fmt.Sprint(err), "This service allows sftp connections only.") {
		t.Errorf("error %q does not say what the server answered", err)
	}
	// A command that exited without a word keeps the write's error.
	s = &exitedStream{out: strings.NewReader(""), end: end}
	_, err = Handshake(testContext(t), s, Hello{Version: "1.4.0", Role: RoleSender, Path: "/srv", Compression: "none"})
	if !errors.Is(err, transport.ErrRemoteExited) || errors.Is(err, transport.ErrSFTPOnly) {
		t.Errorf("handshake with a command that exited silently: %v; want ErrRemoteExited, not ErrSFTPOnly", err)
	}
}

// serveRaw runs Serve over io.Pipes, sends it hello (any value, so that the
// test can send what a client of another version would), and returns its
// reply and Serve's error.
func serveRaw(t *testing.T, cfg ServerConfig, hello any) (helloReply, error) {
	ctx := testContext(t)
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := Serve(ctx, sr, sw, cfg)
		sw.Close()
		done <- err
	}()
	go func() {
		if s, ok := hello.(string); ok {
			io.WriteString(cw, s)
		} else {
			writeHandshake(cw, hello)
		}
		cw.Close()
	}()
	var rep helloReply
	err := readHandshake(bufio.NewReader(cr), &rep)
	if err != nil {
		rep.Error = "no reply: " + err.Error()
	}
	io.Copy(io.Discard, cr)
	return rep, <-done
}

func TestServeRefusals(t *testing.T) {
	dir := t.TempDir()
	cfg := ServerConfig{Version: "1.4.0"}
	tests := []struct {
		name   string
		hello  any
		want   []string // in Serve's error and in the reply
		errors []error
		reply  bool // a reply is sent
	}{
		{"newer client", Hello{Proto: 99, Version: "9.0.0", Role: RoleSender, Path: dir, Compression: "zstd"},
			[]string{"restoresync 9.0.0", "protocol 99", "restoresync 1.4.0", "speaks " + strconv.Itoa(ProtocolVersion)}, []error{ErrProtocol}, true},
		{"unknown codec", Hello{Proto: ProtocolVersion, Version: "1.4.0", Role: RoleSender, Path: dir, Compression: "brotli"},
			[]string{`"brotli"`, "none, lz4, zstd, gzip"}, []error{ErrProtocol, ErrUnknownCodec}, true},
		{"empty codec", Hello{Proto: ProtocolVersion, Version: "1.4.0", Role: RoleSender, Path: dir},
			[]string{"unknown codec"}, []error{ErrProtocol, ErrUnknownCodec}, true},
		{"bad level", Hello{Proto: ProtocolVersion, Version: "1.4.0", Role: RoleSender, Path: dir, Compression: "zstd:99"},
			[]string{"must be 1 to 22"}, []error{ErrProtocol}, true},
		{"unknown role", Hello{Proto: ProtocolVersion, Version: "1.4.0", Role: "relay", Path: dir, Compression: "zstd"},
			[]string{`unknown role "relay"`}, []error{ErrProtocol}, true},
		{"receiver without sink", Hello{Proto: ProtocolVersion, Version: "1.4.0", Role: RoleReceiver, Path: dir, Compression: "zstd"},
			[]string{"read-only"}, nil, true},
		{"missing tree", Hello{Proto: ProtocolVersion, Version: "1.4.0", Role: RoleSender, Path: dir + "/missing", Compression: "zstd"},
			[]string{"no such file"}, nil, true},
		{"unknown receiver option", map[string]any{"proto": ProtocolVersion, "version": "1.4.0", "role": RoleReceiver, "path": dir, "compression": "zstd",
			"receiver": map[string]any{"owner": map[string]any{"numeric_idz": true}}},
			[]string{`unknown field "numeric_idz"`, "versions differ"}, []error{ErrProtocol}, true},
		{"unknown hello field", map[string]any{"proto": ProtocolVersion, "version": "1.4.0", "role": RoleSender, "path": dir, "compression": "zstd", "resume": true},
			[]string{`unknown field "resume"`, "versions differ"}, []error{ErrProtocol}, true},
		{"newer client, unknown field", map[string]any{"proto": 99, "version": "9.0.0", "role": RoleSender, "path": dir, "compression": "zstd", "resume": true},
			[]string{"restoresync 9.0.0", "protocol 99", "restoresync 1.4.0"}, []error{ErrProtocol}, true},
		{"garbage", "bash: restoresync: command not found\n",
			[]string{`"bash: restoresync: command not found\n"`}, []error{ErrProtocol}, false},
		{"nothing", "", []string{"closed the stream before the handshake"}, []error{ErrProtocol}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := serveRaw(t, cfg, tt.hello)
			if err == nil {
				t.Fatal("Serve accepted the client")
			}
			for _, w := range tt.errors {
				if !errors.Is(err, w) {
					t.Errorf("Serve error %q does not wrap %q", err, w)
				}
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Serve error %q does not say %q", err, w)
				}
				if tt.reply && !strings.Contains(rep.Error, w) {
					t.Errorf("reply error %q does not say %q", rep.Error, w)
				}
			}
			if tt.reply && (rep.Proto != ProtocolVersion || rep.Version != "1.4.0") {
				t.Errorf("reply %+v does not announce the server's protocol and version", rep)
			}
		})
	}
}

// TestProtocolMismatchEndToEnd is the mismatch as a user meets it: a
// client of another protocol version against this build's Serve. The
// client sees the server's refusal, which names both versions. See the
// report: this error does not wrap ErrProtocol on the client's side.
func TestProtocolMismatchEndToEnd(t *testing.T) {
	rep, serveErr := serveRaw(t, ServerConfig{Version: "1.4.0"}, Hello{Proto: 99, Version: "9.0.0", Role: RoleSender, Path: ".", Compression: "zstd"})
	if !errors.Is(serveErr, ErrProtocol) {
		t.Fatalf("Serve: %v", serveErr)
	}
	// Replay the reply to this build's client.
	s := fakePeer(t, "", replyWith(rep))
	_, err := Handshake(testContext(t), s, Hello{Version: "3.0.0", Role: RoleSender, Compression: "zstd"})
	if err == nil || !strings.Contains(err.Error(), "protocol 99") || !strings.Contains(err.Error(), "restoresync 1.4.0") {
		t.Fatalf("client error %v does not name both versions", err)
	}
}

// testFile is one entry of a declarative tree fixture.
type testFile struct {
	data     []byte
	mode     os.FileMode // 0 means 0644 for files, 0755 for directories
	dir      bool
	symlink  string // target
	hardlink string // path of the earlier file to link to
	fifo     bool
}

// hostingTree is a small hosting account: PHP, a config readable by its
// owner only, uploads larger than a frame, a database dump, a maildir, a
// symlink, a hardlink, a FIFO, a setuid helper and odd names.
func hostingTree() map[string]testFile {
	return map[string]testFile{
		"public_html/index.php":                        {data: textBytes(20, 41_234)},
		"public_html/index-copy.php":                   {hardlink: "public_html/index.php"},
		"public_html/wp-config.php":                    {data: []byte("<?php define('DB_PASSWORD', 'hunter2');\n"), mode: 0o600},
		"public_html/wp-content/uploads/2024/01/a.jpg": {data: randomBytes(21, 700_000)},
		"public_html/wp-content/uploads/2024/01/b.jpg": {data: randomBytes(22, 3)},
		"public_html/wp-content/cache":                 {dir: true, mode: 0o777},
		"public_html/current":                          {symlink: "wp-content/uploads"},
		"backups/db.sql":                               {data: textBytes(23, 1_500_000)},
		"mail/cur/1700000000.M1P2.host,S=1234:2,S":     {data: textBytes(24, 1234), mode: 0o600},
		"mail/new":   {dir: true, mode: 0o700},
		"bin/helper": {data: []byte("#!/bin/sh\nexit 0\n"), mode: 0o4755},
		"tmp/queue":  {fifo: true},
		"tmp/empty":  {data: []byte{}},
		"odd/name with spaces, ü and a\nnewline": {data: []byte("odd")},
		"odd/\xff\xfe not UTF-8":                 {data: []byte("bytes")},
		"odd/-leading-dash":                      {data: []byte("dash")},
	}
}

// writeTree creates files beneath dir, hardlinks after their targets.
func writeTree(t testing.TB, dir string, files map[string]testFile) {
	t.Helper()
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int { // hardlinks last
		return cmp.Compare(len(files[a].hardlink), len(files[b].hardlink))
	})
	for _, name := range names {
		f := files[name]
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case f.dir:
			err = os.MkdirAll(p, 0o755)
		case f.symlink != "":
			err = os.Symlink(f.symlink, p)
		case f.hardlink != "":
			err = os.Link(filepath.Join(dir, filepath.FromSlash(f.hardlink)), p)
		case f.fifo:
			err = syscall.Mkfifo(p, 0o600)
		default:
			err = os.WriteFile(p, f.data, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		if f.mode != 0 {
			if err := os.Chmod(p, f.mode); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// collectWriter is an ItemWriter that keeps every item's bytes, by path and
// offset. Safe for concurrent use.
type collectWriter struct {
	mu   sync.Mutex
	data map[string][]byte
	errs map[string]error // the reader's error, for failed items
}

func itemKey(it *Item) string { return it.Entry.Path + "@" + strconv.FormatInt(it.Offset, 10) }

func (w *collectWriter) WriteItem(ctx context.Context, it *Item, r io.Reader) error {
	b, err := io.ReadAll(r)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.data == nil {
		w.data, w.errs = map[string][]byte{}, map[string]error{}
	}
	if err != nil {
		w.errs[itemKey(it)] = err
		return err
	}
	w.data[itemKey(it)] = b
	return nil
}

// pullItems returns an item per data file of list, and for files larger
// than a chunk, split items of about a third of the file as well.
func pullItems(list []treewalk.Entry) []Item {
	var items []Item
	for _, e := range list {
		if !e.HasData() {
			continue
		}
		if e.Size <= chunkBytes {
			items = append(items, Item{Entry: e, Length: e.Size})
			continue
		}
		third := e.Size / 3
		for off := int64(0); off < e.Size; off += third {
			items = append(items, Item{Entry: e, Offset: off, Length: min(third, e.Size-off), Split: true})
		}
	}
	return items
}

func dialPipe(t *testing.T, ctx context.Context, cfg ServerConfig, h Hello) *Conn {
	t.Helper()
	c, err := Handshake(ctx, PipeStream(ctx, cfg), h)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	return c
}

// TestConnPull lists a real tree through the in-process server and reads
// every file back, whole and in split items, with two requests in flight.
func TestConnPull(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, hostingTree())
	want, err := treewalk.Walk(t.Context(), dir)
	if err != nil || len(want.Errors) > 0 {
		t.Fatalf("walk: %v %v", err, want.Errors)
	}
	// The server's disk read buffer (--read-buffer) varies too: below its
	// 4 KiB floor, the default, and larger than a chunk.
	readBuffer := map[string]int{"lz4": 1, "zstd:19": 3*chunkBytes + 1, "gzip": 1 << 20}
	for _, comp := range []string{"none", "lz4", "zstd", "zstd:19", "gzip"} {
		t.Run(comp, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			c := dialPipe(t, ctx, ServerConfig{Version: "server-test"},
				Hello{Version: "client-test", Role: RoleSender, Path: dir, Compression: comp, ReadBufferBytes: readBuffer[comp]})
			if c.Peer != "server-test" {
				t.Errorf("Peer = %q", c.Peer)
			}
			list, err := c.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !equalEntries(list.Entries, want.Entries) || len(list.Errors) != 0 {
				t.Fatalf("List differs from a local walk: %d entries, errors %v; want %d entries", len(list.Entries), list.Errors, len(want.Entries))
			}
			items := pullItems(list.Entries)
			batches := [][]Item{items[:len(items)/2], items[len(items)/2:]}
			w := &collectWriter{}
			recvErr := make(chan error, 1)
			go func() {
				for _, b := range batches {
					errs, err := c.RecvRead(ctx, b, w)
					if err == nil {
						err = errors.Join(errs...)
					}
					if err != nil {
						recvErr <- err
						return
					}
				}
				recvErr <- nil
			}()
			for _, b := range batches {
				if err := c.SendRead(b); err != nil {
					t.Fatal(err)
				}
			}
			if err := <-recvErr; err != nil {
				t.Fatal(err)
			}
			var total int64
			for _, it := range items {
				content, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(it.Entry.Path)))
				if err != nil {
					t.Fatal(err)
				}
				got, ok := w.data[itemKey(&it)]
				if !ok || !bytes.Equal(got, content[it.Offset:it.Offset+it.Length]) {
					t.Errorf("%s: got %d bytes (received: %v), want %d", itemKey(&it), len(got), ok, it.Length)
				}
				total += it.Length
			}
			sent, recv := c.WireBytes()
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			t.Logf("%s: %d data bytes, wire: %d sent, %d received", comp, total, sent, recv)
			if comp != "none" && recv > total*3/4 {
				t.Errorf("%s: received %d wire bytes for %d data bytes", comp, recv, total)
			}
			if comp == "none" && recv < total {
				t.Errorf("received %d wire bytes for %d data bytes", recv, total)
			}
		})
	}
}

// TestConnPullItemErrors changes the tree between List and Read: each
// changed file fails on its own, and the stream goes on.
func TestConnPullItemErrors(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, hostingTree())
	ctx := testContext(t)
	c := dialPipe(t, ctx, ServerConfig{}, Hello{Role: RoleSender, Path: dir, Compression: "zstd"})
	defer c.Close()
	list, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]treewalk.Entry{}
	for _, e := range list.Entries {
		byPath[e.Path] = e
	}
	item := func(p string) Item { return Item{Entry: byPath[p], Length: byPath[p].Size} }
	items := []Item{
		item("backups/db.sql"),                               // truncated
		item("bin/helper"),                                   // fine
		item("public_html/wp-config.php"),                    // removed
		item("public_html/wp-content/uploads/2024/01/a.jpg"), // replaced by a directory
		item("mail/cur/1700000000.M1P2.host,S=1234:2,S"),
	}
	local := func(p string) string { return filepath.Join(dir, filepath.FromSlash(p)) }
	if err := os.Truncate(local("backups/db.sql"), 1000); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(local("public_html/wp-config.php")); err != nil {
		t.Fatal(err)
	}
	a := local("public_html/wp-content/uploads/2024/01/a.jpg")
	if err := os.Remove(a); err != nil || os.Mkdir(a, 0o755) != nil {
		t.Fatal(err)
	}
	if err := c.SendRead(items); err != nil {
		t.Fatal(err)
	}
	w := &collectWriter{}
	errs, err := c.RecvRead(ctx, items, w)
	if err != nil {
		t.Fatal(err)
	}
	wantErr := []string{"shrank to 1000 bytes", "", "no such file", "no longer a regular file", ""}
	for i, it := range items {
		if wantErr[i] == "" {
			if errs[i] != nil {
				t.Errorf("%s: %v", it.Entry.Path, errs[i])
			}
			continue
		}
		var re *RemoteError
		if !errors.As(errs[i], &re) || !strings.Contains(re.Msg, wantErr[i]) {
			t.Errorf("%s: error %#v, want a RemoteError saying %q", it.Entry.Path, errs[i], wantErr[i])
		}
		if !errors.As(w.errs[itemKey(&it)], &re) {
			t.Errorf("%s: the writer's reader failed with %v, want the sender's error", it.Entry.Path, w.errs[itemKey(&it)])
		}
	}
	if got := w.data["mail/cur/1700000000.M1P2.host,S=1234:2,S@0"]; !bytes.Equal(got, textBytes(24, 1234)) {
		t.Errorf("item after the failures: got %d bytes", len(got))
	}
	// The stream is still usable.
	if _, err := c.List(ctx); err != nil {
		t.Errorf("List after item errors: %v", err)
	}
}

// TestServerRejectsBadRequests sends requests the decoder must refuse: the
// server ends the stream, and the client's error carries its reason.
func TestServerRejectsBadRequests(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]testFile{"f": {data: []byte("0123456789")}})
	ctx := testContext(t)
	c := dialPipe(t, ctx, ServerConfig{}, Hello{Role: RoleSender, Path: dir, Compression: "lz4"})
	defer c.Close()
	bad := []Item{{Entry: treewalk.Entry{Path: "f", Kind: treewalk.KindFile, Size: 10}, Length: 11}}
	if err := c.SendRead(bad); err != nil {
		t.Fatal(err)
	}
	_, err := c.RecvRead(ctx, bad, &collectWriter{})
	if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), `protocol error: item "f": range 0+11`) {
		t.Fatalf("RecvRead after a bad item: %v", err)
	}

	sink := &recordSink{}
	c = dialPipe(t, ctx, ServerConfig{NewSink: sink.open}, Hello{Role: RoleReceiver, Path: t.TempDir(), Compression: "zstd"})
	defer c.Close()
	_, err = c.Plan(ctx, []treewalk.Entry{{Path: ".", Kind: treewalk.KindDir}, {Path: "../../etc/cron.d/x", Kind: treewalk.KindFile}})
	if err == nil || !strings.Contains(err.Error(), `protocol error: entry "../../etc/cron.d/x"`) {
		t.Fatalf("Plan with a path leaving the tree: %v", err)
	}
	if len(sink.planned) != 0 {
		t.Errorf("the sink saw %d entries of a refused list", len(sink.planned))
	}
}

// recordSink is a Sink that records what the server hands it. It needs
// the data of every file except those named "skip*", fails to write files
// named "readonly*", and fails to commit "fail-commit*".
type recordSink struct {
	mu        sync.Mutex
	dst       string
	opts      ReceiverOptions
	opened    int
	planned   []treewalk.Entry
	written   collectWriter
	committed []string
	finished  []treewalk.Entry
	closed    bool
}

var errReadOnly = errors.New("read-only file system")

func (s *recordSink) open(ctx context.Context, dst string, opts ReceiverOptions) (Sink, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dst, s.opts = dst, opts
	s.opened++
	return s, nil
}

func (s *recordSink) Plan(ctx context.Context, entries []treewalk.Entry) (PlanResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.planned = append(s.planned, entries...)
	var res PlanResult
	for i, e := range entries {
		if e.HasData() && !strings.HasPrefix(path.Base(e.Path), "skip") {
			res.Need = append(res.Need, i)
		}
		if e.Kind == treewalk.KindDir && path.Base(e.Path) == "locked" {
			res.Errors = append(res.Errors, &treewalk.PathError{Path: e.Path, Err: errors.New("mkdir: permission denied")})
		}
	}
	return res, nil
}

func (s *recordSink) WriteItem(ctx context.Context, it *Item, r io.Reader) error {
	if strings.HasPrefix(path.Base(it.Entry.Path), "readonly") {
		return errReadOnly // without reading: the server drains the item
	}
	if strings.HasPrefix(path.Base(it.Entry.Path), "gone") && it.Offset > 0 {
		return fmt.Errorf("block at %d: %w", it.Offset, ErrSplitGone)
	}
	return s.written.WriteItem(ctx, it, r)
}

func (s *recordSink) Commit(ctx context.Context, e *treewalk.Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.HasPrefix(path.Base(e.Path), "fail-commit") {
		return fmt.Errorf("rename %s: no space left on device", e.Path)
	}
	s.committed = append(s.committed, e.Path)
	return nil
}

func (s *recordSink) Finish(ctx context.Context, entries []treewalk.Entry) ([]*treewalk.PathError, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finished = append(s.finished, entries...)
	var errs []*treewalk.PathError
	for _, e := range entries {
		if e.Kind == treewalk.KindFifo {
			errs = append(errs, &treewalk.PathError{Path: e.Path, Err: errors.New("mkfifo: operation not permitted")})
		}
	}
	return errs, nil
}

func (s *recordSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// TestConnPush drives a receiver through Plan, Write, Commit and Finish
// with an in-memory source whose files fail in different ways.
func TestConnPush(t *testing.T) {
	ctx := testContext(t)
	root := t.TempDir()
	sink := &recordSink{}
	big := textBytes(30, 2*chunkBytes+99)
	src := &memSource{
		files: map[string][]byte{
			"a.php": []byte("<?php phpinfo();"), "big.sql": big, "short.php": []byte("<?php exit;"),
			"readonly.txt": []byte("ro"), "skip.log": []byte("skipped"), "io.jpg": randomBytes(31, 5000), "z.txt": []byte("last"),
		},
		short:  map[string]int{"short.php": 4},
		failAt: map[string]int{"io.jpg": 100},
	}
	var entries []treewalk.Entry
	entries = append(entries, treewalk.Entry{Path: ".", Kind: treewalk.KindDir, Mode: 0o755}, treewalk.Entry{Path: "locked", Kind: treewalk.KindDir})
	for _, name := range []string{"a.php", "big.sql", "short.php", "readonly.txt", "skip.log", "missing.php", "io.jpg", "z.txt"} {
		entries = append(entries, treewalk.Entry{Path: name, Kind: treewalk.KindFile, Mode: 0o644, Size: int64(len(src.files[name]))})
	}
	entries = append(entries, treewalk.Entry{Path: "q", Kind: treewalk.KindFifo}, treewalk.Entry{Path: "l", Kind: treewalk.KindSymlink, LinkTarget: "a.php"})

	c := dialPipe(t, ctx, ServerConfig{Root: root, NewSink: sink.open, Version: "srv"},
		Hello{Role: RoleReceiver, Path: "/home/alice", Compression: "gzip:6", Receiver: &ReceiverOptions{BlockSizeBytes: 65536, Owner: ReceiverOwner{NumericIDs: true}}})
	res, err := c.Plan(ctx, entries)
	if err != nil {
		t.Fatal(err)
	}
	if sink.dst != filepath.Join(root, "home/alice") || sink.opts.BlockSizeBytes != 65536 || !sink.opts.Owner.NumericIDs {
		t.Errorf("NewSink got dst %q, options %+v", sink.dst, sink.opts)
	}
	if !equalEntries(sink.planned, entries) {
		t.Errorf("the sink was planned %d entries, want %d", len(sink.planned), len(entries))
	}
	if want := []int{2, 3, 4, 5, 7, 8, 9}; !slices.Equal(res.Need, want) {
		t.Errorf("Need = %v, want %v", res.Need, want)
	}
	if len(res.Errors) != 1 || res.Errors[0].Path != "locked" || !strings.Contains(res.Errors[0].Error(), "permission denied") {
		t.Errorf("plan errors %v", res.Errors)
	}

	var items []Item
	for _, i := range res.Need {
		e := entries[i]
		if e.Path == "big.sql" {
			items = append(items, Item{Entry: e, Length: chunkBytes + 1, Split: true}, Item{Entry: e, Offset: chunkBytes + 1, Length: e.Size - chunkBytes - 1, Split: true})
			continue
		}
		items = append(items, Item{Entry: e, Length: e.Size})
	}
	// items: a.php, big.sql×2, short.php, readonly.txt, missing.php, io.jpg, z.txt
	sendErrs, err := c.SendWrite(ctx, items, src, make([]byte, chunkBytes))
	if err != nil {
		t.Fatal(err)
	}
	recvErrs, err := c.RecvWrite(items)
	if err != nil {
		t.Fatal(err)
	}
	wantSend := []string{"", "", "", "shrank to 4 bytes", "", "no such file", "input/output error", ""}
	wantRecv := []string{"", "", "", "shrank to 4 bytes", "read-only file system", "no such file", "input/output error", ""}
	for i, it := range items {
		if got := errString(sendErrs[i]); !strings.Contains(got, wantSend[i]) || (got == "") != (wantSend[i] == "") {
			t.Errorf("%s: SendWrite error %q, want %q", itemKey(&it), got, wantSend[i])
		}
		var re *RemoteError
		if got := errString(recvErrs[i]); !strings.Contains(got, wantRecv[i]) || (got == "") != (wantRecv[i] == "") ||
			(got != "" && !errors.As(recvErrs[i], &re)) {
			t.Errorf("%s: RecvWrite error %#v, want a RemoteError saying %q", itemKey(&it), recvErrs[i], wantRecv[i])
		}
		got, ok := sink.written.data[itemKey(&it)]
		if wantRecv[i] != "" {
			if ok {
				t.Errorf("%s: the sink stored %d bytes of a failed item", itemKey(&it), len(got))
			}
			continue
		}
		content := src.files[it.Entry.Path]
		if !bytes.Equal(got, content[it.Offset:it.Offset+it.Length]) {
			t.Errorf("%s: the sink got %d bytes, want %d", itemKey(&it), len(got), it.Length)
		}
	}
	// The sink's reader failed with the sender's error for the items the
	// sender could not read.
	for _, k := range []string{"short.php@0", "missing.php@0", "io.jpg@0"} {
		var re *RemoteError
		if !errors.As(sink.written.errs[k], &re) {
			t.Errorf("%s: the sink's reader failed with %v, want the sender's error", k, sink.written.errs[k])
		}
	}

	if itemErr, err := c.Commit(ctx, &entries[3]); itemErr != nil || err != nil {
		t.Errorf("Commit(big.sql) = %v, %v", itemErr, err)
	}
	failing := treewalk.Entry{Path: "fail-commit.bin", Kind: treewalk.KindFile, Size: 1}
	var re *RemoteError
	if itemErr, err := c.Commit(ctx, &failing); !errors.As(itemErr, &re) || err != nil || !strings.Contains(itemErr.Error(), "no space left") {
		t.Errorf("Commit(fail-commit.bin) = %v, %v; want a RemoteError for that file only", itemErr, err)
	}
	ferrs, err := c.Finish(ctx, entries) // refers to the planned list
	if err != nil {
		t.Fatal(err)
	}
	if len(ferrs) != 1 || ferrs[0].Path != "q" || !strings.Contains(ferrs[0].Error(), "mkfifo") {
		t.Errorf("Finish errors %v", ferrs)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if !sink.closed || sink.opened != 1 || !slices.Equal(sink.committed, []string{"big.sql"}) || !equalEntries(sink.finished, entries) {
		t.Errorf("sink: closed %v, opened %d times, committed %v, finished %d entries", sink.closed, sink.opened, sink.committed, len(sink.finished))
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestServeConfinesToRoot asks a server with a Root for paths outside it,
// lexically and through a symlink.
func TestServeConfinesToRoot(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]testFile{
		"alice/index.php": {data: []byte("<?php")},
		"escape":          {symlink: "/etc"},
	})
	sink := &recordSink{}
	cfg := ServerConfig{Root: root, NewSink: sink.open}
	for _, h := range []Hello{
		{Role: RoleSender, Path: "../etc"},
		{Role: RoleSender, Path: "alice/../../etc"},
		{Role: RoleSender, Path: "escape"},
		{Role: RoleReceiver, Path: "../etc"},
	} {
		h.Compression = "none"
		_, err := Handshake(testContext(t), PipeStream(testContext(t), cfg), h)
		var re *RemoteError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), ErrOutsideRoot.Error()) {
			t.Errorf("%s %q: %v, want a refusal saying %q", h.Role, h.Path, err, ErrOutsideRoot)
		}
	}
	// Inside the root, "/alice" and "alice" are the same tree.
	for _, p := range []string{"/alice", "alice", "alice/"} {
		c := dialPipe(t, testContext(t), cfg, Hello{Role: RoleSender, Path: p, Compression: "none"})
		list, err := c.List(testContext(t))
		if err != nil || len(list.Entries) != 2 || list.Entries[1].Path != "index.php" {
			t.Errorf("List of %q: %v, %+v", p, err, list.Entries)
		}
		c.Close()
	}
}

// A receiver's per-item errors keep their kind across the wire: a block
// whose split file had already failed (ErrSplitGone) and a delta that could
// not be applied are told from other errors, which the client's report
// needs to prefer a split file's cause over its consequences.
func TestConnWriteErrorKinds(t *testing.T) {
	ctx := testContext(t)
	sink := &recordSink{}
	src := &memSource{files: map[string][]byte{"gone.bin": textBytes(7, 3000), "readonly.txt": []byte("ro")}}
	entries := []treewalk.Entry{
		{Path: "gone.bin", Kind: treewalk.KindFile, Mode: 0o644, Size: 3000},
		{Path: "readonly.txt", Kind: treewalk.KindFile, Mode: 0o644, Size: 2},
	}
	c := dialPipe(t, ctx, ServerConfig{Root: t.TempDir(), NewSink: sink.open}, Hello{Role: RoleReceiver, Path: "/alice", Compression: "none"})
	if _, err := c.Plan(ctx, entries); err != nil {
		t.Fatal(err)
	}
	items := []Item{
		{Entry: entries[0], Length: 1000, Split: true},
		{Entry: entries[0], Offset: 1000, Length: 2000, Split: true},
		{Entry: entries[1], Length: 2},
	}
	if _, err := c.SendWrite(ctx, items, src, make([]byte, chunkBytes)); err != nil {
		t.Fatal(err)
	}
	errs, err := c.RecvWrite(items)
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil {
		t.Errorf("first block: %v", errs[0])
	}
	var re *RemoteError
	if !errors.Is(errs[1], ErrSplitGone) || !errors.As(errs[1], &re) || !strings.Contains(re.Msg, "block at 1000") {
		t.Errorf("second block: %#v; want a RemoteError wrapping ErrSplitGone", errs[1])
	}
	if errs[2] == nil || errors.Is(errs[2], ErrSplitGone) || errors.Is(errs[2], ErrDeltaFailed) || !strings.Contains(errs[2].Error(), "read-only") {
		t.Errorf("readonly.txt: %#v; want a plain RemoteError", errs[2])
	}
}

// Decoding a file list or a read request costs one allocation per entry's
// path (the previous path's prefix joined to the bytes sent) and none for
// the string fields' buffers: both ends decode every entry of the tree,
// the receiver the list and the sender each read request's items.
func TestDecoderAllocationsPerEntry(t *testing.T) {
	const n = 1000
	entries := make([]treewalk.Entry, n)
	for i := range entries {
		entries[i] = treewalk.Entry{Path: fmt.Sprintf("files/%03d/%02d/parser-%05d.json", i/100, i/10%10, i), Kind: treewalk.KindFile,
			Mode: 0o644, Uid: 1001, Gid: 1001, User: "alice", Group: "alice", Size: int64(100 + i), MtimeNs: 1_700_000_000_123_456_789 + int64(i)}
	}
	items := sampleItems(entries)
	for _, tc := range []struct {
		name string
		enc  func(e *encoder)
		dec  func(d *decoder) error
	}{
		{"entries", func(e *encoder) { e.entries(entries) }, func(d *decoder) error { _, err := d.entries(); return err }},
		{"items", func(e *encoder) { e.items(items) }, func(d *decoder) error { _, err := d.items(); return err }},
	} {
		wire := messageWire(t, Compression{Codec: CodecNone}, tc.enc)
		var br bytes.Reader
		rd := bufio.NewReaderSize(&br, 64<<10)
		allocs := testing.AllocsPerRun(5, func() {
			br.Reset(wire)
			rd.Reset(&br)
			fr := newFrameReader(rd)
			if err := tc.dec(&decoder{fr: fr}); err != nil {
				t.Fatal(err)
			}
			drainFrames(fr)
		})
		// The result's slice grows by doubling (about log2(n) more), and
		// the frame reader and list check cost a few per message.
		if per := allocs / n; per > 1.1 {
			t.Errorf("%s: %.2f allocations per entry (%.0f for %d), want at most 1.1", tc.name, per, allocs, n)
		}
		t.Logf("%s: %.0f allocations for %d entries", tc.name, allocs, n)
	}
}
