package transfer

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/treewalk"
)

// The file list is written entry after entry, each relative to the one
// before (shared path prefix, fields that repeat left out, mtime as a
// difference): a real tree round-trips exactly and costs far fewer bytes
// than its entries written one by one.
func TestEntryListRoundTripAndSize(t *testing.T) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	list, err := treewalk.Walk(context.Background(), filepath.Join(strings.TrimSpace(string(out)), "src", "net"))
	if err != nil {
		t.Fatal(err)
	}
	size := func(write func(e *encoder)) int {
		var wire bytes.Buffer
		fw, err := newFrameWriter(&wire, Compression{Codec: CodecNone})
		if err != nil {
			t.Fatal(err)
		}
		write(&encoder{fw: fw})
		if err := fw.Close(); err != nil {
			t.Fatal(err)
		}
		return wire.Len()
	}
	chained := size(func(e *encoder) { e.entries(list.Entries) })
	alone := size(func(e *encoder) {
		for i := range list.Entries {
			e.entry(&list.Entries[i])
		}
	})
	if chained > alone*6/10 {
		t.Errorf("%d entries took %d bytes as a list, %d written one by one: want the list at most 60%%", len(list.Entries), chained, alone)
	}
	t.Logf("%d entries: %d bytes as a list, %d one by one", len(list.Entries), chained, alone)
	got, err := decodeMessages(t, func(e *encoder) { e.entries(list.Entries) }, func(d *decoder) (any, error) { return d.entries() })
	if err != nil {
		t.Fatal(err)
	}
	back := got.([]treewalk.Entry)
	if len(back) != len(list.Entries) {
		t.Fatalf("decoded %d entries of %d", len(back), len(list.Entries))
	}
	for i := range back {
		if !reflect.DeepEqual(back[i], list.Entries[i]) {
			t.Fatalf("entry %d: %+v != %+v", i, back[i], list.Entries[i])
		}
	}
}

// A hostile list: a shared prefix longer than the previous path, or unknown
// flag bits, is a protocol error, never a slice panic.
func TestEntryListRejectsBadPrefixAndFlags(t *testing.T) {
	first := func(e *encoder) { e.entry(&treewalk.Entry{Path: "ab", Kind: treewalk.KindDir, Mode: 0o755}) }
	for name, second := range map[string]func(e *encoder){
		"prefix too long": func(e *encoder) { e.byte(0); e.uvarint(3); e.str("c") },
		"huge prefix":     func(e *encoder) { e.byte(0); e.uvarint(1 << 62); e.str("") },
		"unknown flags":   func(e *encoder) { e.byte(0x80); e.uvarint(0); e.str("x") },
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeMessages(t, func(e *encoder) {
				e.uvarint(2)
				first(e)
				second(e)
				e.byte(byte(treewalk.KindFile))
			}, func(d *decoder) (any, error) { return d.entries() })
			checkNamedProtocolError(t, err, "ab", "")
		})
	}
}
