package transfer

import (
	"bytes"
	"fmt"
	"path"
	"strings"

	"github.com/pierrec/lz4/v4"
)

// DefaultSkipCompress is rsync 3.2.7's default --skip-compress list: the
// suffixes of files that are already compressed, whose data --compress
// auto sends uncompressed without trying a codec on it.
const DefaultSkipCompress = "3g2/3gp/7z/aac/ace/apk/avi/bz2/deb/dmg/ear/f4v/flac/flv/gpg/" +
	"gz/iso/jar/jpeg/jpg/lrz/lz/lz4/lzma/lzo/m1a/m1v/m2a/m2ts/m2v/" +
	"m4a/m4b/m4p/m4r/m4v/mka/mkv/mov/mp1/mp2/mp3/mp4/mpa/mpeg/mpg/" +
	"mpv/mts/odb/odf/odg/odi/odm/odp/ods/odt/oga/ogg/ogm/ogv/ogx/" +
	"opus/otg/oth/otp/ots/ott/oxt/png/qt/rar/rpm/rz/rzip/spx/" +
	"squashfs/sxc/sxd/sxg/sxm/sxw/sz/tbz/tbz2/tgz/tlz/ts/txz/tzo/" +
	"vob/war/webm/webp/xz/z/zip/zst"

// SkipList is a parsed --skip-compress LIST: file suffixes (without the
// dot) separated by slashes, as rsync reads it. A rule may hold simple
// character classes, letters in square brackets ("mp[34]" is mp3 and
// mp4); '*', '?' and '-' have no special meaning. The empty list skips
// nothing. Matching is case-insensitive, against the part of a file's
// name after its last dot. The zero value skips nothing; it is safe for
// concurrent use once parsed.
type SkipList struct {
	// suffixes holds every lowercased suffix the rules stand for, their
	// classes expanded, for rules of at most skipExpandMax suffixes;
	// Match is one map lookup for them.
	suffixes map[string]struct{}
	// rules are the other lowercased rules, each a sequence of
	// alternatives (one letter, or a bracket's letters) per position.
	rules [][]string
	// longest is the length of the longest suffix any rule matches.
	longest int
	text    string
}

// skipExpandMax bounds the suffixes one rule is expanded to: "mp[34]"
// is two; a rule of many classes, which no real list has, stays a rule
// matched position by position.
const skipExpandMax = 64

// ParseSkipList parses a --skip-compress LIST. A bracket that is not
// closed, or an empty one, is an error naming the rule.
func ParseSkipList(list string) (SkipList, error) {
	l := SkipList{text: list}
	for rule := range strings.SplitSeq(strings.ToLower(list), "/") {
		if rule == "" {
			continue
		}
		var pos []string
		for i := 0; i < len(rule); i++ {
			if rule[i] != '[' {
				pos = append(pos, rule[i:i+1])
				continue
			}
			end := strings.IndexByte(rule[i+1:], ']')
			if end <= 0 {
				return SkipList{}, fmt.Errorf("--skip-compress rule %q: a character class must be letters in brackets, closed", rule)
			}
			pos = append(pos, rule[i+1:i+1+end])
			i += 1 + end
		}
		l.add(pos)
	}
	return l, nil
}

// add puts a parsed rule in the suffix set, or in rules when its classes
// stand for more than skipExpandMax suffixes.
func (l *SkipList) add(pos []string) {
	l.longest = max(l.longest, len(pos))
	n := 1
	for _, alt := range pos {
		if n *= len(alt); n > skipExpandMax {
			l.rules = append(l.rules, pos)
			return
		}
	}
	if l.suffixes == nil {
		l.suffixes = make(map[string]struct{})
	}
	sufs := []string{""}
	for _, alt := range pos {
		next := make([]string, 0, len(sufs)*len(alt))
		for _, s := range sufs {
			for i := range len(alt) {
				next = append(next, s+alt[i:i+1])
			}
		}
		sufs = next
	}
	for _, s := range sufs {
		l.suffixes[s] = struct{}{}
	}
}

// String returns the list as it was given.
func (l SkipList) String() string { return l.text }

// Match reports whether the name's suffix (after its last dot, in its
// last path element) is in the list.
func (l SkipList) Match(name string) bool {
	base := path.Base(name)
	dot := strings.LastIndexByte(base, '.')
	if dot < 0 || dot == len(base)-1 {
		return false
	}
	if len(base)-dot-1 > l.longest {
		return false
	}
	suf := strings.ToLower(base[dot+1:])
	if _, ok := l.suffixes[suf]; ok {
		return true
	}
	for _, r := range l.rules {
		if len(r) != len(suf) {
			continue
		}
		ok := true
		for i, alt := range r {
			if !strings.ContainsRune(alt, rune(suf[i])) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// dataClass is what --compress auto knows of an item's data.
type dataClass uint8

const (
	// classUnknown: neither the name nor the first bytes say; the data
	// goes through the run's codec.
	classUnknown dataClass = iota
	// classCompressible: a trial compression of the first block shrank
	// it.
	classCompressible
	// classCompressed: already compressed (suffix, magic bytes, or a
	// trial that did not shrink): sent uncompressed.
	classCompressed
)

// magics are the first bytes of already-compressed formats, at their
// offset in the file.
var magics = []struct {
	format string
	off    int
	magic  string
}{
	{"jpeg", 0, "\xff\xd8\xff"},
	{"png", 0, "\x89PNG\r\n\x1a\n"},
	{"gif", 0, "GIF87a"},
	{"gif", 0, "GIF89a"},
	{"webp", 8, "WEBP"}, // after "RIFF" and a length, checked below
	{"mp4", 4, "ftyp"},  // ISO base media: mp4, m4a, mov, heic
	{"mkv", 0, "\x1a\x45\xdf\xa3"},
	{"zip", 0, "PK\x03\x04"},
	{"gzip", 0, "\x1f\x8b"},
	{"bzip2", 0, "BZh"},
	{"xz", 0, "\xfd7zXZ\x00"},
	{"zstd", 0, "\x28\xb5\x2f\xfd"},
	{"lz4", 0, "\x04\x22\x4d\x18"},
	{"7z", 0, "7z\xbc\xaf\x27\x1c"},
	{"rar", 0, "Rar!\x1a\x07"},
	{"pdf", 0, "%PDF-"},
	{"woff2", 0, "wOF2"},
}

// compressedFormat returns the name of the compressed format whose magic
// bytes head starts with, or "".
func compressedFormat(head []byte) string {
	for _, m := range magics {
		if len(head) < m.off+len(m.magic) || string(head[m.off:m.off+len(m.magic)]) != m.magic {
			continue
		}
		if m.format == "webp" && !bytes.HasPrefix(head, []byte("RIFF")) {
			continue
		}
		return m.format
	}
	return ""
}

// Trial compression of an item's first block, for data that neither its
// name nor its magic bytes classify.
const (
	// trialMinBytes is the smallest item that gets a trial: a smaller one
	// shares its frame with others, whose compression decides for it (a
	// frame the codec does not shrink goes out raw anyway).
	trialMinBytes = 256 << 10
	// trialBytes is how much of the first block the trial compresses.
	trialBytes = 64 << 10
	// trialShrink is the ratio (compressed over raw) above which the data
	// counts as already compressed: lz4 saving less than 3% of a block
	// means the codecs would spend CPU for nothing on the rest.
	trialShrink = 0.97
)

// trial compresses up to trialBytes of head with lz4 (the cheapest codec,
// a few percent of a zstd pass) and returns the data's class and the
// ratio, compressed over raw bytes (1 when it did not shrink).
func trial(head []byte, tmp *[]byte) (dataClass, float64) {
	head = head[:min(len(head), trialBytes)]
	if len(head) == 0 {
		return classUnknown, 1
	}
	bound := lz4.CompressBlockBound(len(head))
	if cap(*tmp) < bound {
		*tmp = make([]byte, bound)
	}
	var c lz4.Compressor
	n, err := c.CompressBlock(head, (*tmp)[:bound])
	if err != nil || n == 0 || n >= len(head) {
		return classCompressed, 1
	}
	ratio := float64(n) / float64(len(head))
	if ratio > trialShrink {
		return classCompressed, ratio
	}
	return classCompressible, ratio
}

// classifyHead classifies an item from the first bytes of its data (the
// first block read, of an item of size bytes): magic bytes first, then,
// for an item of at least trialMinBytes, a trial. It returns the class
// and, after a trial, lz4's ratio on the block (0 without a trial).
func classifyHead(head []byte, size int64, tmp *[]byte) (dataClass, float64) {
	if compressedFormat(head) != "" {
		return classCompressed, 0
	}
	if size < trialMinBytes || len(head) < 4<<10 {
		return classUnknown, 0
	}
	return trial(head, tmp)
}
