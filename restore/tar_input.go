package restore

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/restoresync/restoresync/transport"
)

// Tar archives as SRC: "-" (standard input) or a local regular file is read
// as a tar archive (ustar, pax or GNU, as archive/tar reads them), plain or
// compressed with gzip (RFC 1952), zstd (RFC 8878) or lz4 (the LZ4 frame
// format); the compression is recognised by its magic bytes, whatever the
// file's name. It is extracted with the same checks and the same safe
// writer as every tar restore.

// isTarInput reports whether SRC names a tar archive rather than a tree:
// "-", or a local regular file (a symlink to one counts) whose content is
// a tar archive, plain or compressed (its first header parses), when it
// is the only SRC and neither -R nor --files-from is given. Any other
// file SRC is restored as a file.
func isTarInput(o Options, src transport.Location) bool {
	if src.Remote() || len(o.MoreSrc) > 0 || o.Relative || o.FilesFrom != nil {
		return false
	}
	if o.Src == "-" {
		return true
	}
	fi, err := os.Stat(src.Path)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	f, err := os.Open(src.Path)
	if err != nil {
		return false
	}
	defer f.Close()
	r, _, err := decompressed(bufio.NewReaderSize(f, 64<<10))
	if err != nil {
		return false
	}
	_, err = tar.NewReader(io.LimitReader(r, 1<<20)).Next()
	return err == nil
}

// runTarInput restores the archive SRC (a file, or o.Stdin for "-") into
// the local DST, on one stream. rep.Compression names the archive's
// compression.
func runTarInput(ctx context.Context, o Options, src, dst transport.Location, rep *Report) error {
	rep.Method, rep.Jobs = string(MethodTar), 1
	if dst.Remote() {
		return fmt.Errorf("%w: a tar archive as SRC restores into a local DST only", ErrUsage)
	}
	var r io.Reader
	name := src.Path
	if o.Src == "-" {
		name = "standard input"
		r = o.Stdin
		if r == nil {
			r = os.Stdin
		}
	} else {
		f, err := os.Open(src.Path)
		if err != nil {
			return fmt.Errorf("open archive %s: %w", src.Path, err)
		}
		defer f.Close()
		stop := context.AfterFunc(ctx, func() { f.Close() })
		defer stop()
		r = f
	}
	br := bufio.NewReaderSize(r, 256<<10)
	ar, codec, err := decompressed(br)
	if err != nil {
		return fmt.Errorf("archive %s: %w", name, err)
	}
	rep.Compression = codec
	x, err := openExtractor(o, dst.Path, false)
	if err != nil {
		return err
	}
	defer closeExtractor(x, rep)
	if err := x.Extract(ctx, ar); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("archive %s: %w", name, err)
	}
	if err := x.Finish(ctx); err != nil {
		return err
	}
	return ctx.Err()
}

// Magic numbers of the compressed formats an archive may come in.
var (
	magicGzip = []byte{0x1f, 0x8b}
	magicZstd = []byte{0x28, 0xb5, 0x2f, 0xfd}
	magicLZ4  = []byte{0x04, 0x22, 0x4d, 0x18}
	magicXz   = []byte{0xfd, '7', 'z', 'X', 'Z', 0}
	magicBz2  = []byte("BZh")
)

// decompressed recognises the compression of the stream in br by its magic
// bytes and returns a reader of the tar archive inside, with the codec's
// name ("none", "gzip", "zstd", "lz4"). Decoders keep bounded windows:
// memory does not grow with the archive.
func decompressed(br *bufio.Reader) (io.Reader, string, error) {
	head, err := br.Peek(6)
	if err != nil && err != io.EOF {
		return nil, "", fmt.Errorf("read: %w", err)
	}
	switch {
	case bytes.HasPrefix(head, magicGzip):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, "", fmt.Errorf("gzip: %w", err)
		}
		return zr, "gzip", nil
	case bytes.HasPrefix(head, magicZstd):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(1<<30))
		if err != nil {
			return nil, "", fmt.Errorf("zstd: %w", err)
		}
		return zr.IOReadCloser(), "zstd", nil
	case bytes.HasPrefix(head, magicLZ4):
		return lz4.NewReader(br), "lz4", nil
	case bytes.HasPrefix(head, magicXz):
		return nil, "", fmt.Errorf("xz-compressed archives are not supported: decompress with xz -dc and pipe it to 'restoresync restore -'")
	case bytes.HasPrefix(head, magicBz2):
		return nil, "", fmt.Errorf("bzip2-compressed archives are not supported: decompress with bzip2 -dc and pipe it to 'restoresync restore -'")
	}
	return br, "none", nil
}
