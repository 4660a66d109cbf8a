package transfer

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/restoresync/restoresync/treewalk"
)

// Run with:
//
//	go test -run '^$' -bench 'Codecs|FramePipeline|PullPipe' -benchtime 3x -count 3 ./transfer/
//
// MB/s is decoded (file) bytes per second; "ratio" is decoded bytes over
// compressed bytes (1 for incompressible data, which goes out raw).

// benchCompressions are the codecs and levels the benchmarks compare.
var benchCompressions = []Compression{
	{CodecNone, 0},
	{CodecLZ4, 0}, {CodecLZ4, 1}, {CodecLZ4, 9},
	{CodecZstd, 1}, {CodecZstd, 3}, {CodecZstd, 9}, {CodecZstd, 19},
	{CodecGzip, 1}, {CodecGzip, 6}, {CodecGzip, 9},
}

// benchData is the sample each benchmark compresses: PHP/SQL-like text and
// random bytes (photos, archives).
func benchData(kind string, n int) []byte {
	if kind == "random" {
		return randomBytes(42, n)
	}
	return textBytes(42, n)
}

// BenchmarkCodecs compresses and decompresses a 4 MiB sample frame by
// frame, as frameWriter and frameReader do, and reports both directions'
// throughput and the ratio.
func BenchmarkCodecs(b *testing.B) {
	const sampleBytes = 4 << 20
	for _, kind := range []string{"text", "random"} {
		src := benchData(kind, sampleBytes)
		for _, c := range benchCompressions {
			b.Run(kind+"/"+c.String(), func(b *testing.B) {
				comp, err := newCompressor(c)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(src)))
				raw := make([]byte, frameRawBytes)
				var enc []byte
				var encBytes int64
				var compTime, decompTime time.Duration
				b.ResetTimer()
				for range b.N {
					encBytes = 0
					for off := 0; off < len(src); off += frameRawBytes {
						frame := src[off:min(off+frameRawBytes, len(src))]
						t0 := time.Now()
						codec, payload := CodecNone, frame
						if comp != nil {
							if enc, err = comp.compress(enc[:0], frame); err != nil {
								b.Fatal(err)
							}
							if len(enc) > 0 && len(enc) < len(frame) {
								codec, payload = c.Codec, enc
							}
						}
						t1 := time.Now()
						if err := decompress(codec, raw[:len(frame)], payload); err != nil {
							b.Fatal(err)
						}
						decompTime += time.Since(t1)
						compTime += t1.Sub(t0)
						encBytes += int64(len(payload))
					}
				}
				mb := float64(len(src)) * float64(b.N) / 1e6
				b.ReportMetric(mb/compTime.Seconds(), "comp-MB/s")
				b.ReportMetric(mb/decompTime.Seconds(), "decomp-MB/s")
				b.ReportMetric(float64(len(src))/float64(encBytes), "ratio")
			})
		}
	}
}

// pipelineCompressions are the settings the pipeline benchmarks compare:
// each codec at its default level, and zstd a notch higher.
var pipelineCompressions = []Compression{{CodecNone, 0}, {CodecLZ4, 0}, {CodecZstd, 1}, {CodecZstd, 3}, {CodecGzip, 1}}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// BenchmarkFramePipeline moves 64 MiB per op through frameWriter → io.Pipe
// → frameReader, with compression and decompression in their goroutines.
func BenchmarkFramePipeline(b *testing.B) {
	const opBytes, writeBytes = 64 << 20, 64 << 10
	for _, kind := range []string{"text", "random"} {
		src := benchData(kind, 8<<20)
		for _, c := range pipelineCompressions {
			b.Run(kind+"/"+c.String(), func(b *testing.B) {
				b.SetBytes(opBytes)
				var wire int64
				for range b.N {
					pr, pw := io.Pipe()
					cw := &countWriter{w: pw}
					fw, err := newFrameWriter(cw, c)
					if err != nil {
						b.Fatal(err)
					}
					done := make(chan error, 1)
					go func() {
						fr := newFrameReader(bufio.NewReaderSize(pr, 64<<10))
						n, err := io.Copy(io.Discard, readerFunc(fr.Read))
						if err == nil && n != opBytes {
							err = fmt.Errorf("read %d bytes, want %d", n, opBytes)
						}
						done <- err
					}()
					for off := 0; off < opBytes; off += writeBytes {
						o := off % len(src)
						if _, err := fw.Write(src[o : o+writeBytes]); err != nil {
							b.Fatal(err)
						}
					}
					if err := fw.Close(); err != nil {
						b.Fatal(err)
					}
					pw.Close()
					if err := <-done; err != nil {
						b.Fatal(err)
					}
					wire += cw.n
				}
				b.ReportMetric(float64(opBytes)*float64(b.N)/float64(wire), "ratio")
			})
		}
	}
}

// genBenchTree writes a hosting account of about 2000 files and 64 MiB:
// 1900 PHP/text files of 1–24 KiB, 90 "photos" of random bytes around
// 300 KiB, an 8 MiB SQL dump and an 8 MiB compressed archive.
func genBenchTree(b *testing.B, dir string) {
	b.Helper()
	write := func(name string, data []byte) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	text := textBytes(7, 24<<10*64)
	for i := range 1900 {
		n := 1<<10 + (i*7919)%(23<<10)
		off := (i * 104729) % (len(text) - n)
		write(fmt.Sprintf("public_html/wp-content/plugins/p%02d/inc/f%04d.php", i%40, i), text[off:off+n])
	}
	for i := range 90 {
		write(fmt.Sprintf("public_html/wp-content/uploads/2024/%02d/img%03d.jpg", 1+i%12, i), randomBytes(uint64(i), 200<<10+(i*4099)%(200<<10)))
	}
	write("backups/db.sql", textBytes(8, 8<<20))
	write("backups/site.tar.gz", randomBytes(9, 8<<20))
}

// discardItems is the benchmark's ItemWriter: it reads each item as the
// safe writer does (restore/dest's copyData: io.Copy into a pooled 1 MiB
// bufio.Writer over a file that has no ReadFrom, so that bufio reads into
// the free part of its buffer) and drops the bytes.
type discardItems struct{}

// discardFile is a file that drops what is written, without ReadFrom.
type discardFile struct{}

func (discardFile) Write(p []byte) (int, error) { return len(p), nil }

var discardBufs = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 1<<20) }}

func (discardItems) WriteItem(ctx context.Context, it *Item, r io.Reader) error {
	bw := discardBufs.Get().(*bufio.Writer)
	defer discardBufs.Put(bw)
	bw.Reset(discardFile{})
	_, err := io.Copy(bw, r)
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	return err
}

// BenchmarkPullPipe is a whole pull through the in-process server: the
// handshake, List, then every file read with pipelined SendRead/RecvRead
// batches over jobs streams.
func BenchmarkPullPipe(b *testing.B) {
	dir := b.TempDir()
	genBenchTree(b, dir)
	list, err := treewalk.Walk(b.Context(), dir)
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	files := 0
	for _, e := range list.Entries {
		if e.HasData() {
			total += e.Size
			files++
		}
	}
	b.Logf("tree: %d files, %.1f MiB", files, float64(total)/(1<<20))
	for _, c := range pipelineCompressions {
		for _, jobs := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/jobs=%d", c, jobs), func(b *testing.B) {
				b.SetBytes(total)
				var wire int64
				for range b.N {
					wire += pullOnce(b, dir, c, jobs, total)
				}
				b.ReportMetric(float64(total)*float64(b.N)/float64(wire), "ratio")
			})
		}
	}
}

// pullOnce pulls the tree at dir over jobs streams and returns the bytes
// received on the wire.
func pullOnce(b *testing.B, dir string, c Compression, jobs int, want int64) int64 {
	ctx := b.Context()
	conns := make([]*Conn, jobs)
	for i := range conns {
		var err error
		conns[i], err = Handshake(ctx, PipeStream(ctx, ServerConfig{Version: "bench"}), Hello{Version: "bench", Role: RoleSender, Path: dir, Compression: c.String()})
		if err != nil {
			b.Fatal(err)
		}
	}
	list, err := conns[0].List(ctx)
	if err != nil {
		b.Fatal(err)
	}
	// Deal the files to the streams, in batches of up to 64 items or 4 MiB.
	const batchItems, batchBytes = 64, 4 << 20
	batches := make([][][]Item, jobs)
	cur := make([][]Item, jobs)
	curBytes := make([]int64, jobs)
	j := 0
	for _, e := range list.Entries {
		if !e.HasData() {
			continue
		}
		cur[j] = append(cur[j], Item{Entry: e, Length: e.Size})
		curBytes[j] += e.Size
		if len(cur[j]) == batchItems || curBytes[j] >= batchBytes {
			batches[j] = append(batches[j], cur[j])
			cur[j], curBytes[j] = nil, 0
		}
		j = (j + 1) % jobs
	}
	for j := range cur {
		if len(cur[j]) > 0 {
			batches[j] = append(batches[j], cur[j])
		}
	}
	var mu sync.Mutex
	var got int64
	g, ctx := errgroup.WithContext(ctx)
	for j, conn := range conns {
		g.Go(func() error { // sender
			for _, batch := range batches[j] {
				if err := conn.SendRead(batch); err != nil {
					return err
				}
			}
			return nil
		})
		g.Go(func() error { // receiver
			for _, batch := range batches[j] {
				errs, err := conn.RecvRead(ctx, batch, discardItems{})
				if err != nil {
					return err
				}
				for i, e := range errs {
					if e != nil {
						return e
					}
					mu.Lock()
					got += batch[i].Length
					mu.Unlock()
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	if got != want {
		b.Fatalf("pulled %d bytes, want %d", got, want)
	}
	var wire int64
	for _, conn := range conns {
		_, recv := conn.WireBytes()
		wire += recv
		if err := conn.Close(); err != nil {
			b.Fatal(err)
		}
	}
	return wire
}
