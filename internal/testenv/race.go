//go:build race

package testenv

// Race reports whether the tests were built with the race detector
// (go test -race). The detector makes the code several times slower and
// lets the garbage between two collections grow to several times what is
// live (a restore of 200,000 files: a peak heap of 76 MiB with 10–12 MiB
// live after each collection), so a test of a peak-heap bound measures
// the detector there, not the code, and skips.
const Race = true
