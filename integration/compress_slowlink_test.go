package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/restoresync/restoresync/internal/testsshd"
)

// writeTextTree writes n PHP-like text files of size bytes each under
// root: text that compresses about 3× (words drawn at random from a small
// vocabulary), the data a slow link should compress.
func writeTextTree(t *testing.T, root string, n, size int) int64 {
	t.Helper()
	words := strings.Fields("<?php echo esc_html get_option blogname function return array " +
		"$this->db->query SELECT FROM WHERE wp_posts post_status publish if else foreach " +
		"{ } ( ) ; = == !== 'id' 'title' 'content' null true false class public private")
	rng := rand.New(rand.NewPCG(1, 2))
	var total int64
	for i := range n {
		var b strings.Builder
		for b.Len() < size {
			b.WriteString(words[rng.IntN(len(words))])
			if rng.IntN(8) == 0 {
				fmt.Fprintf(&b, " %d\n", rng.IntN(100000))
			} else {
				b.WriteByte(' ')
			}
		}
		p := filepath.Join(root, fmt.Sprintf("dir%d", i%4), fmt.Sprintf("file%03d.php", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(b.String()[:size]), 0o644); err != nil {
			t.Fatal(err)
		}
		total += int64(size)
	}
	return total
}

// A pull over a link slower than the agent's writes (here --bwlimit, which
// the client applies to what it reads): --compress auto's controller on
// the agent measures the rate the client receives at, not the rate its
// writes into the SSH channel go, so it compresses compressible text and
// the report's link throughput is that of the limit, not of the agent's
// writes; with two streams sharing the limit, not the sum of what each
// saw while it ran.
func TestE2ECompressAutoSlowLink(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := filepath.Join(t.TempDir(), "src")
	payload := writeTextTree(t, src, 48, 256<<10) // 12 MiB of text
	srcStats := statTree(t, src)
	srv := testsshd.Start(t)
	const limit = 2 << 20 // bytes per second
	for _, jobs := range []int{1, 2} {
		t.Run(fmt.Sprintf("j%d", jobs), func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "dst")
			r := mustRun(t, append(append([]string{"restore", "--json", "-j", strconv.Itoa(jobs), "--bwlimit", "2MiB"}, sshdArgs(srv)...), sshdURL(srv, src), dst)...)
			rep := parseReport(t, r)
			checkFreshReport(t, rep, srcStats, jobs, "auto")
			assertSameTree(t, src, dst)
			var compressed int64
			for _, c := range rep.Codecs {
				if c.Codec != "none" {
					compressed += c.Bytes
				}
			}
			t.Logf("codecs %+v, link %.2f MiB/s, wire %d of %d bytes", rep.Codecs, rep.LinkMiBPerSec, rep.WireBytes, payload)
			// The first frames go before the client's first rate report: most
			// of the text, not all of it, must be compressed.
			if compressed < payload/2 {
				t.Errorf("codecs %+v: %d of the %d bytes of text compressed, want most of them over a %d B/s link", rep.Codecs, compressed, payload, limit)
			}
			if rep.WireBytes > payload*3/4 {
				t.Errorf("%d bytes on the wire for %d bytes of text: not compressed", rep.WireBytes, payload)
			}
			// The limit bounds what crossed: the link cannot have been
			// faster than it, give or take its bucket's burst.
			if lim := float64(limit) / (1 << 20); rep.LinkMiBPerSec < lim/5 || rep.LinkMiBPerSec > 1.3*lim {
				t.Errorf("link %.2f MiB/s, want about the %.0f MiB/s limit", rep.LinkMiBPerSec, lim)
			}
		})
	}
}

// With --jobs auto (the default), the plain progress lines count the
// streams moving data: once data moves, at least one.
func TestE2EJobsAutoProgressStreams(t *testing.T) {
	e2e(t)
	t.Parallel()
	src := filepath.Join(t.TempDir(), "src")
	writeTextTree(t, src, 24, 256<<10) // 6 MiB
	srv := testsshd.Start(t)
	dst := filepath.Join(t.TempDir(), "dst")
	r := mustRun(t, append(append([]string{"restore", "--config", "none", "--json", "--progress", "plain", "--compress", "none", "--bwlimit", "1M"}, sshdArgs(srv)...), sshdURL(srv, src), dst)...)
	parseReport(t, r)
	assertSameTree(t, src, dst)
	lines := regexp.MustCompile(`(?m)^progress: ([0-9.]+) MiB of .*, ([0-9]+) streams?$`).FindAllStringSubmatch(r.stderr, -1)
	if len(lines) == 0 {
		t.Fatalf("no plain progress line on stderr:\n%s", r)
	}
	for _, l := range lines {
		if l[1] != "0.0" && l[2] == "0" {
			t.Errorf("progress line with data moving and no stream: %q", l[0])
		}
	}
}
