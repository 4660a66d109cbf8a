package restore

import (
	"reflect"
	"testing"

	"github.com/restoresync/restoresync/restore/dest"
)

// fillAll sets every field of the struct v points to, recursively, to a
// value that is not its zero value.
func fillAll(t *testing.T, v reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(100 + i))
		case reflect.Pointer: // *uint32 (ChmodUmask)
			p := reflect.New(f.Type().Elem())
			if p.Elem().Kind() != reflect.Uint32 {
				t.Fatalf("field %s of kind *%s: teach fillAll", v.Type().Field(i).Name, p.Elem().Kind())
			}
			p.Elem().SetUint(uint64(100 + i))
			f.Set(p)
		case reflect.String:
			f.SetString(v.Type().Field(i).Name)
		case reflect.Slice:
			f.Set(reflect.ValueOf([]string{v.Type().Field(i).Name}))
		case reflect.Struct:
			fillAll(t, f)
		default:
			t.Fatalf("field %s of kind %s: teach fillAll", v.Type().Field(i).Name, f.Kind())
		}
	}
}

// TestReceiverOptionsRoundTrip checks that every field of WriterOptions
// (and of its OwnerOptions) reaches the receiver of a push: the wire form
// carries it and comes back as the same options.
func TestReceiverOptionsRoundTrip(t *testing.T) {
	var want dest.WriterOptions
	fillAll(t, reflect.ValueOf(&want).Elem())
	// Options of pull-only methods, never a push receiver's: MtimeSeconds
	// is the sftp method's quick check.
	want.MtimeSeconds = false
	ro := receiverOptions(want)
	if got := writerOptions(ro); !reflect.DeepEqual(got, want) {
		t.Errorf("writer options after the wire:\n got %+v\nwant %+v", got, want)
	}
	// The wire type has no field that the conversion leaves out.
	var zero dest.WriterOptions
	if got := receiverOptions(zero); !reflect.ValueOf(got).IsZero() {
		t.Errorf("zero options have a wire form that is not zero: %+v", got)
	}
	var full = ro
	fillAll(t, reflect.ValueOf(&full).Elem())
	if got := receiverOptions(writerOptions(full)); !reflect.DeepEqual(got, full) {
		t.Errorf("wire options after restore:\n got %+v\nwant %+v", got, full)
	}
}

// The wire form of a push's options carries the client's umask whenever
// --chmod is given, so that the receiver resolves the items naming no
// class ("+w", "D+w") as rsync does, with the client's umask; an explicit
// ChmodUmask is kept; without --chmod there is none to send.
func TestReceiverOptionsChmodUmask(t *testing.T) {
	var o dest.WriterOptions
	if got := receiverOptions(o).Owner.ChmodUmask; got != nil {
		t.Errorf("no --chmod: ChmodUmask %03o on the wire; want none", *got)
	}
	o.Owner.Chmod = []string{"ug-s,a+rX,D+w"}
	got := receiverOptions(o).Owner.ChmodUmask
	if want := dest.ProcessUmask(); got == nil || *got != want {
		t.Errorf("--chmod: ChmodUmask %v on the wire; want this process's umask %03o", got, want)
	}
	u := uint32(0o002)
	o.Owner.ChmodUmask = &u
	ro := receiverOptions(o)
	if got := ro.Owner.ChmodUmask; got == nil || *got != 0o002 || got == &u {
		t.Errorf("ChmodUmask 002: %v on the wire; want a copy of 002", got)
	}
	if back := writerOptions(ro).Owner.ChmodUmask; back == nil || *back != 0o002 || back == ro.Owner.ChmodUmask {
		t.Errorf("ChmodUmask 002 after the wire: %v; want a copy of 002", back)
	}
}
