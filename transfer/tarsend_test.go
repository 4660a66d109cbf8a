package transfer

import (
	"fmt"
	"testing"

	"github.com/restoresync/restoresync/treewalk"
)

// TarShards covers every entry once, balances bytes, keeps hardlink
// followers with their leader and the rest on shard 0, and is a pure
// function of the list.
func TestTarShards(t *testing.T) {
	entries := []treewalk.Entry{{Path: ".", Kind: treewalk.KindDir}}
	for i := range 100 {
		entries = append(entries, treewalk.Entry{Path: fmt.Sprintf("f%03d", i), Kind: treewalk.KindFile, Size: int64(i) << 16})
	}
	entries = append(entries,
		treewalk.Entry{Path: "link", Kind: treewalk.KindFile, LinkTo: "f099"},
		treewalk.Entry{Path: "sym", Kind: treewalk.KindSymlink, LinkTarget: "f000"})
	for _, shards := range []int{1, 3, 8} {
		a := TarShards(entries, shards)
		b := TarShards(entries, shards)
		load := make([]int64, shards)
		for i, s := range a {
			if s != b[i] || s < 0 || s >= shards {
				t.Fatalf("shards=%d: entry %d on shard %d (then %d)", shards, i, s, b[i])
			}
			load[s] += entries[i].Size
		}
		if a[0] != 0 || a[len(a)-1] != 0 || a[len(a)-2] != a[100] {
			t.Errorf("shards=%d: dir on %d, symlink on %d, hardlink on %d with its leader on %d", shards, a[0], a[len(a)-1], a[len(a)-2], a[100])
		}
		lo, hi := load[0], load[0]
		for _, l := range load {
			lo, hi = min(lo, l), max(hi, l)
		}
		if hi-lo > 100<<16 {
			t.Errorf("shards=%d: loads %v are unbalanced", shards, load)
		}
	}
}
