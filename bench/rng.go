package bench

import (
	"encoding/binary"
	"hash/fnv"
	"math/bits"
	"math/rand/v2"
)

// rng is the generator's source of randomness: a PCG (whose output is
// specified by math/rand/v2 and so stable across Go releases) with helpers
// built from integer arithmetic only. The rand.Rand methods are avoided on
// purpose: their algorithms are not promised to stay the same, and floating
// point could differ between architectures, either of which would break
// "same options, same tree".
//
// An rng is not safe for concurrent use; every file gets its own.
type rng struct{ p rand.PCG }

// newRNG returns a generator for one independent stream of the tree, named by
// stream (a section name or a file's path), so that a change in one part of
// a profile does not shift the bytes of every other part.
func newRNG(seed int64, stream string) *rng {
	h := fnv.New64a()
	h.Write([]byte(stream))
	r := &rng{}
	r.p.Seed(uint64(seed), h.Sum64())
	return r
}

// u64 returns 64 random bits.
func (r *rng) u64() uint64 { return r.p.Uint64() }

// intn returns a number in [0, n); n must be > 0. It uses the high half of a
// 64×64 multiplication (Lemire), whose tiny bias does not matter here.
func (r *rng) intn(n int) int {
	hi, _ := bits.Mul64(r.u64(), uint64(n))
	return int(hi)
}

// between returns a number in [lo, hi]; when hi <= lo it returns lo.
func (r *rng) between(lo, hi int64) int64 {
	if hi <= lo {
		return lo
	}
	x, _ := bits.Mul64(r.u64(), uint64(hi-lo+1))
	return lo + int64(x)
}

// percent reports true with probability p/100.
func (r *rng) percent(p int) bool { return r.intn(100) < p }

// pick returns a random element of s, which must not be empty.
func (r *rng) pick(s []string) string { return s[r.intn(len(s))] }

// spread returns a size between lo and hi bytes, spread roughly evenly over
// the powers of two in between (a log-uniform law done with integers only):
// many small values, a few large ones, as file sizes are.
func (r *rng) spread(lo, hi int64) int64 {
	if hi <= lo || lo <= 0 {
		return max(lo, 0)
	}
	octaves := 0
	for v := lo; v < hi; v <<= 1 {
		octaves++
	}
	base := lo << r.intn(octaves)
	return min(r.between(base, base*2-1), hi)
}

// fill writes random bytes over all of b.
func (r *rng) fill(b []byte) {
	for len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, r.u64())
		b = b[8:]
	}
	if len(b) > 0 {
		var tail [8]byte
		binary.LittleEndian.PutUint64(tail[:], r.u64())
		copy(b, tail[:])
	}
}
