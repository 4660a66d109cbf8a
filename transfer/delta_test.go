package transfer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"testing"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/restoresync/restoresync/delta"
	"github.com/restoresync/restoresync/treewalk"
)

// basisWriter is an ItemWriter and BasisOpener over an in-memory basis.
type basisWriter struct {
	basis  []byte
	out    bytes.Buffer
	opened int
}

type nopBasis struct{ *bytes.Reader }

func (nopBasis) Close() error { return nil }

func (w *basisWriter) OpenBasis(ctx context.Context, it *Item) (Basis, error) {
	w.opened++
	if int64(len(w.basis)) != it.Delta.FileSizeBytes {
		return nil, errors.New("basis changed")
	}
	return nopBasis{bytes.NewReader(w.basis)}, nil
}

func (w *basisWriter) WriteItem(ctx context.Context, it *Item, r io.Reader) error {
	_, err := io.Copy(&w.out, r)
	return err
}

// deltaItem is an item for the range [off, off+n) of data (the whole of it
// when n < 0), with the signature of basis.
func deltaItem(t testing.TB, basis, data []byte, off, n int64) Item {
	t.Helper()
	sig, err := delta.ComputeSignature(bytes.NewReader(basis), int64(len(basis)), nil)
	if err != nil {
		t.Fatal(err)
	}
	it := Item{Entry: treewalk.Entry{Path: "f", Kind: treewalk.KindFile, Size: int64(len(data))}, Length: int64(len(data)), Delta: sig}
	if n >= 0 {
		it.Offset, it.Length, it.Split = off, n, true
		it.Delta = sig.Slice(off, off+n)
	}
	return it
}

// deltaRoundTrip sends it's range of data as a delta against basis and
// applies it, through the wire encoding of the item (header only, as to a
// receiver). It returns the rebuilt bytes, the wire bytes of the op stream
// and the item error.
func deltaRoundTrip(t testing.TB, basis, data []byte, it Item) ([]byte, int, error) {
	t.Helper()
	msgs := messageBytes(t, func(e *encoder) {
		e.item(&it, false)
		if err := sendDelta(e, bytes.NewReader(data[it.Offset:it.Offset+it.Length]), &it); err != nil {
			t.Fatalf("sendDelta: %v", err)
		}
	})
	head := messageBytes(t, func(e *encoder) { e.item(&it, false) })
	d, stop := messageDecoder(msgs, 1<<20)
	defer stop()
	got, err := d.item()
	if err != nil {
		t.Fatalf("decode item: %v", err)
	}
	w := &basisWriter{basis: basis}
	itemErr, fatal := recvItemData(context.Background(), d, w, &got)
	if fatal != nil {
		t.Fatalf("recvItemData: %v", fatal)
	}
	return w.out.Bytes(), len(msgs) - len(head), itemErr
}

func edit(b []byte, fn func(b []byte) []byte) []byte { return fn(append([]byte(nil), b...)) }

func TestDeltaRoundTrip(t *testing.T) {
	big := randomBytes(3, 3<<20+123)
	text := textBytes(4, 700_000)
	small := []byte("<?php echo 'hello';\n")
	tests := []struct {
		name        string
		basis, data []byte
		maxWire     int // op stream bytes
	}{
		{"identical", big, big, 100},
		{"bytes edited in the middle", big, edit(big, func(b []byte) []byte { copy(b[len(b)/2:], "XXXXXXXXXX"); return b }), 2*2048 + 100},
		{"appended", big, append(append([]byte(nil), big...), "appended line\n"...), 2*2048 + 100},
		{"truncated", big, big[:len(big)-5000], 2*2048 + 100},
		{"inserted at the start", big, append([]byte("inserted\n"), big...), 2*2048 + 100},
		{"deleted in the middle", big, append(append([]byte(nil), big[:1<<20]...), big[1<<20+777:]...), 2*2048 + 100},
		{"blocks moved", big, append(append([]byte(nil), big[2<<20:]...), big[:2<<20]...), 2*2048 + 200},
		{"text, lines inserted", text, append(append(append([]byte(nil), text[:300_000]...), "INSERT INTO wp_posts VALUES (2);\n"...), text[300_000:]...), 2*768 + 200},
		{"unrelated", big[:100_000], randomBytes(5, 90_000), 90_000 + 500},
		{"empty data", big[:5000], nil, 20},
		{"small basis, larger data", small, append(append([]byte(nil), small...), small...), 100},
		{"data shorter than a block", small, small[:10], 100},
		{"repeated content", bytes.Repeat([]byte("abcdefgh"), 100_000), bytes.Repeat([]byte("abcdefgh"), 100_100), 1000},
		{"zeros", make([]byte, 1<<20), make([]byte, 1<<20+100), 300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, wire, err := deltaRoundTrip(t, tt.basis, tt.data, deltaItem(t, tt.basis, tt.data, 0, -1))
			if err != nil {
				t.Fatalf("item error: %v", err)
			}
			if !bytes.Equal(got, tt.data) {
				t.Fatalf("rebuilt %d bytes, differing from the %d bytes sent", len(got), len(tt.data))
			}
			if wire > tt.maxWire {
				t.Errorf("%d bytes of ops for %d bytes of data; want at most %d", wire, len(tt.data), tt.maxWire)
			}
		})
	}
	// A split item finds its blocks through the slice of the signature
	// around its range.
	data := edit(big, func(b []byte) []byte { copy(b[1<<20+10:], "edited"); return b })
	for _, r := range [][2]int64{{0, 1 << 20}, {1 << 20, 1 << 20}, {2 << 20, int64(len(data)) - 2<<20}} {
		it := deltaItem(t, big, data, r[0], r[1])
		got, wire, err := deltaRoundTrip(t, big, data, it)
		if err != nil || !bytes.Equal(got, data[r[0]:r[0]+r[1]]) {
			t.Fatalf("split item %d+%d: %v", r[0], r[1], err)
		}
		if wire > 2*2048+100 {
			t.Errorf("split item %d+%d: %d bytes of ops", r[0], r[1], wire)
		}
	}
}

// A hostile or broken op stream is an item error (or, for a tag that has
// no business in the item, a protocol error), never a panic or a read
// outside the basis; the stream stays usable after an item error.
func TestDeltaHostileOps(t *testing.T) {
	basis := randomBytes(6, 10_000) // 15 blocks of 700 bytes, the last of 200
	sig, _ := delta.ComputeSignature(bytes.NewReader(basis), int64(len(basis)), nil)
	sum := func(b []byte) []byte { s := xxh3.Hash128(b).Bytes(); return s[:] }
	copyOp := func(e *encoder, first, count uint64) { e.byte(tagCopy); e.uvarint(first); e.uvarint(count) }
	end := func(e *encoder, b []byte) { e.byte(tagSum); e.fw.Write(sum(b)) }
	tests := []struct {
		name   string
		length int64
		ops    func(e *encoder)
		want   []byte
		err    error // item error
		fatal  error
	}{
		{"valid", 900, func(e *encoder) {
			copyOp(e, 14, 1)
			e.byte(tagChunk)
			e.str(string(basis[:700]))
			end(e, append(basis[9800:], basis[:700]...))
		},
			append(append([]byte(nil), basis[9800:]...), basis[:700]...), nil, nil},
		{"block past the basis", 700, func(e *encoder) { copyOp(e, 15, 1); end(e, basis[:700]) }, nil, ErrDeltaFailed, nil},
		{"huge block index", 700, func(e *encoder) { copyOp(e, math.MaxUint64, 1); end(e, basis[:700]) }, nil, ErrDeltaFailed, nil},
		{"count overflows", 700, func(e *encoder) { copyOp(e, 1, math.MaxUint64); end(e, basis[:700]) }, nil, ErrDeltaFailed, nil},
		{"count past the basis", 1400, func(e *encoder) { copyOp(e, 14, 2); end(e, basis[:700]) }, nil, ErrDeltaFailed, nil},
		{"zero count", 700, func(e *encoder) { copyOp(e, 0, 0); end(e, basis[:700]) }, nil, ErrDeltaFailed, nil},
		{"copy past the length", 699, func(e *encoder) { copyOp(e, 0, 1); end(e, basis[:700]) }, nil, ErrSizeMismatch, nil},
		{"too few bytes", 1000, func(e *encoder) { copyOp(e, 0, 1); end(e, basis[:700]) }, basis[:700], ErrSizeMismatch, nil},
		{"wrong sum", 700, func(e *encoder) { copyOp(e, 1, 1); end(e, basis[:700]) }, basis[700:1400], ErrDeltaFailed, nil},
		{"sender error", 700, func(e *encoder) { copyOp(e, 1, 1); e.byte(tagErr); e.str("disk on fire") }, basis[700:1400], &RemoteError{}, nil},
		{"end tag in a delta", 700, func(e *encoder) { copyOp(e, 0, 1); e.byte(tagEnd) }, basis[:700], nil, ErrProtocol},
		{"cut in a copy", 700, func(e *encoder) { e.byte(tagCopy); e.uvarint(1) }, nil, nil, io.ErrUnexpectedEOF},
		{"cut in the sum", 700, func(e *encoder) { copyOp(e, 0, 1); e.byte(tagSum); e.fw.Write([]byte{1, 2}) }, basis[:700], nil, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := messageBytes(t, func(e *encoder) {
				tt.ops(e)
				if tt.fatal == nil { // a following whole item must still be read right
					e.byte(tagChunk)
					e.str("next")
					e.byte(tagEnd)
				}
			})
			d, stop := messageDecoder(msgs, 61)
			defer stop()
			it := Item{Entry: treewalk.Entry{Path: "f", Kind: treewalk.KindFile, Size: tt.length}, Length: tt.length, Delta: &delta.Signature{BlockSizeBytes: sig.BlockSizeBytes, FileSizeBytes: sig.FileSizeBytes}}
			w := &basisWriter{basis: basis}
			itemErr, fatal := recvItemData(context.Background(), d, w, &it)
			if tt.fatal != nil {
				if !errors.Is(fatal, tt.fatal) {
					t.Fatalf("fatal error %v, want %v", fatal, tt.fatal)
				}
				return
			}
			if fatal != nil {
				t.Fatalf("fatal error %v", fatal)
			}
			var re *RemoteError
			if want := tt.err; (want == nil) != (itemErr == nil) || (want != nil && !errors.Is(itemErr, want) && !(errors.As(want, &re) && errors.As(itemErr, &re))) {
				t.Fatalf("item error %v, want %v", itemErr, want)
			}
			if tt.err == nil && !bytes.Equal(w.out.Bytes(), tt.want) {
				t.Fatalf("rebuilt %q", w.out.Bytes())
			}
			if int64(w.out.Len()) > tt.length {
				t.Fatalf("item of %d bytes yielded %d", tt.length, w.out.Len())
			}
			next := &basisWriter{}
			it2 := Item{Entry: treewalk.Entry{Path: "g", Kind: treewalk.KindFile, Size: 4}, Length: 4}
			if itemErr, fatal := recvItemData(context.Background(), d, next, &it2); itemErr != nil || fatal != nil || next.out.String() != "next" {
				t.Fatalf("next item: %q, %v, %v", next.out.String(), itemErr, fatal)
			}
		})
	}
	// A basis that changed since its signature was made fails the item.
	msgs := messageBytes(t, func(e *encoder) { copyOp(e, 0, 1); end(e, basis[:700]) })
	d, stop := messageDecoder(msgs, 1<<20)
	defer stop()
	it := Item{Entry: treewalk.Entry{Path: "f", Kind: treewalk.KindFile, Size: 700}, Length: 700, Delta: sig}
	w := &basisWriter{basis: basis[:9000]}
	if itemErr, fatal := recvItemData(context.Background(), d, w, &it); !errors.Is(itemErr, ErrDeltaFailed) || fatal != nil {
		t.Fatalf("changed basis: %v, %v", itemErr, fatal)
	}
	// So does a receiver that cannot open bases.
	d, stop = messageDecoder(msgs, 1<<20)
	defer stop()
	if itemErr, fatal := recvItemData(context.Background(), d, &limitCheckWriter{}, &it); !errors.Is(itemErr, ErrDeltaFailed) || fatal != nil {
		t.Fatalf("receiver without bases: %v, %v", itemErr, fatal)
	}
	// Copy and sum tags have no place in a whole item.
	for _, op := range []func(e *encoder){func(e *encoder) { copyOp(e, 0, 1) }, func(e *encoder) { end(e, nil) }} {
		d, stop := messageDecoder(messageBytes(t, op), 1<<20)
		it := Item{Entry: treewalk.Entry{Path: "f", Kind: treewalk.KindFile, Size: 700}, Length: 700}
		if _, fatal := recvItemData(context.Background(), d, &basisWriter{}, &it); !errors.Is(fatal, ErrProtocol) {
			t.Errorf("delta tag in a whole item: %v", fatal)
		}
		stop()
	}
}

func TestSignatureWire(t *testing.T) {
	basis := textBytes(7, 1<<20+5)
	sig, err := delta.ComputeSignature(bytes.NewReader(basis), int64(len(basis)), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*delta.Signature{sig, sig.Slice(300_000, 600_000), sig.Slice(1<<20, 1<<20+5)} {
		got, err := decodeMessages(t, func(e *encoder) { e.signature(s, true) }, func(d *decoder) (any, error) { return d.signature() })
		if g := got.(*delta.Signature); err != nil || g.BlockSizeBytes != s.BlockSizeBytes || g.FileSizeBytes != s.FileSizeBytes || g.First != s.First ||
			g.StrongBytes != s.StrongBytes || !equalSlices(g.Weak, s.Weak) || !equalSlices(g.Strong, s.Strong) {
			t.Fatalf("signature round trip: %v", err)
		}
	}
	bad := []struct {
		name string
		enc  func(e *encoder)
	}{
		{"unknown mode", func(e *encoder) { e.byte(3) }},
		{"block too small", func(e *encoder) { e.byte(sigHeader); e.uvarint(699); e.varint(1000) }},
		{"block too big", func(e *encoder) { e.byte(sigHeader); e.uvarint(delta.MaxSigBlockBytes + 1); e.varint(1000) }},
		{"empty file", func(e *encoder) { e.byte(sigHeader); e.uvarint(700); e.varint(0) }},
		{"negative file", func(e *encoder) { e.byte(sigHeader); e.uvarint(700); e.varint(-5) }},
		{"too many blocks", func(e *encoder) { e.byte(sigHeader); e.uvarint(700); e.varint(700*delta.MaxSigBlocks + 1) }},
		{"strong of 0 bytes", func(e *encoder) {
			e.byte(sigFull)
			e.uvarint(700)
			e.varint(7000)
			e.byte(0)
			e.uvarint(0)
			e.uvarint(1)
		}},
		{"strong of 9 bytes", func(e *encoder) {
			e.byte(sigFull)
			e.uvarint(700)
			e.varint(7000)
			e.byte(9)
			e.uvarint(0)
			e.uvarint(1)
		}},
		{"more blocks than the file", func(e *encoder) {
			e.byte(sigFull)
			e.uvarint(700)
			e.varint(7000)
			e.byte(2)
			e.uvarint(0)
			e.uvarint(11)
		}},
		{"first past the file", func(e *encoder) {
			e.byte(sigFull)
			e.uvarint(700)
			e.varint(7000)
			e.byte(2)
			e.uvarint(11)
			e.uvarint(0)
		}},
		{"overflowing range", func(e *encoder) {
			e.byte(sigFull)
			e.uvarint(700)
			e.varint(7000)
			e.byte(2)
			e.uvarint(5)
			e.uvarint(math.MaxUint64)
		}},
		{"cut in the sums", func(e *encoder) {
			e.byte(sigFull)
			e.uvarint(700)
			e.varint(7000)
			e.byte(2)
			e.uvarint(0)
			e.uvarint(10)
			e.fw.Write(make([]byte, 59))
		}},
	}
	for _, tt := range bad {
		_, err := decodeMessages(t, tt.enc, func(d *decoder) (any, error) { return d.signature() })
		if !errors.Is(err, ErrProtocol) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: %v, want a protocol error", tt.name, err)
		}
	}
	// A plan reply's signatures must be whole files' and for needed entries.
	for _, tt := range []struct {
		name string
		need []int
		enc  func(e *encoder)
	}{
		{"not needed", []int{3}, func(e *encoder) { e.signatures(map[int]*delta.Signature{4: sig}) }},
		{"twice", []int{3}, func(e *encoder) {
			e.uvarint(2)
			e.uvarint(3)
			e.signature(sig, true)
			e.uvarint(3)
			e.signature(sig, true)
		}},
		{"a slice", []int{3}, func(e *encoder) { e.signatures(map[int]*delta.Signature{3: sig.Slice(0, 1000)}) }},
		{"header only", []int{3}, func(e *encoder) { e.uvarint(1); e.uvarint(3); e.signature(sig, false) }},
		{"huge index", []int{3}, func(e *encoder) { e.uvarint(1); e.uvarint(math.MaxUint64); e.signature(sig, true) }},
	} {
		_, err := decodeMessages(t, tt.enc, func(d *decoder) (any, error) { return d.signatures(tt.need) })
		if !errors.Is(err, ErrProtocol) {
			t.Errorf("plan signatures, %s: %v, want a protocol error", tt.name, err)
		}
	}
	got, err := decodeMessages(t, func(e *encoder) { e.signatures(map[int]*delta.Signature{3: sig, 9: sig}) }, func(d *decoder) (any, error) { return d.signatures([]int{1, 3, 9}) })
	if m := got.(map[int]*delta.Signature); err != nil || len(m) != 2 || m[3] == nil || m[9] == nil {
		t.Fatalf("plan signatures: %v, %v", got, err)
	}
}

func equalSlices[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A 60 MiB file with a few bytes changed: the search is linear and cheap.
func TestDeltaLargeFileSpeed(t *testing.T) {
	basis := randomBytes(8, 60<<20)
	data := edit(basis, func(b []byte) []byte {
		for _, off := range []int{1 << 20, 30 << 20, 59 << 20} {
			copy(b[off:], "changed!")
		}
		return b
	})
	sigStart := time.Now()
	sig, err := delta.ComputeSignature(bytes.NewReader(basis), int64(len(basis)), nil)
	if err != nil {
		t.Fatal(err)
	}
	sigTime := time.Since(sigStart)
	it := Item{Entry: treewalk.Entry{Path: "f", Kind: treewalk.KindFile, Size: int64(len(data))}, Length: int64(len(data)), Delta: sig}
	var wire bytes.Buffer
	fw, _ := newFrameWriter(&wire, Compression{})
	start := time.Now()
	if err := sendDelta(&encoder{fw: fw}, bytes.NewReader(data), &it); err != nil {
		t.Fatal(err)
	}
	fw.Close()
	elapsed := time.Since(start)
	t.Logf("60 MiB: signature %v (%d blocks of %d bytes), delta search %v, %d wire bytes", sigTime, len(sig.Weak), sig.BlockSizeBytes, elapsed, wire.Len())
	if wire.Len() > 4*sig.BlockSizeBytes+1000 {
		t.Errorf("%d wire bytes for 3 changes of 8 bytes", wire.Len())
	}
	if elapsed > 5*time.Second {
		t.Errorf("delta search of 60 MiB took %v", elapsed)
	}
	// Unrelated data: every byte is rolled and looked up.
	other := randomBytes(9, 16<<20)
	wire.Reset()
	fw, _ = newFrameWriter(&wire, Compression{})
	start = time.Now()
	it.Entry.Size, it.Length = int64(len(other)), int64(len(other))
	if err := sendDelta(&encoder{fw: fw}, bytes.NewReader(other), &it); err != nil {
		t.Fatal(err)
	}
	fw.Close()
	t.Logf("16 MiB of unrelated data: delta search %v", time.Since(start))
	if e := time.Since(start); e > 5*time.Second {
		t.Errorf("delta search of 16 MiB of unrelated data took %v", e)
	}
}

func BenchmarkDeltaSearch(b *testing.B) {
	basis := randomBytes(8, 60<<20)
	data := edit(basis, func(b []byte) []byte { copy(b[30<<20:], "changed!"); return b })
	sig, _ := delta.ComputeSignature(bytes.NewReader(basis), int64(len(basis)), nil)
	it := Item{Entry: treewalk.Entry{Path: "f", Kind: treewalk.KindFile, Size: int64(len(data))}, Length: int64(len(data)), Delta: sig}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		fw, _ := newFrameWriter(io.Discard, Compression{})
		sendDelta(&encoder{fw: fw}, bytes.NewReader(data), &it)
		fw.Close()
	}
}

func BenchmarkDeltaSearchUnrelated(b *testing.B) {
	basis := randomBytes(8, 60<<20)
	data := randomBytes(9, 60<<20)
	sig, _ := delta.ComputeSignature(bytes.NewReader(basis), int64(len(basis)), nil)
	it := Item{Entry: treewalk.Entry{Path: "f", Kind: treewalk.KindFile, Size: int64(len(data))}, Length: int64(len(data)), Delta: sig}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		fw, _ := newFrameWriter(io.Discard, Compression{})
		sendDelta(&encoder{fw: fw}, bytes.NewReader(data), &it)
		fw.Close()
	}
}
