package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// ScaleSample is one timed run of one tool in Scale: a restore of the whole
// tree into a fresh, empty destination.
type ScaleSample struct {
	// Tool is the ScaleTools name.
	Tool string `json:"tool"`
	// Dst is the directory the destination was made in (ScaleOptions.DstDirs).
	Dst string `json:"dst"`
	// Round counts from 1; within a round every tool ran once, one after
	// the other, on every Dst.
	Round int `json:"round"`
	// WallSeconds is from the start of the first local process to the end
	// of the last.
	WallSeconds float64 `json:"wall_seconds"`
	// FirstFileSeconds is from the same start to the moment the first
	// regular file had its final name in the destination; -1 when none
	// was seen (see the first-file watch in scalewatch_linux.go).
	FirstFileSeconds float64 `json:"first_file_seconds"`
	// ClientCPUSeconds is the user + system time of the local processes
	// and their children.
	ClientCPUSeconds float64 `json:"client_cpu_seconds"`
	// ClientPeakRSSBytes is the peak resident set of the largest local
	// process (wait4's ru_maxrss, children included), in bytes.
	ClientPeakRSSBytes int64 `json:"client_peak_rss_bytes"`
	// FarCPUSeconds is the CPU time of the commands sshd ran for the run
	// (each under `bench rusage`: the agents, rsync --server, tar), children
	// included; sshd's own sessions are not in it.
	FarCPUSeconds float64 `json:"far_cpu_seconds"`
	// FarTotalCPUSeconds is what the sshd of ScaleOptions.ServerPID reaped
	// from its children during the run: its sessions (crypto included) and
	// the commands under them; -1 when not measured.
	FarTotalCPUSeconds float64 `json:"far_total_cpu_seconds"`
	// FarPeakRSSBytes is the peak resident set of the largest far-side
	// command (or of one of its children), in bytes; FarPeakCommand names
	// the command.
	FarPeakRSSBytes int64  `json:"far_peak_rss_bytes"`
	FarPeakCommand  string `json:"far_peak_command,omitempty"`
	// FarCommands are the far-side commands' reports, one per command.
	FarCommands []Usage `json:"far_commands,omitempty"`
	// Files is how many regular files the destination held afterwards.
	Files int64 `json:"files"`
	// Error says why the run failed (its command exited non-zero, or the
	// destination did not hold the source's files); "" when it did not.
	// A failed run's figures are left out of the rows.
	Error string `json:"error,omitempty"`
}

// ScaleStat is a figure's median over the good runs of a row, with the
// smallest and largest value.
type ScaleStat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// N is the number of values; 0 when none was measured.
	N int `json:"n"`
}

// ScaleRow is one tool on one destination directory over all rounds.
type ScaleRow struct {
	Tool string `json:"tool"`
	Dst  string `json:"dst"`
	// Runs and Failed count the samples and those that failed.
	Runs   int `json:"runs"`
	Failed int `json:"failed"`
	// Errors are the distinct errors of the failed runs.
	Errors []string `json:"errors,omitempty"`

	WallSeconds        ScaleStat `json:"wall_seconds"`
	FirstFileSeconds   ScaleStat `json:"first_file_seconds"`
	ClientCPUSeconds   ScaleStat `json:"client_cpu_seconds"`
	ClientPeakRSSMiB   ScaleStat `json:"client_peak_rss_mib"`
	FarCPUSeconds      ScaleStat `json:"far_cpu_seconds"`
	FarTotalCPUSeconds ScaleStat `json:"far_total_cpu_seconds"`
	FarPeakRSSMiB      ScaleStat `json:"far_peak_rss_mib"`
	// FarPeakCommand is the command that had the largest far-side peak in
	// most runs.
	FarPeakCommand string `json:"far_peak_command,omitempty"`
	// VsRsync and VsTar are the medians, over the rounds where both ran
	// well, of this row's wall time over that of rsync -aH (or tar|ssh|tar)
	// on the same Dst in the same round; N is 0 when there was none.
	VsRsync ScaleStat `json:"vs_rsync"`
	VsTar   ScaleStat `json:"vs_tar"`
}

// ScaleResults are a Scale run's samples and the rows made from them.
type ScaleResults struct {
	// Title says what was restored (the caller's, e.g. "smallfiles scale 2").
	Title string `json:"title,omitempty"`
	// SourceFiles and SourceBytes are the regular files of the source and
	// their total size.
	SourceFiles int64 `json:"source_files"`
	SourceBytes int64 `json:"source_bytes"`
	// Tools and Dsts are in the order they ran; Rows follow it, Dst by Dst.
	Tools   []string      `json:"tools"`
	Dsts    []string      `json:"dsts"`
	DstKind []string      `json:"dst_kind"` // per Dst: "tmpfs", "disk (ext4)"...
	Samples []ScaleSample `json:"samples"`
	Rows    []ScaleRow    `json:"rows"`
	Notes   []string      `json:"notes,omitempty"`
}

// scaleStat returns the median, min and max of vs.
func scaleStat(vs []float64) ScaleStat {
	if len(vs) == 0 {
		return ScaleStat{}
	}
	return ScaleStat{Median: median(vs), Min: slices.Min(vs), Max: slices.Max(vs), N: len(vs)}
}

// aggregate makes r.Rows from r.Samples: one row per Dst and tool, the
// failed samples counted but left out of the figures, a first-file time
// only from the runs that saw one, and the wall-time ratios per round.
func (r *ScaleResults) aggregate() {
	type key struct{ tool, dst string }
	byKey := map[key][]ScaleSample{}
	wall := map[key]map[int]float64{} // good runs' wall time by round
	for _, s := range r.Samples {
		k := key{s.Tool, s.Dst}
		byKey[k] = append(byKey[k], s)
		if s.Error == "" {
			if wall[k] == nil {
				wall[k] = map[int]float64{}
			}
			wall[k][s.Round] = s.WallSeconds
		}
	}
	ratios := func(k key, base string) ScaleStat {
		var vs []float64
		for round, w := range wall[k] {
			if b, ok := wall[key{base, k.dst}][round]; ok && b > 0 {
				vs = append(vs, w/b)
			}
		}
		return scaleStat(vs)
	}
	r.Rows = nil
	for _, dst := range r.Dsts {
		for _, tool := range r.Tools {
			k := key{tool, dst}
			ss := byKey[k]
			if len(ss) == 0 {
				continue
			}
			row := ScaleRow{Tool: tool, Dst: dst, Runs: len(ss)}
			var walls, firsts, ccpu, crss, fcpu, ftotal, frss []float64
			peakBy := map[string]int{}
			for _, s := range ss {
				if s.Error != "" {
					row.Failed++
					if !slices.Contains(row.Errors, s.Error) {
						row.Errors = append(row.Errors, s.Error)
					}
					continue
				}
				walls = append(walls, s.WallSeconds)
				if s.FirstFileSeconds >= 0 {
					firsts = append(firsts, s.FirstFileSeconds)
				}
				ccpu = append(ccpu, s.ClientCPUSeconds)
				crss = append(crss, float64(s.ClientPeakRSSBytes)/(1<<20))
				fcpu = append(fcpu, s.FarCPUSeconds)
				if s.FarTotalCPUSeconds >= 0 {
					ftotal = append(ftotal, s.FarTotalCPUSeconds)
				}
				frss = append(frss, float64(s.FarPeakRSSBytes)/(1<<20))
				if s.FarPeakCommand != "" {
					peakBy[s.FarPeakCommand]++
				}
			}
			row.WallSeconds = scaleStat(walls)
			row.FirstFileSeconds = scaleStat(firsts)
			row.ClientCPUSeconds = scaleStat(ccpu)
			row.ClientPeakRSSMiB = scaleStat(crss)
			row.FarCPUSeconds = scaleStat(fcpu)
			row.FarTotalCPUSeconds = scaleStat(ftotal)
			row.FarPeakRSSMiB = scaleStat(frss)
			for c, n := range peakBy {
				if n > peakBy[row.FarPeakCommand] || n == peakBy[row.FarPeakCommand] && c < row.FarPeakCommand {
					row.FarPeakCommand = c
				}
			}
			if tool != ScaleToolRsync {
				row.VsRsync = ratios(k, ScaleToolRsync)
			}
			if tool != ScaleToolTar {
				row.VsTar = ratios(k, ScaleToolTar)
			}
			r.Rows = append(r.Rows, row)
		}
	}
}

// scaleToolTitle is a tool's column heading.
func scaleToolTitle(tool string) string {
	switch tool {
	case ScaleToolRestoresync:
		return "restoresync"
	case ScaleToolRestoresyncNone:
		return "restoresync --compress none"
	case ScaleToolRsync:
		return "rsync -aH"
	case ScaleToolTar:
		return `tar\|ssh\|tar`
	}
	return tool
}

// cell formats a figure as "median (min–max)" with prec decimals, the
// range left out when there was one value; "-" when nothing was measured.
func (s ScaleStat) cell(prec int) string {
	if s.N == 0 {
		return "-"
	}
	m := fmt.Sprintf("%.*f", prec, s.Median)
	if s.N == 1 {
		return m
	}
	return fmt.Sprintf("%s (%.*f–%.*f)", m, prec, s.Min, prec, s.Max)
}

// WriteScaleMarkdown writes r as one markdown table per destination
// directory: the tools as columns, the figures as rows (medians over the
// good runs with min–max), as issue 11's table, then the failures and
// notes.
func WriteScaleMarkdown(w io.Writer, r *ScaleResults) error {
	var b strings.Builder
	if r.Title != "" {
		fmt.Fprintf(&b, "### %s\n\n", r.Title)
	}
	fmt.Fprintf(&b, "%s regular files, %.1f MiB.\n", thousands(r.SourceFiles), float64(r.SourceBytes)/(1<<20))
	for i, dst := range r.Dsts {
		var rows []ScaleRow
		for _, row := range r.Rows {
			if row.Dst == dst {
				rows = append(rows, row)
			}
		}
		if len(rows) == 0 {
			continue
		}
		kind := ""
		if i < len(r.DstKind) && r.DstKind[i] != "" {
			kind = " (" + r.DstKind[i] + ")"
		}
		runs := 0
		for _, row := range rows {
			runs = max(runs, row.Runs)
		}
		fmt.Fprintf(&b, "\nDST in %s%s, median of %d (min–max):\n\n|", dst, kind, runs)
		for _, row := range rows {
			b.WriteString(" | " + scaleToolTitle(row.Tool))
		}
		b.WriteString(" |\n|---|")
		for range rows {
			b.WriteString("---|")
		}
		b.WriteString("\n")
		line := func(label string, f func(ScaleRow) string) {
			b.WriteString("| " + label)
			for _, row := range rows {
				b.WriteString(" | " + f(row))
			}
			b.WriteString(" |\n")
		}
		line("wall, s", func(r ScaleRow) string { return r.WallSeconds.cell(2) })
		line("first regular file in DST after, s", func(r ScaleRow) string { return r.FirstFileSeconds.cell(2) })
		line("client peak RSS (largest process), MiB", func(r ScaleRow) string { return r.ClientPeakRSSMiB.cell(0) })
		line("far side's largest command, peak RSS MiB", func(r ScaleRow) string {
			c := r.FarPeakRSSMiB.cell(0)
			if r.FarPeakCommand != "" && c != "-" {
				c += " " + r.FarPeakCommand
			}
			return c
		})
		line("far-side CPU, commands under sshd, s", func(r ScaleRow) string { return r.FarCPUSeconds.cell(2) })
		line("far-side CPU, sshd included, s", func(r ScaleRow) string { return r.FarTotalCPUSeconds.cell(2) })
		line("client CPU, s", func(r ScaleRow) string { return r.ClientCPUSeconds.cell(2) })
		line("wall vs rsync -aH (same round)", func(r ScaleRow) string { return ratioCell(r.Tool == ScaleToolRsync, r.VsRsync) })
		line(`wall vs tar\|ssh\|tar (same round)`, func(r ScaleRow) string { return ratioCell(r.Tool == ScaleToolTar, r.VsTar) })
		for _, row := range rows {
			if row.Failed > 0 {
				fmt.Fprintf(&b, "\n%s in %s: %d of %d runs failed (left out above): %s\n",
					scaleToolTitle(row.Tool), dst, row.Failed, row.Runs, strings.Join(row.Errors, "; "))
			}
		}
	}
	for _, n := range r.Notes {
		b.WriteString("\n- " + n + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ratioCell is a ratio's cell: 1 for the tool itself.
func ratioCell(self bool, s ScaleStat) string {
	if self {
		return "1"
	}
	return s.cell(2)
}

// WriteScaleJSON writes r, its samples included, as indented JSON.
func WriteScaleJSON(w io.Writer, r *ScaleResults) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// thousands formats n with commas between groups of three digits.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
