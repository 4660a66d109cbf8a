package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// SystemFile is the configuration file for every user of the host.
const SystemFile = "/etc/restoresync/config.toml"

// None, given as the file name (--config none), means no configuration
// file at all.
const None = "none"

// Value is one setting from the file.
type Value struct {
	// Key is the setting's name as written, e.g. "block_size".
	Key string
	// Values holds the value as text, as a command-line flag would take
	// it: a TOML string as is, a number or boolean formatted; an array of
	// strings gives one element each (a repeatable flag).
	Values []string
	// File and Line say where the value was set (Line from 1).
	File string
	Line int
}

// Where returns "FILE:LINE".
func (v Value) Where() string { return fmt.Sprintf("%s:%d", v.File, v.Line) }

// File is a loaded configuration file.
type File struct {
	// Path is the file's name ("" when no file was found or None was given).
	Path string
	// Global holds the top-level settings, by key.
	Global map[string]Value
	// Accounts holds each [account.NAME] section's settings, by account
	// name, then key.
	Accounts map[string]map[string]Value
}

// Error is a problem in a configuration file, with its position.
type Error struct {
	// File is the configuration file's path.
	File string
	// Line is the line of the problem, from 1; 0 when not known.
	Line int
	// Key is the setting concerned; "" when not about one key.
	Key string
	// Msg says what is wrong.
	Msg string
}

// Error returns "FILE:LINE: KEY: MSG", leaving out what is not known.
func (e *Error) Error() string {
	where := e.File
	if e.Line > 0 {
		where += ":" + strconv.Itoa(e.Line)
	}
	if e.Key != "" {
		return fmt.Sprintf("%s: %s: %s", where, e.Key, e.Msg)
	}
	return fmt.Sprintf("%s: %s", where, e.Msg)
}

// Find returns the configuration file to read: explicit when not empty
// (None gives ""), else the first that exists of the user's and the
// system's; "" when there is none. An explicit file that does not exist is
// an error.
func Find(explicit string) (string, error) {
	switch explicit {
	case None:
		return "", nil
	case "":
	default:
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("config file: %w", err)
		}
		return explicit, nil
	}
	for _, p := range []string{UserFile(), SystemFile} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", nil
}

// UserFile is $XDG_CONFIG_HOME/restoresync/config.toml, or
// ~/.config/restoresync/config.toml; "" when neither can be known.
func UserFile() string {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" || !filepath.IsAbs(dir) { // the XDG spec ignores a relative one
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "restoresync", "config.toml")
}

// Load reads path ("" gives an empty File). keys are the settings; any
// other key (an *Error whose message lists keys), a value of a type that
// is not a string, integer, float, boolean or array of strings, or a table
// other than account.NAME is an *Error with the file, line and key. TOML
// syntax errors are *Error too.
func Load(path string, keys []string) (*File, error) {
	known := func(k string) bool { return slices.Contains(keys, k) }
	f := &File{Path: path, Global: map[string]Value{}, Accounts: map[string]map[string]Value{}}
	if path == "" {
		return f, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &Error{File: path, Line: pe.Position.Line, Key: pe.LastKey, Msg: pe.Message}
		}
		return nil, &Error{File: path, Msg: err.Error()}
	}
	lines := keyLines(data)
	section := func(table []string, m map[string]any, out map[string]Value) error {
		for _, k := range sortedKeys(m) {
			full := append(slices.Clone(table), k)
			line := lines[strings.Join(full, ".")]
			name := strings.Join(full, ".")
			if _, isTable := m[k].(map[string]any); isTable {
				return &Error{File: path, Line: line, Key: name, Msg: "unexpected table (sections are [account.NAME])"}
			}
			if !known(k) {
				msg := "unknown setting"
				if known(strings.ReplaceAll(k, "-", "_")) {
					msg += fmt.Sprintf(" (did you mean %s?)", strings.ReplaceAll(k, "-", "_"))
				} else {
					msg += " (valid: " + strings.Join(keys, ", ") + ")"
				}
				return &Error{File: path, Line: line, Key: name, Msg: msg}
			}
			vals, err := text(m[k])
			if err != nil {
				return &Error{File: path, Line: line, Key: name, Msg: err.Error()}
			}
			out[k] = Value{Key: k, Values: vals, File: path, Line: line}
		}
		return nil
	}
	for _, k := range sortedKeys(raw) {
		v := raw[k]
		if k != "account" {
			if err := section(nil, map[string]any{k: v}, f.Global); err != nil {
				return nil, err
			}
			continue
		}
		accounts, ok := v.(map[string]any)
		if !ok {
			return nil, &Error{File: path, Line: lines["account"], Key: "account", Msg: "must be a table of [account.NAME] sections"}
		}
		for _, name := range sortedKeys(accounts) {
			sec, ok := accounts[name].(map[string]any)
			if !ok {
				return nil, &Error{File: path, Line: lines["account."+name], Key: "account." + name, Msg: "must be a [account." + name + "] section"}
			}
			out := map[string]Value{}
			if err := section([]string{"account", name}, sec, out); err != nil {
				return nil, err
			}
			f.Accounts[name] = out
		}
	}
	return f, nil
}

// Settings returns the settings for account ("" for none): the global ones,
// overridden by the account's section. An account without a section gets
// the global settings. For an account, every AccountPlaceholder in a
// value is its name (a global src = "backup:/home/{account}" describes
// every account's source); without one, values are as written.
func (f *File) Settings(account string) map[string]Value {
	out := map[string]Value{}
	for k, v := range f.Global {
		out[k] = v
	}
	for k, v := range f.Accounts[account] {
		out[k] = v
	}
	if account == "" {
		return out
	}
	for k, v := range out {
		vals := make([]string, len(v.Values))
		for i, s := range v.Values {
			vals[i] = ExpandAccount(s, account)
		}
		v.Values = vals
		out[k] = v
	}
	return out
}

// AccountPlaceholder stands for an account's name in a setting's value and
// in the command line's SRC and DST templates (restore --accounts).
const AccountPlaceholder = "{account}"

// ExpandAccount returns s with every AccountPlaceholder replaced by name.
func ExpandAccount(s, name string) string {
	return strings.ReplaceAll(s, AccountPlaceholder, name)
}

// AccountNames returns the names of the file's [account.NAME] sections,
// sorted.
func (f *File) AccountNames() []string { return sortedKeys(f.Accounts) }

// text formats a TOML value as flag text.
func text(v any) ([]string, error) {
	switch x := v.(type) {
	case string:
		return []string{x}, nil
	case int64:
		return []string{strconv.FormatInt(x, 10)}, nil
	case float64:
		return []string{strconv.FormatFloat(x, 'f', -1, 64)}, nil
	case bool:
		return []string{strconv.FormatBool(x)}, nil
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("an array may hold only strings, not %T", e)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported value type %T", v)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var (
	tableRE = regexp.MustCompile(`^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$`)
	keyRE   = regexp.MustCompile(`^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_.-]+)\s*=`)
)

// keyLines maps each key's full dotted name to the line (from 1) where it
// is set. The toml package does not export positions of keys that decode
// fine, so this scans the lines: table headers and "key =" lines outside
// multi-line strings, which is what restoresync's flat settings use. A key
// it misses has line 0.
func keyLines(data []byte) map[string]int {
	out := map[string]int{}
	var table []string
	inMulti := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if inMulti != "" {
			if strings.Count(line, inMulti)%2 == 1 {
				inMulti = ""
			}
			continue
		}
		if m := tableRE.FindStringSubmatch(line); m != nil {
			table = splitDotted(m[1])
			for i := range table {
				name := strings.Join(table[:i+1], ".")
				if _, ok := out[name]; !ok {
					out[name] = n
				}
			}
			continue
		}
		if m := keyRE.FindStringSubmatch(line); m != nil {
			full := strings.Join(append(slices.Clone(table), splitDotted(m[1])...), ".")
			if _, ok := out[full]; !ok {
				out[full] = n
			}
			rest := line[len(m[0]):]
			for _, q := range []string{`"""`, `'''`} {
				if strings.Count(rest, q)%2 == 1 {
					inMulti = q
				}
			}
		}
	}
	return out
}

// splitDotted splits a dotted key, unquoting quoted parts.
func splitDotted(s string) []string {
	var parts []string
	for _, p := range strings.Split(s, ".") {
		p = strings.TrimSpace(p)
		if len(p) >= 2 && (p[0] == '"' || p[0] == '\'') && p[len(p)-1] == p[0] {
			p = p[1 : len(p)-1]
		}
		parts = append(parts, p)
	}
	return parts
}
