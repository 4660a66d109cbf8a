package bench

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
)

// Chart geometry, in SVG user units (pixels).
const (
	chartLabelWidth = 230 // left column of row labels
	chartBarWidth   = 520 // the longest bar
	chartValueWidth = 150 // room for the value after a bar
	chartRowHeight  = 26
	chartBarHeight  = 18
	chartTop        = 46 // title and subtitle
	chartBottom     = 30 // axis labels
)

// Bar colours: restoresync rows, baselines, and failed rows.
const (
	colourRestoresync = "#2b6cb0"
	colourDelta       = "#63b3ed"
	colourBaseline    = "#a0aec0"
	colourBaselineD   = "#cbd5e0"
)

// WriteChart draws res as a horizontal bar chart in SVG: one bar per row,
// its length the median wall time in seconds, labelled with the row's name
// on the left and the seconds, MiB/s and ratio to rsync after the bar.
// restoresync's rows are blue, baselines grey, delta rows lighter; a failed
// row has no bar and says "failed".
func WriteChart(w io.Writer, res *Results) error {
	maxWall := chartScaleSeconds(res)
	width := chartLabelWidth + chartBarWidth + chartValueWidth
	height := chartTop + len(res.Rows)*chartRowHeight + chartBottom
	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="13">
<rect width="100%%" height="100%%" fill="white"/>
`, width, height, width, height)
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="15" font-weight="bold">%s</text>
`, esc("restore wall time, median of "+fmt.Sprint(res.Runs)+" run(s): shorter is better"))
	fmt.Fprintf(&b, `<text x="10" y="38" fill="#4a5568">%s</text>
`, esc(res.summary()))
	// Grid lines at round numbers of seconds.
	step := niceStep(maxWall / 5)
	for s := 0.0; s <= maxWall*1.0001; s += step {
		x := chartLabelWidth + s/maxWall*chartBarWidth
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e2e8f0"/>
<text x="%.1f" y="%d" text-anchor="middle" fill="#4a5568">%s s</text>
`, x, chartTop-4, x, height-chartBottom+4, x, height-chartBottom+18, esc(trimFloat(s)))
	}
	for i, r := range res.Rows {
		y := chartTop + i*chartRowHeight
		mid := y + chartRowHeight/2 + 4
		fmt.Fprintf(&b, `<text class="label" x="%d" y="%d" text-anchor="end">%s</text>
`, chartLabelWidth-8, mid, esc(r.Label()))
		colour := barColour(r)
		barLen := r.MedianWallSeconds / maxWall * chartBarWidth
		fmt.Fprintf(&b, `<rect class="bar" x="%d" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>
`, chartLabelWidth, y+(chartRowHeight-chartBarHeight)/2, barLen, chartBarHeight, colour, esc(r.Label()))
		value := barValue(r)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#1a202c">%s</text>
`, float64(chartLabelWidth)+barLen+6, mid, esc(value))
	}
	b.WriteString("</svg>\n")
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write chart: %w", err)
	}
	return nil
}

// barColour is the colour of r's bar: restoresync blue, baselines grey,
// delta rows lighter.
func barColour(r Row) string {
	switch {
	case r.Tool != ToolRestoresync && r.Phase == PhaseDelta:
		return colourBaselineD
	case r.Tool != ToolRestoresync:
		return colourBaseline
	case r.Phase == PhaseDelta:
		return colourDelta
	}
	return colourRestoresync
}

// barValue is the text after r's bar: seconds, MiB/s and the ratio to
// rsync, or "failed".
func barValue(r Row) string {
	if r.Error != "" {
		return "failed"
	}
	value := fmt.Sprintf("%.2f s", r.MedianWallSeconds)
	switch {
	case r.MiBPerSecond >= 10:
		value += fmt.Sprintf(", %.0f MiB/s", r.MiBPerSecond)
	case r.MiBPerSecond > 0:
		value += fmt.Sprintf(", %.2g MiB/s", r.MiBPerSecond)
	}
	if r.VsRsync > 0 {
		value += fmt.Sprintf(", %.2f×", r.VsRsync)
	}
	return value
}

// niceStep rounds s up to 1, 2 or 5 times a power of ten.
func niceStep(s float64) float64 {
	if s <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(s)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= s {
			return m * p
		}
	}
	return 10 * p
}

// trimFloat formats a grid value without trailing zeros.
func trimFloat(v float64) string { return fmt.Sprintf("%.4g", v) }

// esc escapes s for XML text and attribute values.
func esc(s string) string {
	var b bytes.Buffer
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// chartScaleSeconds is the wall time, in seconds, that a full-length bar
// stands for: the longest median of res, or 1 when there is none.
func chartScaleSeconds(res *Results) float64 {
	maxWall := 0.0
	for _, r := range res.Rows {
		maxWall = math.Max(maxWall, r.MedianWallSeconds)
	}
	if maxWall == 0 {
		maxWall = 1
	}
	return maxWall
}
