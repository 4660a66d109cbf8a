package transport

import (
	"errors"
	"testing"
)

// A remote command's end is marked with what a rerun cannot fix from its
// exit status and first output alone: the message stays as it was.
func TestRefusalKinds(t *testing.T) {
	base := errors.New("remote command exited")
	for _, c := range []struct {
		status int
		head   string
		want   []error
		not    []error
	}{
		{1, "This service allows sftp connections only.\n", []error{ErrRemoteRefused, ErrSFTPOnly}, []error{ErrRemoteNotFound}},
		{127, "", []error{ErrRemoteRefused, ErrRemoteNotFound}, []error{ErrSFTPOnly}},
		{1, "", []error{ErrRemoteRefused}, []error{ErrRemoteNotFound, ErrSFTPOnly}},
		{1, "RSYNC", nil, []error{ErrRemoteRefused}}, // it ran and answered: mid-transfer
		{0, "", nil, []error{ErrRemoteRefused}},      // a clean exit is no refusal
		{127, "x", nil, []error{ErrRemoteNotFound}},  // output: it ran
	} {
		err := refusal(base, c.status, []byte(c.head))
		if err.Error() != base.Error() || !errors.Is(err, base) {
			t.Errorf("status %d, %q: %v, want %v kept", c.status, c.head, err, base)
		}
		for _, k := range c.want {
			if !errors.Is(err, k) {
				t.Errorf("status %d, %q: not %v", c.status, c.head, k)
			}
		}
		for _, k := range c.not {
			if errors.Is(err, k) {
				t.Errorf("status %d, %q: %v, want not", c.status, c.head, k)
			}
		}
	}
	if h := keepHead(keepHead(nil, make([]byte, 40)), make([]byte, 40)); len(h) != headBytes {
		t.Errorf("keepHead kept %d bytes, want %d", len(h), headBytes)
	}
}
