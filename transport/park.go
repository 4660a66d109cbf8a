package transport

// A parked stream is one whose remote agent has ended a session and
// awaits another handshake on the same stream (the protocol's msgNext):
// SSHMux keeps it, and a later Dial with the same connection settings and
// command takes it instead of starting a new remote command. Starting one
// costs a session open and the command's start on the server: about
// 0.4 s on a loaded sshd, which many small restores of one run
// (restore --accounts) would each pay.

// parker is a Stream that can be parked: a session on an SSHMux
// connection.
type parker interface {
	canPark() bool
	park() bool
}

// unwrapper is a Stream wrapping another (--bwlimit's).
type unwrapper interface{ unwrap() Stream }

func innerStream(s Stream) Stream {
	for {
		u, ok := s.(unwrapper)
		if !ok {
			return s
		}
		s = u.unwrap()
	}
}

// CanPark reports whether s could be parked (see Park): it is a session
// on an SSHMux connection, and the mux is open. Whoever ends a session
// with msgNext asks first, so that a stream that cannot be kept ends with
// a goodbye instead.
func CanPark(s Stream) bool {
	p, ok := innerStream(s).(parker)
	return ok && p.canPark()
}

// Park hands s, a stream whose remote agent awaits a new handshake and
// from which nothing more is to be read, to its SSHMux for a later Dial
// with the same settings and command, and reports whether it was taken.
// When it was not (the mux is closing, or holds as many parked streams as
// it keeps), the caller closes s. A wrapper of s (--bwlimit's) must not
// be used afterwards.
func Park(s Stream) bool {
	if u, ok := s.(*limitedStream); ok {
		u.cancel()
	}
	p, ok := innerStream(s).(parker)
	return ok && p.park()
}

// Reused reports whether s is a parked stream that a Dial returned: its
// agent may have ended while it was parked, so a handshake that fails on
// it is worth one more try on a new stream.
func Reused(s Stream) bool {
	ss, ok := innerStream(s).(*sshStream)
	return ok && ss.reused
}
