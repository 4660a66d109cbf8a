package testsshd

import (
	"net"
	"testing"
)

// Silent listens on 127.0.0.1 at a free port, writes banner to every
// connection it accepts and then says nothing more, as a host whose sshd
// hangs after its banner (or, with an empty banner, one that never
// answers). It returns the address (host:port); the listener and the
// connections are closed when the test ends. Safe to call from parallel
// tests.
func Silent(t testing.TB, banner string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(banner))
			t.Cleanup(func() { c.Close() })
		}
	}()
	return ln.Addr().String()
}
