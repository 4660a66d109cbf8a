package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"image/color"
	"image/png"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/restoresync/restoresync/transport"
	"github.com/restoresync/restoresync/treewalk"
)

// sampleResults is a small result set with a failed row and a delta row.
func sampleResults() *Results {
	res := &Results{Source: "backup:/snap/alice", Remote: true, PayloadBytes: 100 << 20, Files: 1000, Runs: 3,
		Rows: []Row{
			{Tool: ToolRestoresync, Method: "raw", Codec: "zstd", Jobs: 4, Phase: PhaseFull, MedianWallSeconds: 2, WireBytes: 50 << 20, Verified: "ok",
				ClientCPUSeconds: 1.25, ServerCPUSeconds: 2.5, ServerCommandCPUSeconds: 2, CPUSecondsPerGiB: 37.5,
				ClientPeakRSSBytes: 30 << 20, ServerPeakRSSBytes: 123 << 20},
			{Tool: ToolRestoresync, Method: "raw", Codec: "zstd", Jobs: 4, Phase: PhaseDelta, MedianWallSeconds: 0.5, WireBytes: 1 << 20, Verified: "ok"},
			{Tool: BaselineRsync, Method: "rsync -aH", Codec: "none", Jobs: 1, Phase: PhaseFull, MedianWallSeconds: 4, WireBytes: 101 << 20, Verified: "ok"},
			{Tool: BaselineTarSSH, Method: "tar|ssh|tar", Codec: "none", Jobs: 1, Phase: PhaseFull, Error: "ssh: exit 255 | oops"},
		},
		Notes: []string{"baseline targz-scp skipped: scp not installed"},
	}
	for i := range res.Rows {
		r := &res.Rows[i]
		r.PayloadBytes = res.PayloadBytes
		if r.MedianWallSeconds > 0 {
			r.MiBPerSecond = float64(r.PayloadBytes) / (1 << 20) / r.MedianWallSeconds
		}
	}
	res.setVsRsync()
	return res
}

func TestWriteResultsFormats(t *testing.T) {
	res := sampleResults()
	if got := res.Rows[0].VsRsync; got != 0.5 {
		t.Errorf("raw vs rsync = %v, want 0.5", got)
	}
	if got := res.Rows[1].VsRsync; got != 0 {
		t.Errorf("delta row vs rsync = %v, want 0 (no rsync delta row)", got)
	}
	for _, f := range Formats() {
		var b bytes.Buffer
		if err := WriteResults(&b, res, f); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out := b.String()
		switch f {
		case "table", "markdown":
			for _, want := range []string{"raw", "rsync -aH", "0.50×", "FAILED", "targz-scp skipped", "50.0",
				"server CPU s", "CPU s/GiB", "server RSS MiB", "1.25", "2.50", "37.5", "123"} {
				if !strings.Contains(out, want) {
					t.Errorf("%s output lacks %q:\n%s", f, want, out)
				}
			}
			if f == "markdown" && !strings.Contains(out, `tar\|ssh\|tar`) {
				t.Errorf("markdown: | not escaped:\n%s", out)
			}
		case "csv":
			recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
			if err != nil || len(recs) != 1+len(res.Rows) {
				t.Fatalf("csv: %d records, %v:\n%s", len(recs), err, out)
			}
			col := map[string]string{}
			for i, h := range recs[0] {
				col[h] = recs[1][i]
			}
			for k, want := range map[string]string{"server_cpu_seconds": "2.5000", "server_command_cpu_seconds": "2.0000",
				"client_peak_rss_bytes": "31457280", "server_peak_rss_bytes": "128974848", "cpu_seconds_per_gib": "37.5000", "vs_rsync": "0.5000"} {
				if col[k] != want {
					t.Errorf("csv %s = %q, want %q", k, col[k], want)
				}
			}
		case "json":
			var back Results
			if err := json.Unmarshal(b.Bytes(), &back); err != nil {
				t.Fatalf("json: %v", err)
			}
			if !strings.Contains(out, `"server_cpu_seconds": 2.5`) || !strings.Contains(out, `"server_peak_rss_bytes": 128974848`) {
				t.Errorf("json lacks the server fields:\n%s", out)
			}
			if len(back.Rows) != len(res.Rows) || back.Rows[0].CompressionRatio != 0 || back.Rows[0].MiBPerSecond != 50 ||
				back.Rows[0].ServerCPUSeconds != 2.5 || back.Rows[0].ClientPeakRSSBytes != 30<<20 {
				t.Errorf("json round trip: %+v", back.Rows[0])
			}
		}
	}
	if err := WriteResults(io.Discard, res, "xml"); err == nil || !strings.Contains(err.Error(), "markdown") {
		t.Errorf("unknown format: %v, want an error listing the valid ones", err)
	}
}

func TestWriteChart(t *testing.T) {
	res := sampleResults()
	res.Rows[0].Method = `raw <&"'>`
	var b bytes.Buffer
	if err := WriteChart(&b, res); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&b)
	bars, labels := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			for _, a := range se.Attr {
				switch {
				case a.Name.Local == "class" && a.Value == "bar":
					bars++
				case a.Name.Local == "class" && a.Value == "label":
					labels++
				}
			}
		}
	}
	if bars != len(res.Rows) || labels != len(res.Rows) {
		t.Errorf("%d bars and %d labels for %d rows", bars, labels, len(res.Rows))
	}
}

func TestWriteChartPNG(t *testing.T) {
	res := sampleResults()
	res.Rows[0].Method = strings.Repeat("a very long method name ", 5)
	var b bytes.Buffer
	if err := WriteChartPNG(&b, res); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	wantH := pngTop + len(res.Rows)*pngRowHeight + pngBottom
	if got := img.Bounds(); got.Dx() != pngLabelWidth+pngBarWidth+pngValueWidth || got.Dy() != wantH {
		t.Fatalf("size %v, want 1000×%d", got, wantH)
	}
	white := color.RGBAModel.Convert(color.White)
	at := func(row, x int) color.Color {
		return color.RGBAModel.Convert(img.At(pngLabelWidth+x, pngTop+row*pngRowHeight+pngRowHeight/2))
	}
	// Row 0 (raw, 2 s), row 2 (rsync, 4 s: the longest bar), row 3 (failed).
	if c := at(0, 5); c != hexColour(colourRestoresync) {
		t.Errorf("restoresync bar pixel %v, want %s", c, colourRestoresync)
	}
	if c := at(1, 5); c != hexColour(colourDelta) {
		t.Errorf("delta bar pixel %v, want %s", c, colourDelta)
	}
	if c := at(2, pngBarWidth-2); c != hexColour(colourBaseline) {
		t.Errorf("end of the longest bar %v, want %s", c, colourBaseline)
	}
	if c := at(0, pngBarWidth/2+20); c == hexColour(colourRestoresync) {
		t.Errorf("a 2 s bar reaches past half of a 4 s one")
	}
	if c := at(3, 1); c != white {
		t.Errorf("failed row has a bar: %v", c)
	}
	// The label column holds text: some dark pixels left of every bar.
	for row := range res.Rows {
		dark := false
		for x := 0; x < pngLabelWidth-4 && !dark; x++ {
			for dy := -6; dy <= 6; dy++ {
				r, g, b, _ := img.At(x, pngTop+row*pngRowHeight+pngRowHeight/2+dy).RGBA()
				if r < 0x8000 && g < 0x8000 && b < 0x8000 {
					dark = true
					break
				}
			}
		}
		if !dark {
			t.Errorf("row %d has no label", row)
		}
	}
}

func TestFitText(t *testing.T) {
	if got := fitText("abcdefgh", 5); got != "ab..." {
		t.Errorf("fitText = %q", got)
	}
	if got := fitText("abc", 5); got != "abc" {
		t.Errorf("fitText = %q", got)
	}
}

func TestParsePercent(t *testing.T) {
	for in, want := range map[string]float64{"1%": 1, "0.5%": 0.5, "5": 5, " 100% ": 100} {
		if got, err := ParsePercent(in); err != nil || got != want {
			t.Errorf("ParsePercent(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x%", "-1%", "101%", "NaN"} {
		if _, err := ParsePercent(in); err == nil {
			t.Errorf("ParsePercent(%q): want an error", in)
		}
	}
}

func TestShellWords(t *testing.T) {
	words, err := transport.SplitCommandLine(`ssh -p 2222 -o 'ProxyCommand=nc %h %p' "a b\"c" d\ e`)
	want := []string{"ssh", "-p", "2222", "-o", "ProxyCommand=nc %h %p", `a b"c`, "d e"}
	if err != nil || !slices.Equal(words, want) {
		t.Errorf("SplitCommandLine = %q, %v; want %q", words, err, want)
	}
	if _, err := transport.SplitCommandLine(`ssh 'x`); err == nil {
		t.Error("unterminated quote: want an error")
	}
	back, _ := transport.SplitCommandLine(rshString(want))
	if !slices.Equal(back, want) {
		t.Errorf("rshString does not round-trip: %q", back)
	}
	if got := shellQuote("it's"); got != `'it'\''s'` {
		t.Errorf("shellQuote = %s", got)
	}
}

func TestParseRsyncStats(t *testing.T) {
	out := []byte("Number of files: 1,234\nTotal file size: 9,999,999 bytes\nTotal transferred file size: 12,345 bytes\n" +
		"Literal data: 1 bytes\nTotal bytes sent: 1,000\nTotal bytes received: 20,000\n")
	wire, payload := parseRsyncStats(out)
	if wire != 21000 || payload != 12345 {
		t.Errorf("parseRsyncStats = %d, %d; want 21000, 12345", wire, payload)
	}
}

func TestMakeDeltaCopy(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if _, err := Generate(ctx, src, GenOptions{Profile: "hosting", Scale: 0.01, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(dir, "copy")
	st, err := MakeDeltaCopy(ctx, src, cp, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	if st.Files == 0 || st.Appended+st.Edited != st.Files || st.Bytes <= 0 {
		t.Fatalf("stats %+v", st)
	}
	diffs, err := treewalk.Compare(ctx, src, cp, treewalk.CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	changed := map[string]bool{}
	for _, d := range diffs {
		switch d.What {
		case treewalk.DiffSize, treewalk.DiffContent, treewalk.DiffMtime:
			changed[d.Path] = true
		default:
			t.Errorf("unexpected difference: %s", d)
		}
	}
	if len(changed) != st.Files {
		t.Errorf("%d files differ, stats say %d changed", len(changed), st.Files)
	}
	// The same seed picks the same files.
	cp2 := filepath.Join(dir, "copy2")
	st2, err := MakeDeltaCopy(ctx, src, cp2, 10, 1)
	if err != nil || st2 != st {
		t.Errorf("second copy: %+v, %v; want %+v", st2, err, st)
	}
	if _, err := MakeDeltaCopy(ctx, src, cp, 10, 1); err == nil {
		t.Error("copy onto an existing directory: want an error")
	}
}

func TestMedian(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median = %v", m)
	}
	if m := median([]int64{4, 1, 3, 2}); m != 2 {
		t.Errorf("median of even count = %v, want 2 (integer mean of 2 and 3)", m)
	}
	if m := median[float64](nil); m != 0 {
		t.Errorf("median of none = %v", m)
	}
}

func TestRelayDelays(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	const delay = 40 * time.Millisecond
	go func() {
		done <- Relay(ctx, RelayOptions{Listen: "127.0.0.1:0", To: echo.Addr().String(), Delay: delay, Ready: func(a net.Addr) { addr <- a }})
	}()
	c, err := net.Dial("tcp", (<-addr).String())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	msg := []byte("ping")
	c.Write(msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo through relay: %q, %v", got, err)
	}
	if rtt := time.Since(start); rtt < 2*delay {
		t.Errorf("round trip %v through a relay delaying %v each way", rtt, delay)
	}
	c.Close()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Relay: %v", err)
	}
}

func TestRunOptionsErrors(t *testing.T) {
	for _, o := range []RunOptions{
		{},
		{Src: os.TempDir(), Methods: []string{"bogus"}},
		{Src: os.TempDir(), Compressions: []string{"bz2"}},
		{Src: os.TempDir(), Jobs: []int{-1}}, // 0 is auto
		{Src: os.TempDir(), Baselines: []string{"scp"}},
		{Src: os.TempDir(), DeltaPercent: 200},
	} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("Run(%+v): want an error", o)
		}
	}
}
