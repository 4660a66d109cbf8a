package transport

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kevinburke/ssh_config"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// This file resolves what the built-in SSH client needs before it dials:
// ssh_config settings, identity files and known_hosts.

// hostConfig is what the built-in client takes from ssh_config for one host
// alias. Empty fields mean "not set"; the caller applies the defaults.
type hostConfig struct {
	hostName         string   // HostName, %h expanded
	port             int      // Port
	user             string   // User
	identityFiles    []string // IdentityFile, ~ and %-tokens expanded
	userKnownHosts   []string // UserKnownHostsFile
	globalKnownHosts []string // GlobalKnownHostsFile
	hostKeyAlias     string   // HostKeyAlias
	identitiesOnly   bool     // IdentitiesOnly yes
	identityAgent    string   // IdentityAgent
	proxy            string   // ProxyJump or ProxyCommand, when not "none"
	// aliveInterval is ServerAliveInterval: 0 unset, negative "0" (off).
	aliveInterval time.Duration
	aliveCountMax int // ServerAliveCountMax; 0 unset
}

// loadHostConfig reads the ssh_config settings for alias from file: "" means
// ~/.ssh/config (a missing one is fine), "none" means no file. Only the user
// file is read, not /etc/ssh/ssh_config. Errors name the file.
func loadHostConfig(file, alias string) (hostConfig, error) {
	var hc hostConfig
	if file == "none" {
		return hc, nil
	}
	explicit := file != ""
	if !explicit {
		file = filepath.Join(homeDir(), ".ssh", "config")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		if os.IsNotExist(err) && !explicit {
			return hc, nil
		}
		return hc, fmt.Errorf("ssh config: %w", err)
	}
	cfg, err := ssh_config.Decode(bytes.NewReader(data))
	if err != nil {
		return hc, fmt.Errorf("ssh config %s: %w (use -F none or -e ssh)", file, err)
	}
	get := func(key string) (string, error) {
		v, err := cfg.Get(alias, key)
		if err != nil {
			return "", fmt.Errorf("ssh config %s: host %s: %s: %w", file, alias, key, err)
		}
		return unquoteConfig(v), nil
	}
	getAll := func(key string) ([]string, error) {
		vs, err := cfg.GetAll(alias, key)
		if err != nil {
			return nil, fmt.Errorf("ssh config %s: host %s: %s: %w", file, alias, key, err)
		}
		var out []string
		for _, v := range vs {
			// UserKnownHostsFile and friends take several names per line.
			for _, f := range strings.Fields(v) {
				out = append(out, unquoteConfig(f))
			}
		}
		return out, nil
	}

	if hc.hostName, err = get("HostName"); err != nil {
		return hc, err
	}
	hc.hostName = strings.ReplaceAll(hc.hostName, "%h", alias)
	port, err := get("Port")
	if err != nil {
		return hc, err
	}
	if port != "" {
		if hc.port, err = strconv.Atoi(port); err != nil || hc.port < 1 || hc.port > 65535 {
			return hc, fmt.Errorf("ssh config %s: host %s: bad Port %q", file, alias, port)
		}
	}
	if hc.user, err = get("User"); err != nil {
		return hc, err
	}
	if hc.hostKeyAlias, err = get("HostKeyAlias"); err != nil {
		return hc, err
	}
	only, err := get("IdentitiesOnly")
	if err != nil {
		return hc, err
	}
	hc.identitiesOnly = strings.EqualFold(only, "yes")
	if hc.identityAgent, err = get("IdentityAgent"); err != nil {
		return hc, err
	}
	for _, key := range []string{"ServerAliveInterval", "ServerAliveCountMax"} {
		v, err := get(key)
		if err != nil {
			return hc, err
		}
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return hc, fmt.Errorf("ssh config %s: host %s: bad %s %q", file, alias, key, v)
		}
		switch {
		case key == "ServerAliveCountMax":
			hc.aliveCountMax = n
		case n == 0:
			hc.aliveInterval = -1
		default:
			hc.aliveInterval = time.Duration(n) * time.Second
		}
	}
	for _, key := range []string{"ProxyJump", "ProxyCommand"} {
		v, err := get(key)
		if err != nil {
			return hc, err
		}
		if v != "" && !strings.EqualFold(v, "none") {
			hc.proxy = key + " " + v
			break
		}
	}
	ids, err := cfg.GetAll(alias, "IdentityFile")
	if err != nil {
		return hc, fmt.Errorf("ssh config %s: host %s: IdentityFile: %w", file, alias, err)
	}
	for _, id := range ids {
		hc.identityFiles = append(hc.identityFiles, unquoteConfig(id))
	}
	if hc.userKnownHosts, err = getAll("UserKnownHostsFile"); err != nil {
		return hc, err
	}
	if hc.globalKnownHosts, err = getAll("GlobalKnownHostsFile"); err != nil {
		return hc, err
	}
	return hc, nil
}

// loadKnownHosts builds the host key callback from explicit files, else
// the config's files, else the OpenSSH defaults. Missing files are skipped,
// except a file given with --known-hosts, which must exist.
func (d *sshDialer) loadKnownHosts(explicit []string, hc hostConfig, user string) error {
	files := explicit
	if len(files) == 0 {
		user := hc.userKnownHosts
		if len(user) == 0 {
			user = []string{"~/.ssh/known_hosts"}
		}
		global := hc.globalKnownHosts
		if len(global) == 0 {
			global = []string{"/etc/ssh/ssh_known_hosts"}
		}
		files = append(append([]string(nil), user...), global...)
	}
	for _, f := range files {
		if strings.EqualFold(f, "none") {
			continue
		}
		f = expandSSHPath(f, d.hostname, user, d.port)
		if _, err := os.Stat(f); err != nil {
			if os.IsNotExist(err) && len(explicit) > 0 {
				return fmt.Errorf("--known-hosts %s: no such file", f)
			}
			if os.IsNotExist(err) {
				slog.Debug("ssh: known_hosts file missing", "file", f)
				continue
			}
			return fmt.Errorf("ssh %s: known_hosts: %w", d.hostname, err)
		}
		d.knownFiles = append(d.knownFiles, f)
	}
	cb, err := knownhosts.New(d.knownFiles...)
	if err != nil {
		return fmt.Errorf("ssh %s: known_hosts: %w", d.hostname, err)
	}
	d.known = cb
	return nil
}

// loadKeys parses the identity files once, so each Dial reuses them.
func (d *sshDialer) loadKeys(identities []string, hc hostConfig, user string) error {
	seen := map[string]bool{}
	add := func(path string, explicit, fallback bool) error {
		path = expandSSHPath(path, d.hostname, user, d.port)
		if seen[path] {
			return nil
		}
		seen[path] = true
		signer, note, err := loadSigner(path)
		switch {
		case err != nil && explicit:
			return fmt.Errorf("ssh identity %s: %w", path, err)
		case err != nil && os.IsNotExist(err):
			return nil
		case err != nil:
			note = err.Error()
		}
		if note != "" {
			slog.Debug("ssh: skipping identity", "file", path, "reason", note)
			d.skipped = append(d.skipped, path+": "+note)
			return nil
		}
		d.keyFiles = append(d.keyFiles, path)
		if fallback {
			d.fallback = append(d.fallback, signer)
		} else {
			d.signers = append(d.signers, signer)
		}
		return nil
	}
	for _, f := range identities {
		if err := add(f, true, false); err != nil {
			return err
		}
	}
	for _, f := range hc.identityFiles {
		if err := add(f, false, false); err != nil {
			return err
		}
	}
	if hc.identitiesOnly && len(identities)+len(hc.identityFiles) > 0 {
		return nil
	}
	for _, name := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
		if err := add(filepath.Join(homeDir(), ".ssh", name), false, true); err != nil {
			return err
		}
	}
	return nil
}

// loadSigner reads an unencrypted private key. An encrypted key gives a
// note instead of an error, since the agent may hold it.
func loadSigner(path string) (ssh.Signer, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	signer, err := ssh.ParsePrivateKey(data)
	if err != nil {
		var pm *ssh.PassphraseMissingError
		if errors.As(err, &pm) {
			return nil, "encrypted key skipped (passphrases are not supported; add it to ssh-agent)", nil
		}
		return nil, "", err
	}
	return signer, "", nil
}

// defaultHostKeyAlgorithms is OpenSSH's preference, used when known_hosts
// has no plain key for the host (unknown, or @cert-authority only): it puts
// ed25519 first, so an unknown host is reported with the key most admins
// publish, and leaves out SHA-1 ssh-rsa.
var defaultHostKeyAlgorithms = []string{
	ssh.CertAlgoED25519v01,
	ssh.CertAlgoECDSA256v01, ssh.CertAlgoECDSA384v01, ssh.CertAlgoECDSA521v01,
	ssh.CertAlgoRSASHA512v01, ssh.CertAlgoRSASHA256v01,
	ssh.KeyAlgoED25519,
	ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
	ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256,
}

// knownHostAlgorithms lists the host key algorithms for the key types that
// known_hosts holds for addr, best first, so the server is asked for a key
// we can verify (x/crypto would otherwise negotiate its own preference,
// e.g. ECDSA, and fail against a known ed25519 key). With no plain entries
// for addr it returns defaultHostKeyAlgorithms.
func knownHostAlgorithms(cb ssh.HostKeyCallback, addr string) []string {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return defaultHostKeyAlgorithms
	}
	probe, err := ssh.NewPublicKey(pub)
	if err != nil {
		return defaultHostKeyAlgorithms
	}
	// A random key matches nothing, so the error lists what is on file.
	var ke *knownhosts.KeyError
	if !errors.As(cb(addr, &net.TCPAddr{IP: net.IPv4zero}, probe), &ke) || len(ke.Want) == 0 {
		return defaultHostKeyAlgorithms
	}
	have := map[string]bool{}
	for _, k := range ke.Want {
		have[k.Key.Type()] = true
	}
	var algos []string
	for _, kt := range []string{ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521, ssh.KeyAlgoRSA} {
		if !have[kt] {
			continue
		}
		delete(have, kt)
		if kt == ssh.KeyAlgoRSA {
			// SHA-1 "ssh-rsa" signatures are disabled, as in OpenSSH 8.8+.
			algos = append(algos, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256)
			continue
		}
		algos = append(algos, kt)
	}
	// Other types (say, a future algorithm) after the known ones.
	algos = append(algos, slices.Sorted(maps.Keys(have))...)
	return algos
}

// unquoteConfig strips one pair of double quotes around an ssh_config value.
func unquoteConfig(v string) string {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	return v
}

// expandSSHPath expands a leading "~" and the ssh_config tokens %d (home),
// %u (local user), %h (remote host), %r (remote user), %p (port) and %%.
func expandSSHPath(p, host, remoteUser string, port int) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = homeDir() + p[1:]
	}
	if !strings.Contains(p, "%") {
		return p
	}
	r := strings.NewReplacer(
		"%%", "%",
		"%d", homeDir(),
		"%u", localUser(),
		"%h", host,
		"%r", remoteUser,
		"%p", strconv.Itoa(port),
	)
	return r.Replace(p)
}

// homeDir is the local user's home directory: $HOME, else the passwd entry.
func homeDir() string {
	if h := os.Getenv("HOME"); h != "" {
		return h
	}
	if u, err := user.Current(); err == nil {
		return u.HomeDir
	}
	return "/"
}

// localUser is the local login name, the default remote user as in ssh.
func localUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return os.Getenv("USER")
}
