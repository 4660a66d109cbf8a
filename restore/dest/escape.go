package dest

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// EscapeItemized returns an itemized (or deletion, or error) line as rsync
// 3.2 prints it (rsync's log.c, filtered_fwrite after its charset check):
// each byte below 0x20 except tab, each byte that is not part of a valid
// character of the output's charset (valid UTF-8 when utf8 is set, ASCII
// otherwise, as in the C locale), and a backslash that starts "\#" and
// three digits are written as "\#" and the byte's three octal digits
// ("new\#012line", "inv\#377"). So a name from a backup cannot end a line
// or forge another ("*deleting   ..."), and a printed "\#ooo" is always
// an escape. DEL (0x7f) is kept, as rsync keeps it. The line is escaped
// whole: its fixed parts (flags, " -> ", " => ") are printable ASCII, so
// this is the same as escaping each name. A pure function.
func EscapeItemized(line string, utf8Charset bool) string {
	var b strings.Builder
	for i := 0; i < len(line); {
		c := line[i]
		n := 1
		keep := false
		switch {
		case c == '\\':
			keep = !(i+4 < len(line) && line[i+1] == '#' && isDigit(line[i+2]) && isDigit(line[i+3]) && isDigit(line[i+4]))
		case c == '\t' || c >= 0x20 && c < 0x80:
			keep = true
		case c >= 0x80 && utf8Charset:
			r, size := utf8.DecodeRuneInString(line[i:])
			keep = r != utf8.RuneError || size > 1
			n = size
		}
		if keep {
			b.WriteString(line[i : i+n])
		} else {
			fmt.Fprintf(&b, "\\#%03o", c)
		}
		i += n
	}
	return b.String()
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
