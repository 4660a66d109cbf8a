package bench

import (
	"context"
	"io"
	"strings"
	"time"
)

// flushBytes is how much generated text is collected before a write: large
// enough that a write is cheap, small enough to stay in cache.
const flushBytes = 256 << 10

// Magic numbers that make the media stand-ins look like what their names
// say to file(1) and to anything that sniffs content types.
var (
	magicJPEG = []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x01\x00H\x00H\x00\x00")
	magicPNG  = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x07\x80\x00\x00\x048\x08\x06\x00\x00\x00")
	magicMP4  = []byte("\x00\x00\x00\x20ftypisom\x00\x00\x02\x00isomiso2avc1mp41")
	magicPDF  = []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
)

// writeContent writes the bytes of file node n to w, drawing randomness from
// r and using buf (at least flushBytes of capacity) as scratch space. It
// returns the number of bytes written.
func writeContent(ctx context.Context, w io.Writer, n *node, r *rng, buf []byte) (int64, error) {
	switch n.content {
	case contentEmpty:
		return 0, nil
	case contentLiteral:
		k, err := io.WriteString(w, n.data)
		return int64(k), err
	case contentJPEG:
		return writeRandom(ctx, w, magicJPEG, n.size, r, buf)
	case contentPNG:
		return writeRandom(ctx, w, magicPNG, n.size, r, buf)
	case contentMP4:
		return writeRandom(ctx, w, magicMP4, n.size, r, buf)
	case contentPDF:
		return writeRandom(ctx, w, magicPDF, n.size, r, buf)
	case contentRandom:
		return writeRandom(ctx, w, nil, n.size, r, buf)
	case contentHalfText:
		half := n.size / 2
		k, err := writeText(ctx, w, newAccessLog(r, time.Unix(0, n.mtimeNs), half), half, true, buf)
		if err != nil {
			return k, err
		}
		k2, err := writeRandom(ctx, w, nil, n.size-half, r, buf)
		return k + k2, err
	}
	return writeText(ctx, w, textFor(n, r), n.size, n.exact, buf)
}

// textFor returns the text generator for n's content kind.
func textFor(n *node, r *rng) textGen {
	prefix := r.pick(prefixes)
	switch n.content {
	case contentPHP:
		return &phpText{vocab: newVocab(r), r: r, prefix: prefix, domain: prefix + "-" + r.pick(nouns)}
	case contentJS:
		return &jsText{vocab: newVocab(r), r: r, prefix: prefix}
	case contentMinJS:
		return &jsText{vocab: newVocab(r), r: r, prefix: prefix, min: true}
	case contentCSS:
		return &cssText{r: r, prefix: prefix}
	case contentHTML:
		return &htmlText{r: r}
	case contentJSON:
		return &jsonText{r: r, prefix: prefix}
	case contentShell:
		return &shellText{r: r}
	case contentMail, contentMailAttached:
		// mail/DOMAIN/USER/cur/NAME is delivered to USER@DOMAIN.
		rcpt := "info@example.com"
		if parts := strings.Split(n.path, "/"); len(parts) >= 5 {
			rcpt = parts[len(parts)-3] + "@" + parts[len(parts)-4]
		}
		return &mailText{r: r, at: time.Unix(0, n.mtimeNs), rcpt: rcpt, attached: n.content == contentMailAttached}
	case contentSQL:
		return &sqlDump{r: r, start: time.Unix(0, n.mtimeNs).Unix() - int64(genSpan/time.Second)}
	case contentLog:
		return newAccessLog(r, time.Unix(0, n.mtimeNs), n.size)
	}
	return &plainText{r: r}
}

// writeText writes the head, then units until at least size bytes, then the
// tail; with exact it stops at exactly size bytes instead, tail or not.
func writeText(ctx context.Context, w io.Writer, g textGen, size int64, exact bool, buf []byte) (int64, error) {
	var done int64
	b := g.head(buf[:0])
	for done+int64(len(b)) < size {
		b = g.unit(b)
		if len(b) >= flushBytes {
			if exact && done+int64(len(b)) > size {
				break
			}
			if err := ctx.Err(); err != nil {
				return done, err
			}
			k, err := w.Write(b)
			done += int64(k)
			if err != nil {
				return done, err
			}
			b = b[:0]
		}
	}
	if exact {
		b = b[:min(int64(len(b)), size-done)]
	} else {
		b = g.tail(b)
	}
	k, err := w.Write(b)
	return done + int64(k), err
}

// writeRandom writes magic and then random bytes, size bytes in all.
func writeRandom(ctx context.Context, w io.Writer, magic []byte, size int64, r *rng, buf []byte) (int64, error) {
	buf = buf[:cap(buf)]
	var done int64
	for done < size {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		chunk := buf[:min(int64(len(buf)), size-done)]
		r.fill(chunk)
		if done == 0 {
			copy(chunk, magic)
		}
		k, err := w.Write(chunk)
		done += int64(k)
		if err != nil {
			return done, err
		}
	}
	return done, nil
}
