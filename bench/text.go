package bench

import (
	"strconv"
	"strings"
)

// textGen makes the bytes of one text file, unit by unit: a PHP function, a
// CSS rule, a log line, a batch of SQL rows. Each file gets its own textGen
// (they keep state, such as the clock of a log) and its own rng.
type textGen interface {
	// head appends what the file starts with.
	head(b []byte) []byte
	// unit appends the next unit of the body.
	unit(b []byte) []byte
	// tail appends what the file ends with.
	tail(b []byte) []byte
}

// appendWords appends n words of prose separated by spaces.
func appendWords(r *rng, b []byte, n int) []byte {
	for i := range n {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, r.pick(prose)...)
	}
	return b
}

// appendSentence appends a capitalised sentence of lo to hi words and a full
// stop.
func appendSentence(r *rng, b []byte, lo, hi int) []byte {
	start := len(b)
	b = appendWords(r, b, int(r.between(int64(lo), int64(hi))))
	if c := b[start]; c >= 'a' && c <= 'z' {
		b[start] = c - 'a' + 'A'
	}
	return append(b, '.')
}

// appendCap appends word with its first letter in upper case.
func appendCap(b []byte, word string) []byte {
	start := len(b)
	b = append(b, word...)
	if c := b[start]; c >= 'a' && c <= 'z' {
		b[start] = c - 'a' + 'A'
	}
	return b
}

// appendTitle appends n capitalised words.
func appendTitle(r *rng, b []byte, n int) []byte {
	for i := range n {
		if i > 0 {
			b = append(b, ' ')
		}
		b = appendCap(b, r.pick(prose))
	}
	return b
}

// appendParagraphs appends n paragraphs of prose wrapped near width columns,
// each followed by a blank line.
func appendParagraphs(r *rng, b []byte, n, width int) []byte {
	for range n {
		lineStart := len(b)
		for range r.between(2, 7) {
			s := len(b)
			b = appendSentence(r, b, 5, 18)
			if len(b)-lineStart > width && s > lineStart {
				// Break the line before this sentence, as a mail client would.
				sent := string(b[s:])
				b = append(b[:s-1], '\n')
				lineStart = len(b)
				b = append(b, sent...)
			}
			b = append(b, ' ')
		}
		b[len(b)-1] = '\n'
		b = append(b, '\n')
	}
	return b
}

// appendCamel appends a camelCase identifier.
func appendCamel(r *rng, b []byte) []byte {
	b = append(b, r.pick(verbs)...)
	for range r.between(1, 2) {
		start := len(b)
		b = append(b, r.pick(nouns)...)
		b[start] -= 'a' - 'A'
	}
	return b
}

// appendHex appends n random lower-case hex digits.
func appendHex(r *rng, b []byte, n int) []byte {
	const digits = "0123456789abcdef"
	var x uint64
	for i := range n {
		if i%16 == 0 {
			x = r.u64()
		}
		b = append(b, digits[x&15])
		x >>= 4
	}
	return b
}

// appendVersion appends a version number such as 4.7.2.
func appendVersion(r *rng, b []byte) []byte {
	b = strconv.AppendInt(b, r.between(1, 6), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, r.between(0, 9), 10)
	if r.percent(60) {
		b = append(b, '.')
		b = strconv.AppendInt(b, r.between(0, 12), 10)
	}
	return b
}

// appendIndent appends n tabs.
func appendIndent(b []byte, n int) []byte {
	for range n {
		b = append(b, '\t')
	}
	return b
}

// plainText is a readme or licence: a title, then paragraphs and change-log
// entries.
type plainText struct{ r *rng }

func (t *plainText) head(b []byte) []byte {
	b = append(b, "=== "...)
	b = appendTitle(t.r, b, int(t.r.between(2, 4)))
	b = append(b, " ===\nContributors: "...)
	b = append(b, t.r.pick(firstNames)...)
	b = append(b, t.r.pick(lastNames)...)
	b = append(b, "\nTags: "...)
	b = appendWords(t.r, b, 4)
	b = append(b, "\nRequires at least: "...)
	b = appendVersion(t.r, b)
	b = append(b, "\nStable tag: "...)
	b = appendVersion(t.r, b)
	return append(b, "\nLicense: GPLv2 or later\n\n"...)
}

func (t *plainText) unit(b []byte) []byte {
	if t.r.percent(30) {
		b = append(b, "= "...)
		b = appendVersion(t.r, b)
		b = append(b, " =\n"...)
		for range t.r.between(2, 6) {
			b = append(b, "* "...)
			b = append(b, t.r.pick([]string{"Fix", "New", "Tweak", "Dev", "Security"})...)
			b = append(b, ": "...)
			b = appendSentence(t.r, b, 4, 12)
			b = append(b, '\n')
		}
		return append(b, '\n')
	}
	b = append(b, "== "...)
	b = appendTitle(t.r, b, int(t.r.between(1, 3)))
	b = append(b, " ==\n\n"...)
	return appendParagraphs(t.r, b, int(t.r.between(1, 3)), 76)
}

func (t *plainText) tail(b []byte) []byte { return b }

// htmlText is a static page or template fragment.
type htmlText struct{ r *rng }

func (t *htmlText) head(b []byte) []byte {
	b = append(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>"...)
	b = appendTitle(t.r, b, 3)
	return append(b, "</title>\n</head>\n<body>\n"...)
}

func (t *htmlText) unit(b []byte) []byte {
	tag := t.r.pick(htmlTags)
	b = append(b, '<')
	b = append(b, tag...)
	b = append(b, " class=\""...)
	b = append(b, t.r.pick(nouns)...)
	b = append(b, '-')
	b = append(b, t.r.pick(nouns)...)
	b = append(b, "\">\n\t<h2>"...)
	b = appendTitle(t.r, b, int(t.r.between(2, 5)))
	b = append(b, "</h2>\n\t<p>"...)
	b = appendSentence(t.r, b, 8, 30)
	b = append(b, " <a href=\""...)
	b = append(b, t.r.pick(urlPaths)...)
	b = append(b, "\">"...)
	b = appendWords(t.r, b, 2)
	b = append(b, "</a></p>\n</"...)
	b = append(b, tag...)
	return append(b, ">\n"...)
}

func (t *htmlText) tail(b []byte) []byte { return append(b, "</body>\n</html>\n"...) }

// cssText is a stylesheet.
type cssText struct {
	r      *rng
	prefix string
}

func (t *cssText) head(b []byte) []byte {
	b = append(b, "/*\n * "...)
	b = appendTitle(t.r, b, 3)
	b = append(b, "\n * Version: "...)
	b = appendVersion(t.r, b)
	return append(b, "\n */\n\n"...)
}

func (t *cssText) unit(b []byte) []byte {
	for i := range t.r.between(1, 3) {
		if i > 0 {
			b = append(b, ",\n"...)
		}
		b = append(b, '.')
		b = append(b, t.prefix...)
		b = append(b, '-')
		b = append(b, t.r.pick(nouns)...)
		if t.r.percent(50) {
			b = append(b, "__"...)
			b = append(b, t.r.pick(nouns)...)
		}
		if t.r.percent(30) {
			b = append(b, ' ')
			b = append(b, t.r.pick(htmlTags)...)
		}
		if t.r.percent(15) {
			b = append(b, ":hover"...)
		}
	}
	b = append(b, " {\n"...)
	for range t.r.between(1, 6) {
		prop := t.r.pick(cssProps)
		b = append(b, '\t')
		b = append(b, prop...)
		b = append(b, ": "...)
		if strings.HasSuffix(prop, "color") || prop == "background" {
			b = append(b, '#')
			b = appendHex(t.r, b, 6)
		} else {
			b = append(b, t.r.pick(cssValues)...)
		}
		b = append(b, ";\n"...)
	}
	return append(b, "}\n\n"...)
}

func (t *cssText) tail(b []byte) []byte { return b }

// jsonText is a block.json-like manifest.
type jsonText struct {
	r      *rng
	prefix string
	n      int
}

func (t *jsonText) head(b []byte) []byte {
	b = append(b, "{\n\t\"$schema\": \"https://schemas.wp.org/trunk/block.json\",\n\t\"apiVersion\": 3,\n\t\"name\": \""...)
	b = append(b, t.prefix...)
	b = append(b, '/')
	b = append(b, t.r.pick(nouns)...)
	b = append(b, "\",\n\t\"title\": \""...)
	b = appendTitle(t.r, b, 2)
	b = append(b, "\",\n\t\"description\": \""...)
	b = appendSentence(t.r, b, 6, 14)
	return append(b, "\",\n\t\"attributes\": {\n"...)
}

func (t *jsonText) unit(b []byte) []byte {
	if t.n > 0 {
		b = append(b, ",\n"...)
	}
	t.n++
	b = append(b, "\t\t\""...)
	b = appendCamel(t.r, b)
	b = strconv.AppendInt(b, int64(t.n), 10)
	b = append(b, "\": {\n\t\t\t\"type\": \""...)
	b = append(b, t.r.pick([]string{"string", "boolean", "number", "object", "array"})...)
	b = append(b, "\",\n\t\t\t\"default\": \""...)
	b = appendWords(t.r, b, int(t.r.between(0, 3)))
	return append(b, "\"\n\t\t}"...)
}

func (t *jsonText) tail(b []byte) []byte { return append(b, "\n\t}\n}\n"...) }

// shellText is a maintenance script.
type shellText struct{ r *rng }

func (t *shellText) head(b []byte) []byte {
	b = append(b, "#!/bin/sh\n# "...)
	b = appendSentence(t.r, b, 4, 10)
	return append(b, "\nset -eu\n\n"...)
}

func (t *shellText) unit(b []byte) []byte {
	b = append(b, "# "...)
	b = appendSentence(t.r, b, 3, 9)
	b = append(b, '\n')
	b = append(b, t.r.pick([]string{"php wp-cli.phar ", "rsync -a ", "find . -name ", "mysqldump --single-transaction ", "gzip -9 "})...)
	b = append(b, t.r.pick(nouns)...)
	b = append(b, '-')
	b = append(b, t.r.pick(nouns)...)
	return append(b, " >/dev/null 2>&1 || true\n\n"...)
}

func (t *shellText) tail(b []byte) []byte { return append(b, "exit 0\n"...) }
