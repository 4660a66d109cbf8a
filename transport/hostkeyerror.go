package transport

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
)

// HostKeyError describes a host key the known_hosts files do not accept.
// It unwraps to ErrHostKey (and so to ErrConnect).
type HostKeyError struct {
	// Host is the name looked up in known_hosts, e.g. "[127.0.0.1]:2222".
	Host string
	// Hostname and Port are where the connection went (for ssh-keyscan).
	Hostname string
	Port     int
	// KeyType and Fingerprint (SHA256:...) describe the key the server
	// offered.
	KeyType     string
	Fingerprint string
	// Known lists the known_hosts entries for Host that the key did not
	// match (or the @revoked entry); empty when the host is unknown.
	Known []KnownHostEntry
	// Revoked is set when the offered key is marked @revoked.
	Revoked bool
	// Files are the known_hosts files that were consulted.
	Files []string
}

// KnownHostEntry is one known_hosts line, for error reports.
type KnownHostEntry struct {
	File        string // the known_hosts file
	Line        int    // 1-based
	KeyType     string
	Fingerprint string // SHA256:...
}

// String formats e as "file:line: type fingerprint".
func (e KnownHostEntry) String() string {
	return fmt.Sprintf("%s:%d: %s %s", e.File, e.Line, e.KeyType, e.Fingerprint)
}

// Error explains the problem and how to fix it after checking the key.
func (e *HostKeyError) Error() string {
	known := make([]string, len(e.Known))
	for i, k := range e.Known {
		known[i] = k.String()
	}
	switch {
	case e.Revoked:
		return fmt.Sprintf("host key verification failed: the %s key %s offered by %s is marked @revoked in %s",
			e.KeyType, e.Fingerprint, e.Host, strings.Join(known, ", "))
	case len(e.Known) > 0:
		return fmt.Sprintf("host key verification failed: WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! "+
			"%s offered %s key %s, but known_hosts has %s. "+
			"Someone could be eavesdropping on you right now (man-in-the-middle attack), or the host key has just been changed. "+
			"If the change is expected, remove the old entry with: ssh-keygen -R '%s' -f %s",
			e.Host, e.KeyType, e.Fingerprint, strings.Join(known, "; "), e.Host, e.Known[0].File)
	default:
		files := "no known_hosts file"
		target := "~/.ssh/known_hosts"
		if len(e.Files) > 0 {
			files = strings.Join(e.Files, ", ")
			target = e.Files[0]
		}
		keyscan := "ssh-keyscan"
		if e.Port != 22 && e.Port != 0 {
			keyscan += " -p " + strconv.Itoa(e.Port)
		}
		if t := keyscanType(e.KeyType); t != "" {
			keyscan += " -t " + t
		}
		return fmt.Sprintf("host key verification failed: %s is not in known_hosts (%s); it offered %s key %s. "+
			"Check that fingerprint with the server's administrator, then add the key with: %s %s >> %s",
			e.Host, files, e.KeyType, e.Fingerprint, keyscan, e.Hostname, target)
	}
}

// Unwrap returns ErrHostKey.
func (e *HostKeyError) Unwrap() error { return ErrHostKey }

// keyscanType maps a key type to ssh-keyscan's -t name.
func keyscanType(keyType string) string {
	switch {
	case keyType == ssh.KeyAlgoED25519:
		return "ed25519"
	case strings.HasPrefix(keyType, "ecdsa-"):
		return "ecdsa"
	case keyType == ssh.KeyAlgoRSA:
		return "rsa"
	}
	return ""
}
