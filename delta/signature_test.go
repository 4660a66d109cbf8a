package delta

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// randomBytes returns n incompressible bytes, the same for the same seed.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// textBytes returns n bytes of PHP-like text, the same for the same seed.
func textBytes(seed uint64, n int) []byte {
	words := []string{"function ", "return ", "$this", "->", "array(", ");\n", "echo ", "$post", "SELECT ", "'publish'", "42", "\t"}
	r := rand.New(rand.NewPCG(seed, 2))
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.Bytes()[:n]
}

// The rolling update of the weak checksum equals its recomputation over
// the window at every offset, for several window sizes and data shapes.
func TestWeakSumRolling(t *testing.T) {
	datas := map[string][]byte{
		"random": randomBytes(1, 20_000),
		"text":   textBytes(2, 20_000),
		"zeros":  make([]byte, 5_000),
		"0xff":   bytes.Repeat([]byte{0xff}, 5_000),
	}
	for name, data := range datas {
		for _, l := range []int{1, 2, 7, 64, 700, 4096} {
			s1, s2 := weakParts(data[:l])
			for k := 0; ; k++ {
				if got, want := s1&0xffff|s2<<16, WeakSum(data[k:k+l]); got != want {
					t.Fatalf("%s, window %d, offset %d: rolled %08x, recomputed %08x", name, l, k, got, want)
				}
				if k+l == len(data) {
					break
				}
				s1, s2 = rollWeak(s1, s2, l, data[k], data[k+l])
			}
		}
	}
}

// rsync's block sizes (generator.c, sum_sizes_sqroot): 700 up to 490,000
// bytes, then the square root rounded down to a multiple of 8, capped at
// 128 KiB.
func TestSignatureBlockSize(t *testing.T) {
	for _, tt := range []struct {
		size int64
		want int
	}{
		{1, 700}, {490_000, 700}, {490_001, 700}, {600_000, 768}, {5 << 20, 2288},
		{60 << 20, 7928}, {1 << 30, 32768}, {1 << 40, 128 << 10}, {math.MaxInt64, 128 << 10},
	} {
		if got := SignatureBlockSize(tt.size); got != tt.want {
			t.Errorf("SignatureBlockSize(%d) = %d, want %d", tt.size, got, tt.want)
		}
	}
	for _, tt := range []struct {
		size int64
		want int
	}{{1000, 2}, {5 << 20, 2}, {60 << 20, 3}, {1 << 40, 6}} {
		if got := signatureStrongBytes(tt.size, SignatureBlockSize(tt.size)); got != tt.want {
			t.Errorf("signatureStrongBytes(%d) = %d, want %d", tt.size, got, tt.want)
		}
	}
}
