package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// PNG chart geometry, in pixels; the text is basicfont's 7×13 face.
const (
	pngLabelWidth = 250
	pngBarWidth   = 560
	pngValueWidth = 190
	pngRowHeight  = 24
	pngBarHeight  = 16
	pngTop        = 48
	pngBottom     = 30
	pngCharWidth  = 7
)

// WriteChartPNG draws the same chart as WriteChart (the same bars, colours,
// labels and values) as a PNG image, 1000 pixels wide and 24 pixels per
// row, with the standard library's image/png and the 7×13 bitmap font of
// golang.org/x/image/font/basicfont. Labels longer than the label column
// are cut with "...". Errors: those of w.
func WriteChartPNG(w io.Writer, res *Results) error {
	maxWall := chartScaleSeconds(res)
	width := pngLabelWidth + pngBarWidth + pngValueWidth
	height := pngTop + len(res.Rows)*pngRowHeight + pngBottom
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	text := func(x, y int, s string, c color.Color) {
		d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
		d.DrawString(s)
	}
	fill := func(r image.Rectangle, c color.Color) {
		draw.Draw(img, r, image.NewUniform(c), image.Point{}, draw.Src)
	}
	grey := hexColour("#4a5568")
	text(10, 18, fmt.Sprintf("restore wall time, median of %d run(s): shorter is better", res.Runs), hexColour("#1a202c"))
	text(10, 36, fitText(res.summary(), (width-20)/pngCharWidth), grey)
	step := niceStep(maxWall / 5)
	for s := 0.0; s <= maxWall*1.0001; s += step {
		x := pngLabelWidth + int(math.Round(s/maxWall*pngBarWidth))
		fill(image.Rect(x, pngTop-4, x+1, height-pngBottom+4), hexColour("#e2e8f0"))
		lbl := trimFloat(s) + " s"
		text(x-len(lbl)*pngCharWidth/2, height-pngBottom+18, lbl, grey)
	}
	for i, r := range res.Rows {
		y := pngTop + i*pngRowHeight
		mid := y + pngRowHeight/2 + 5
		label := fitText(r.Label(), (pngLabelWidth-12)/pngCharWidth)
		text(pngLabelWidth-8-len([]rune(label))*pngCharWidth, mid, label, hexColour("#1a202c"))
		barLen := int(math.Round(r.MedianWallSeconds / maxWall * pngBarWidth))
		top := y + (pngRowHeight-pngBarHeight)/2
		fill(image.Rect(pngLabelWidth, top, pngLabelWidth+barLen, top+pngBarHeight), hexColour(barColour(r)))
		value := strings.ReplaceAll(barValue(r), "×", "x") // basicfont has no ×
		text(pngLabelWidth+barLen+6, mid, value, hexColour("#1a202c"))
	}
	if err := png.Encode(w, img); err != nil {
		return fmt.Errorf("write chart: %w", err)
	}
	return nil
}

// fitText cuts s to at most n characters, ending in "..." when cut (the
// bitmap font has Latin-1 only).
func fitText(s string, n int) string {
	rs := []rune(s)
	if len(rs) <= n || n < 4 {
		return s
	}
	return string(rs[:n-3]) + "..."
}

// hexColour parses "#rrggbb"; anything else is black.
func hexColour(s string) color.RGBA {
	var r, g, b uint8
	if _, err := fmt.Sscanf(s, "#%02x%02x%02x", &r, &g, &b); err != nil {
		return color.RGBA{A: 255}
	}
	return color.RGBA{r, g, b, 255}
}
