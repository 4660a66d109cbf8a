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
