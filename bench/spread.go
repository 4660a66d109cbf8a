package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// WideSpreadPercent is the spread of a row's wall times, (slowest −
// fastest) / median in percent, above which the outputs add a note that
// the median may mislead. Runs of one restore on a quiet host differ by a
// few percent; a quarter of the median means that one run at least was
// far off (a cold cache, a busy neighbour), and a median of three runs is
// then no safe single figure.
const WideSpreadPercent = 25.0

// withSpread returns res with each row's MinWallSeconds, MaxWallSeconds
// and WallSpreadPercent derived from its WallSeconds where they are not
// set (results saved before these fields existed). res is not modified.
func (res *Results) withSpread() *Results {
	out := *res
	out.Rows = slices.Clone(res.Rows)
	for i := range out.Rows {
		out.Rows[i].setSpread()
	}
	return &out
}

// setSpread derives the fastest and slowest wall time and the spread from
// WallSeconds and MedianWallSeconds; a row without runs keeps zeros.
func (r *Row) setSpread() {
	if len(r.WallSeconds) == 0 {
		return
	}
	r.MinWallSeconds, r.MaxWallSeconds = slices.Min(r.WallSeconds), slices.Max(r.WallSeconds)
	if r.MedianWallSeconds > 0 {
		r.WallSpreadPercent = (r.MaxWallSeconds - r.MinWallSeconds) / r.MedianWallSeconds * 100
	}
}

// rangeCell is the table's min–max cell: "0.94–3.55", "-" without runs.
func (r *Row) rangeCell() string {
	if r.MaxWallSeconds <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f–%.2f", r.MinWallSeconds, r.MaxWallSeconds)
}

// wideSpreadNote names the rows whose spread is over WideSpreadPercent,
// "" when none is.
func (res *Results) wideSpreadNote() string {
	var wide []string
	for _, r := range res.Rows {
		if r.Error == "" && r.WallSpreadPercent > WideSpreadPercent {
			wide = append(wide, fmt.Sprintf("%s %s (%.2f–%.2f s around %.2f s, %.0f%%)",
				r.Label(), r.Phase, r.MinWallSeconds, r.MaxWallSeconds, r.MedianWallSeconds, r.WallSpreadPercent))
		}
	}
	if len(wide) == 0 {
		return ""
	}
	return fmt.Sprintf("wide spread: the wall times of %s differ by more than %.0f%% of their median, which may not represent them: rerun with more --runs on a quieter host",
		strings.Join(wide, "; "), WideSpreadPercent)
}

// benchETA estimates how long the runs left of a bench run take: each
// series' mean wall time so far (the mean of all series for one not yet
// run) times its runs left, scaled by the elapsed time over the wall time
// measured (which adds what is not timed: verification, cleaning up). ok
// is false before the first run is measured. The ETA is in whole seconds,
// rounded up. Failed series run no more.
func benchETA(all []*series, runs int, elapsed time.Duration) (time.Duration, bool) {
	var measured float64
	var n int
	for _, s := range all {
		for _, w := range s.walls {
			measured += w
			n++
		}
	}
	if n == 0 || measured <= 0 {
		return 0, false
	}
	mean := measured / float64(n)
	var left float64
	for _, s := range all {
		if s.failed {
			continue
		}
		each := mean
		if len(s.walls) > 0 {
			each = 0
			for _, w := range s.walls {
				each += w
			}
			each /= float64(len(s.walls))
		}
		left += each * float64(max(runs-len(s.walls), 0))
	}
	scale := max(elapsed.Seconds()/measured, 1)
	// Whole seconds, rounded up: a run left is never "0s" away.
	return time.Duration(math.Ceil(left*scale-1e-9)) * time.Second, true
}
