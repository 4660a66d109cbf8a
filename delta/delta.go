package delta

import (
	"io"
	"sync"

	"github.com/zeebo/xxh3"
)

// The sender's half of a delta: the rsync algorithm's search (Tridgell and
// Mackerras 1996, section 3). A window of one block slides over the data a
// byte at a time; its weak checksum is updated in constant time per byte
// (rollWeak) and looked up in a hash table of the basis's weak sums; only a
// hit is confirmed with the strong hash. A confirmed block becomes a copy
// instruction (consecutive blocks merge into one) and the window jumps past
// it; bytes the window slid over become literal runs. The search is O(n) in
// the data's length and reads it once, through a bounded buffer.

// LiteralRunBytes is the longest literal run Search holds back before it
// hands it to Ops.Literal (a run may exceed it by less than a block): it
// bounds the memory kept across buffer refills.
const LiteralRunBytes = 256 << 10

// searchBufBytes is the matcher's data buffer beyond two blocks: literal
// runs are flushed at LiteralRunBytes, so what is kept across a refill is
// at most a run and a block.
const searchBufBytes = 4 * LiteralRunBytes

// matcher holds the reusable state of the search.
type matcher struct {
	buf   []byte
	head  []int32 // weak-sum table: first block index in each bucket, or -1
	next  []int32 // chain of blocks with the same bucket, or -1
	shift uint32  // 32 - log2(len(head))
	// filter has one bit per slot of a table 8 times head's size, set for
	// the blocks' weak sums: most windows are rejected by one bit in a
	// table that stays in the CPU's cache.
	filter      []uint64
	filterShift uint32
}

var matchers = sync.Pool{New: func() any {
	return &matcher{buf: make([]byte, searchBufBytes+2*MaxSigBlockBytes)}
}}

// Ops receives the instructions of a delta, in data order: literal runs
// of data the basis lacks and copies of runs of basis blocks. Search calls
// it from its own goroutine only.
type Ops interface {
	// Literal is a run of data, of any length; data is valid only during
	// the call.
	Literal(data []byte)
	// Copy is count consecutive basis blocks from first (an index among
	// the whole basis's blocks).
	Copy(first, count uint64)
}

// opRun merges consecutive block copies into one Copy.
type opRun struct {
	out        Ops
	run, count uint64 // pending copy: count blocks from run
}

func (o *opRun) copyBlock(b uint64) {
	if o.count > 0 && b == o.run+o.count {
		o.count++
		return
	}
	o.flush()
	o.run, o.count = b, 1
}

func (o *opRun) flush() {
	if o.count > 0 {
		o.out.Copy(o.run, o.count)
		o.count = 0
	}
}

func (o *opRun) literal(data []byte) {
	if len(data) == 0 {
		return
	}
	o.flush()
	o.out.Literal(data)
}

// Search reads exactly length bytes of data from r and describes them to
// out as literal runs and copies of the basis blocks that sig describes
// (sig must hold the sums: Weak and Strong). It returns the bytes read.
// When r fails or ends before length bytes (io.EOF or io.ErrUnexpectedEOF),
// Search returns at once with the read error, leaving a pending copy
// unsaid. The instructions Search gave rebuild the data exactly from a
// basis whose blocks match sig, short of a strong-hash collision: callers
// check a hash of the whole data. Safe for concurrent use (each call has
// its own state).
func Search(r io.Reader, length int64, sig *Signature, out Ops) (int64, error) {
	m := matchers.Get().(*matcher)
	defer matchers.Put(m)
	bs := sig.BlockSizeBytes
	m.index(sig)
	ops := &opRun{out: out}
	mask := strongMask(sig.StrongBytes)
	buf := m.buf[:searchBufBytes+2*bs]

	// lookup returns the basis block (an index among the whole basis's
	// blocks) whose sums match the window w with weak sum weak, or -1. The
	// block that continues the pending copy is tried first, so repeated
	// content keeps runs together.
	lookup := func(w []byte, weak uint32) int64 {
		var strong uint64
		strongDone := false
		try := func(i int) bool {
			if sig.Weak[i] != weak || sig.blockLen(int64(sig.First+i)) != len(w) {
				return false
			}
			if !strongDone {
				strong, strongDone = xxh3.Hash(w)&mask, true
			}
			return strong == sig.Strong[i]
		}
		if ops.count > 0 {
			if i := int(ops.run+ops.count) - sig.First; i >= 0 && i < len(sig.Weak) && try(i) {
				return int64(sig.First + i)
			}
		}
		for i := m.head[bucket(weak, m.shift)]; i >= 0; i = m.next[i] {
			if try(int(i)) {
				return int64(sig.First) + int64(i)
			}
		}
		return -1
	}

	var (
		n, p, lit int   // valid bytes, window start, literal start
		read      int64 // bytes read from r
		eof       bool
		s1, s2    uint32
		have      bool // s1, s2 hold the window at p
	)
	for {
		// Refill when the window and the byte after it are not in the
		// buffer, keeping the pending literal bytes.
		if n-p <= bs && !eof {
			if p-lit >= LiteralRunBytes {
				ops.literal(buf[lit:p])
				lit = p
			}
			copy(buf, buf[lit:n])
			n, p, lit = n-lit, p-lit, 0
			for n < len(buf) && !eof {
				want := min(int64(len(buf)-n), length-read)
				k, err := io.ReadFull(r, buf[n:n+int(want)])
				n += k
				read += int64(k)
				if err != nil {
					return read, err
				}
				eof = read == length
			}
			continue
		}
		if n-p < bs {
			break // the tail, shorter than a block
		}
		if len(m.next) == 0 { // no block to look for: all literal
			if eof {
				break
			}
			p = n - bs // keep a block for the tail check
			continue
		}
		if !have {
			s1, s2 = weakParts(buf[p : p+bs])
			have = true
		}
		// Slide while no block can match: one table probe per byte. The
		// loop stops at a candidate, at the buffer's end or when the
		// literal run is a chunk long.
		filter, fshift := m.filter, m.filterShift
		cont, contWeak := -1, uint32(0) // the block that would continue the pending copy
		if ops.count > 0 {
			if i := int(ops.run+ops.count) - sig.First; i >= 0 && i < len(sig.Weak) {
				cont, contWeak = i, sig.Weak[i]
			}
		}
		weak := s1&0xffff | s2<<16
		limit := min(n-bs, lit+LiteralRunBytes)
		for p < limit && filter[bucket(weak, fshift)>>6]&(1<<(bucket(weak, fshift)&63)) == 0 && (cont < 0 || weak != contWeak) {
			s1, s2 = rollWeak(s1, s2, bs, buf[p], buf[p+bs])
			p++
			weak = s1&0xffff | s2<<16
		}
		if p-lit >= LiteralRunBytes {
			ops.literal(buf[lit:p])
			lit = p
		}
		if b := lookup(buf[p:p+bs], weak); b >= 0 {
			ops.literal(buf[lit:p])
			ops.copyBlock(uint64(b))
			p += bs
			lit, have = p, false
			continue
		}
		if p+bs < n {
			s1, s2 = rollWeak(s1, s2, bs, buf[p], buf[p+bs])
		} else {
			have = false
		}
		p++
	}
	// The basis's last block, when short, can only match the data's end.
	if last := sig.Blocks() - 1; int64(sig.First+len(sig.Weak)) > last {
		if l := sig.blockLen(last); l < bs && n-p >= l {
			w := buf[n-l : n]
			if sig.Weak[int(last)-sig.First] == WeakSum(w) && sig.Strong[int(last)-sig.First] == xxh3.Hash(w)&mask {
				ops.literal(buf[lit : n-l])
				ops.copyBlock(uint64(last))
				lit = n
			}
		}
	}
	ops.literal(buf[lit:n])
	ops.flush()
	return read, nil
}

// index fills the weak-sum table with the full-size blocks of sig.
func (m *matcher) index(sig *Signature) {
	nb := 0
	for i := range sig.Weak {
		if sig.blockLen(int64(sig.First+i)) == sig.BlockSizeBytes {
			nb = i + 1
		}
	}
	if nb == 0 {
		m.head, m.next, m.filter = m.head[:0], m.next[:0], m.filter[:0]
		return
	}
	bits := uint32(4)
	for 1<<bits < 4*nb {
		bits++
	}
	size := 1 << bits
	m.shift = 32 - bits
	if cap(m.head) < size {
		m.head = make([]int32, size)
	}
	m.head = m.head[:size]
	for i := range m.head {
		m.head[i] = -1
	}
	m.filterShift = m.shift - 3
	if words := size * 8 / 64; cap(m.filter) < words {
		m.filter = make([]uint64, words)
	} else {
		m.filter = m.filter[:words]
		clear(m.filter)
	}
	if cap(m.next) < nb {
		m.next = make([]int32, nb)
	}
	m.next = m.next[:nb]
	for i := nb - 1; i >= 0; i-- { // chains list blocks in ascending order
		h := bucket(sig.Weak[i], m.shift)
		m.next[i] = m.head[h]
		m.head[h] = int32(i)
		f := bucket(sig.Weak[i], m.filterShift)
		m.filter[f>>6] |= 1 << (f & 63)
	}
}

// bucket maps a weak sum to a slot of a table of 2^(32-shift) slots
// (Fibonacci hashing: the top bits of the product).
func bucket(weak uint32, shift uint32) int {
	return int(weak * 0x9e3779b1 >> shift)
}
