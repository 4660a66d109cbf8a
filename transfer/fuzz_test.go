package transfer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"runtime/metrics"
	"slices"
	"testing"

	"github.com/zeebo/xxh3"

	"github.com/restoresync/restoresync/delta"
	"github.com/restoresync/restoresync/treewalk"
)

// checkWireError fails t unless err is what a reader of untrusted bytes may
// return: a protocol error or a truncated stream.
func checkWireError(t *testing.T, what string, err error) {
	t.Helper()
	switch {
	case err == nil, err == io.EOF, errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, ErrProtocol):
	default:
		t.Fatalf("%s: error %q (%T) is neither a protocol nor an EOF error", what, err, err)
	}
}

// frameSeeds are valid frame streams from the real writer, one per codec,
// plus hand-made edge cases.
func frameSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, c := range []Compression{{CodecNone, 0}, {CodecLZ4, 0}, {CodecLZ4, 9}, {CodecZstd, 1}, {CodecGzip, 1}} {
		seeds = append(seeds, encodeFrames(t, c, [][]byte{textBytes(1, 400), []byte("tail")}, 0))
	}
	seeds = append(seeds,
		encodeFrames(t, DefaultCompression, [][]byte{randomBytes(2, 200)}),
		nil,
		rawFrame(0, 1, 1, []byte{'x'}),
		rawFrame(2, 1<<20, 3, []byte{1, 2, 3}),
	)
	return seeds
}

func FuzzFrames(f *testing.F) {
	for _, s := range frameSeeds(f) {
		f.Add(s)
	}
	allocs := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	allocated := func() uint64 { metrics.Read(allocs); return allocs[0].Value.Uint64() }
	f.Fuzz(func(t *testing.T, wire []byte) {
		before := allocated()
		fr := newFrameReader(bufio.NewReader(bytes.NewReader(wire)))
		defer drainFrames(fr)
		frames, decoded := 0, 0
		var err error
		for err = fr.next(); err == nil; err = fr.next() {
			frames++
			n := len(*fr.cur)
			if n == 0 || n > maxFrameRaw {
				t.Fatalf("frame %d decoded to %d bytes", frames, n)
			}
			decoded += n
		}
		if err != io.EOF {
			checkWireError(t, "frame reader", err)
		}
		// Each frame costs at most its decoded buffer, its encoded buffer
		// and a decoder's working memory, all bounded by the frame limits.
		// (runtime/metrics rather than ReadMemStats, which stops the world
		// and would slow the fuzzer tenfold.)
		if got, limit := allocated()-before, uint64(frames+1)*8<<20; got > limit {
			t.Fatalf("%d frames of %d wire bytes allocated %d bytes", frames, len(wire), got)
		}
	})
}

// Operations of FuzzMessages, chosen by the first byte of the input.
const (
	fuzzEntries = iota
	fuzzItems
	fuzzPathErrors
	fuzzItemData
	fuzzDeltaData
	fuzzSignature
	fuzzChunks
	fuzzOps
)

// messageSeeds are valid message streams from the real encoder, each led by
// the FuzzMessages operation that reads it.
func messageSeeds(t testing.TB) [][]byte {
	entries := sampleEntries()
	items := sampleItems(entries)
	seed := func(op byte, fn func(e *encoder)) []byte {
		return append([]byte{op}, messageBytes(t, fn)...)
	}
	return [][]byte{
		seed(fuzzEntries, func(e *encoder) { e.entries(entries) }),
		seed(fuzzEntries, func(e *encoder) { e.entries(nil) }),
		seed(fuzzChunks, func(e *encoder) {
			e.chunk(&treewalk.Chunk{Entries: entries[:3], Leaders: []int{2}})
			e.chunk(&treewalk.Chunk{Entries: entries[3:], Errors: []*treewalk.PathError{{Path: "x", Err: errors.New("gone")}}, Last: true, Closed: 1})
		}),
		seed(fuzzItems, func(e *encoder) { e.items(items) }),
		seed(fuzzPathErrors, func(e *encoder) {
			e.pathErrors([]*treewalk.PathError{{Path: "wp-content/cache", Err: errors.New("permission denied")}, {Path: ".", Err: io.ErrUnexpectedEOF}})
		}),
		seed(fuzzItemData, func(e *encoder) {
			e.uvarint(5) // length of the first item
			e.byte(tagChunk)
			e.str("hel")
			e.byte(tagChunk)
			e.str("lo")
			e.byte(tagEnd)
			e.uvarint(3)
			e.byte(tagErr)
			e.str("open wp-config.php: permission denied")
			e.uvarint(0)
			e.byte(tagEnd)
		}),
		seed(fuzzItemData+128, func(e *encoder) { // --verify
			e.uvarint(5)
			e.byte(tagChunk)
			e.str("hello")
			sum := xxh3.Hash128([]byte("hello")).Bytes()
			e.byte(tagSum)
			e.fw.Write(sum[:])
			e.uvarint(2)
			e.byte(tagChunk)
			e.str("no")
			e.byte(tagSum)
			e.fw.Write(make([]byte, 16))
		}),
		seed(fuzzDeltaData, func(e *encoder) {
			e.uvarint(1500) // length, then ops against fuzzBasis
			e.byte(tagCopy)
			e.uvarint(2)
			e.uvarint(1)
			e.byte(tagChunk)
			e.str(string(fuzzBasis[:800]))
			sum := xxh3.Hash128(append(append([]byte(nil), fuzzBasis[1400:2100]...), fuzzBasis[:800]...)).Bytes()
			e.byte(tagSum)
			e.fw.Write(sum[:])
			e.uvarint(700)
			e.byte(tagCopy)
			e.uvarint(math.MaxUint64)
			e.uvarint(math.MaxUint64)
			e.byte(tagErr)
			e.str("gone")
		}),
		seed(fuzzSignature, func(e *encoder) {
			sig, _ := delta.ComputeSignature(bytes.NewReader(fuzzBasis), int64(len(fuzzBasis)), nil)
			e.signature(sig, true)
			e.signature(sig, false)
			e.signature(sig.Slice(1000, 2000), true)
			e.signature(nil, true)
		}),
	}
}

// fuzzBasis is the receiver's basis file in FuzzMessages' delta items: 5
// blocks of 700 bytes and one of 300.
var fuzzBasis = randomBytes(11, 3800)

func FuzzMessages(f *testing.F) {
	for _, s := range messageSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		op, msgs := in[0]%fuzzOps, in[1:]
		// Small frames, so that fields straddle frame boundaries.
		d, stop := messageDecoder(msgs, 61)
		defer stop()
		d.verify = in[0] >= 128 // whole items end with a sum tag (--verify)
		switch op {
		case fuzzEntries:
			list, err := d.entries()
			checkWireError(t, "entries", err)
			for i := range list {
				checkDecodedEntry(t, &list[i])
			}
			if err == nil {
				again, err := decodeMessages(t, func(e *encoder) { e.entries(list) }, func(d *decoder) (any, error) { return d.entries() })
				if err != nil || !equalEntries(again.([]treewalk.Entry), list) {
					t.Fatalf("entries do not survive re-encoding: %v", err)
				}
			}
		case fuzzItems:
			items, err := d.items()
			checkWireError(t, "items", err)
			for i := range items {
				it := &items[i]
				checkDecodedEntry(t, &it.Entry)
				if !it.Entry.HasData() || it.Offset < 0 || it.Length < 0 || it.Offset+it.Length > it.Entry.Size ||
					(!it.Split && it.Length != it.Entry.Size) {
					t.Fatalf("item %q: accepted range %d+%d of a %d-byte %s", it.Entry.Path, it.Offset, it.Length, it.Entry.Size, it.Entry.Kind)
				}
			}
		case fuzzPathErrors:
			errs, err := d.pathErrors()
			checkWireError(t, "pathErrors", err)
			for _, pe := range errs {
				var re *RemoteError
				if !errors.As(pe, &re) {
					t.Fatalf("path error %q is not a RemoteError", pe)
				}
			}
		case fuzzItemData:
			for range 4 {
				n, err := d.uvarint()
				if err != nil {
					checkWireError(t, "item length", err)
					return
				}
				if n > 1<<40 {
					return
				}
				it := &Item{Entry: treewalk.Entry{Path: "f", Kind: treewalk.KindFile, Size: int64(n)}, Length: int64(n)}
				w := &limitCheckWriter{}
				itemErr, fatal := recvItemData(context.Background(), d, w, it)
				if w.n > it.Length {
					t.Fatalf("item of %d bytes yielded %d", it.Length, w.n)
				}
				if fatal != nil {
					checkWireError(t, "item data", fatal)
					return
				}
				if itemErr == nil && (w.n != it.Length || !w.eof) {
					t.Fatalf("item of %d bytes succeeded after %d bytes (EOF seen: %v)", it.Length, w.n, w.eof)
				}
				if w.eof && w.n != it.Length {
					t.Fatalf("item of %d bytes reached EOF after %d bytes", it.Length, w.n)
				}
				var re *RemoteError
				if itemErr != nil && !errors.Is(itemErr, ErrSizeMismatch) && !errors.As(itemErr, &re) && !(d.verify && errors.Is(itemErr, ErrVerifyFailed)) {
					t.Fatalf("item error %q is neither a size mismatch, a checksum mismatch nor the sender's", itemErr)
				}
			}
		case fuzzDeltaData:
			// Hostile ops against a known basis: copies out of range,
			// overflowing counts, wrong sums. Each item either fails or
			// yields exactly its length, whose hash the sender vouched for.
			for range 4 {
				n, err := d.uvarint()
				if err != nil {
					checkWireError(t, "item length", err)
					return
				}
				if n > 1<<40 {
					return
				}
				it := &Item{Entry: treewalk.Entry{Path: "f", Kind: treewalk.KindFile, Size: int64(n)}, Length: int64(n),
					Delta: &delta.Signature{BlockSizeBytes: 700, FileSizeBytes: int64(len(fuzzBasis))}}
				w := &basisWriter{basis: fuzzBasis}
				itemErr, fatal := recvItemData(context.Background(), d, w, it)
				if int64(w.out.Len()) > it.Length {
					t.Fatalf("delta item of %d bytes yielded %d", it.Length, w.out.Len())
				}
				if fatal != nil {
					checkWireError(t, "delta data", fatal)
					return
				}
				if itemErr == nil && int64(w.out.Len()) != it.Length {
					t.Fatalf("delta item of %d bytes succeeded after %d bytes", it.Length, w.out.Len())
				}
				var re *RemoteError
				if itemErr != nil && !errors.Is(itemErr, ErrSizeMismatch) && !errors.Is(itemErr, ErrDeltaFailed) && !errors.As(itemErr, &re) {
					t.Fatalf("delta item error %q is neither a size mismatch, a failed delta nor the sender's", itemErr)
				}
			}
		case fuzzChunks:
			// What the chunk checker accepts, chunk after chunk, is a
			// list the whole-list check accepts too.
			var chk treewalk.ListChecker
			var all []treewalk.Entry
			for range 3 {
				ch, err := d.chunk()
				if err != nil {
					checkWireError(t, "chunk", err)
					break
				}
				for i := range ch.Entries {
					checkDecodedEntry(t, &ch.Entries[i])
				}
				if chk.Check(ch) != nil {
					break
				}
				all = append(all, ch.Entries...)
			}
			if err := treewalk.CheckList(all); err != nil {
				t.Fatalf("chunks the checker accepted make a list CheckList refuses: %v", err)
			}
		case fuzzSignature:
			for range 4 {
				s, err := d.signature()
				if err != nil {
					checkWireError(t, "signature", err)
					return
				}
				if s == nil {
					continue
				}
				if s.BlockSizeBytes < delta.MinSigBlockBytes || s.BlockSizeBytes > delta.MaxSigBlockBytes || s.FileSizeBytes < 1 || s.Blocks() > delta.MaxSigBlocks ||
					len(s.Weak) != len(s.Strong) || int64(s.First+len(s.Weak)) > s.Blocks() || (s.Weak != nil && (s.StrongBytes < 1 || s.StrongBytes > 8)) {
					t.Fatalf("accepted signature %+v", s)
				}
				// A sender must be able to search with whatever it accepted.
				data := fuzzBasis[:min(len(fuzzBasis), 2000)]
				it := Item{Entry: treewalk.Entry{Path: "f", Kind: treewalk.KindFile, Size: int64(len(data))}, Length: int64(len(data)), Delta: s}
				if s.Weak == nil {
					continue
				}
				var sink bytes.Buffer
				fw, _ := newFrameWriter(&sink, Compression{})
				if err := sendDelta(&encoder{fw: fw}, bytes.NewReader(data), &it); err != nil {
					t.Fatalf("sendDelta with a decoded signature: %v", err)
				}
				fw.Close()
			}
		}
	})
}

// checkDecodedEntry checks what the decoder promises about an entry it
// accepted.
func checkDecodedEntry(t *testing.T, e *treewalk.Entry) {
	t.Helper()
	if err := treewalk.ValidPath(e.Path); err != nil {
		t.Fatalf("accepted entry with path %q: %v", e.Path, err)
	}
	if e.LinkTo != "" && (treewalk.ValidPath(e.LinkTo) != nil || e.LinkTo == "." || e.Kind == treewalk.KindDir) {
		t.Fatalf("accepted entry %q with hardlink target %q", e.Path, e.LinkTo)
	}
	if e.Kind < treewalk.KindFile || e.Kind > treewalk.KindBlkDev || e.Mode > 07777 || e.Size < 0 ||
		(e.Kind != treewalk.KindFile && e.Size != 0) || (e.Kind == treewalk.KindSymlink) != (e.LinkTarget != "") {
		t.Fatalf("accepted entry %+v", *e)
	}
	for i, x := range e.Xattrs {
		if ValidXattrName(x.Name) != nil || len(x.Value) > treewalk.XattrValueMax || i > 0 && e.Xattrs[i-1].Name >= x.Name {
			t.Fatalf("accepted entry %q with xattr %q (%d bytes)", e.Path, x.Name, len(x.Value))
		}
	}
	for _, a := range append(slices.Clone(e.ACL), e.DefaultACL...) {
		if treewalk.CheckACLEntry(a) != nil {
			t.Fatalf("accepted entry %q with ACL entry %+v", e.Path, a)
		}
	}
	if e.Sparse && e.Kind != treewalk.KindFile || e.DefaultACL != nil && e.Kind != treewalk.KindDir {
		t.Fatalf("accepted entry %+v", *e)
	}
}

// limitCheckWriter reads an item in small pieces and counts its bytes.
type limitCheckWriter struct {
	n   int64
	eof bool
}

func (w *limitCheckWriter) WriteItem(ctx context.Context, it *Item, r io.Reader) error {
	var buf [97]byte
	for {
		n, err := r.Read(buf[:])
		w.n += int64(n)
		if err == io.EOF {
			w.eof = true
			return nil
		}
		if err != nil {
			return err
		}
	}
}
