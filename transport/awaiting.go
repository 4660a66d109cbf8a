package transport

import "errors"

// Connection setup: what did not answer when a setup timed out, in words
// for the error message.

// DialAwaiting says, for an error of Dialer.Dial, what a connection setup
// that timed out was waiting for, as a clause ("the SSH server at ... did
// not answer"); "the connection was not established" when err does not say.
func DialAwaiting(err error) string {
	var te *setupTimeoutError
	if errors.As(err, &te) {
		return te.what
	}
	return "the connection was not established"
}

// HandshakeAwaiting says what a connection setup that timed out after
// Dial on s (during the protocol handshake of the caller) was waiting for,
// as a clause: the remote agent, or what an -e program did or did not say.
func HandshakeAwaiting(s Stream) string {
	if w, ok := s.(setupWaiter); ok {
		return w.awaiting()
	}
	return "the remote agent did not answer our protocol handshake"
}

// setupWaiter is a Stream that can say what a connection setup that timed
// out after Dial was waiting for (sshStream, rshStream).
type setupWaiter interface {
	// awaiting says what did not answer, as a clause: "the remote agent
	// did not answer ...".
	awaiting() string
}
