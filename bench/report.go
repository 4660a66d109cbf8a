package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Phases of a row: a restore into an empty destination, or the second
// restore after RunOptions.DeltaPercent of the files changed.
const (
	PhaseFull  = "full"
	PhaseDelta = "delta"
)

// Results is what Run measured: one Row per restore configuration and
// phase, in the order they ran, and notes on what was skipped or could not
// be measured.
type Results struct {
	// Source is the --src that was restored, as given.
	Source string `json:"source"`
	// Remote is true when Source is on another host (a pull over SSH).
	Remote bool `json:"remote"`
	// PayloadBytes is the size of the restored regular files, each inode
	// once, in bytes.
	PayloadBytes int64 `json:"payload_bytes"`
	// Files is the number of regular files (inodes) restored.
	Files int `json:"files"`
	// Runs is how many times each row was timed.
	Runs int `json:"runs"`
	// DeltaPercent is the share of files changed for the delta rows, in
	// percent; 0 when there are none.
	DeltaPercent float64 `json:"delta_percent"`
	// Started is when the run began.
	Started time.Time `json:"started"`
	// Rows are the measurements.
	Rows []Row `json:"rows"`
	// Notes say what was skipped and why, and how to read the numbers.
	Notes []string `json:"notes"`
}

// Row is one configuration's measurement over all runs: medians, so that
// one slow run does not decide the result. A figure that does not apply or
// was not measured is 0 here, "-" in the table and Markdown, an empty cell
// in CSV and null in JSON (see MarshalJSON).
type Row struct {
	// Tool is "restoresync" or the baseline's name (BaselineRsync, ...).
	Tool string `json:"tool"`
	// Method is restoresync's --method, or the baseline's command in
	// short ("rsync -aH", "tar|ssh|tar").
	Method string `json:"method"`
	// Codec is the compression asked for ("none", "zstd", ...), "-" when
	// the tool has no choice.
	Codec string `json:"codec"`
	// Jobs is the number of parallel streams (1 for baselines, which have
	// no --jobs: not applicable in the outputs).
	Jobs int `json:"jobs"`
	// Phase is PhaseFull or PhaseDelta.
	Phase string `json:"phase"`
	// WallSeconds are the wall times of each run, in seconds.
	WallSeconds []float64 `json:"wall_seconds"`
	// MedianWallSeconds is the median of WallSeconds.
	MedianWallSeconds float64 `json:"median_wall_seconds"`
	// MinWallSeconds and MaxWallSeconds are the fastest and the slowest of
	// WallSeconds, in seconds, shown beside the median.
	MinWallSeconds float64 `json:"min_wall_seconds"`
	MaxWallSeconds float64 `json:"max_wall_seconds"`
	// WallSpreadPercent is (MaxWallSeconds − MinWallSeconds) /
	// MedianWallSeconds in percent; above WideSpreadPercent a note says
	// that the median may mislead.
	WallSpreadPercent float64 `json:"wall_spread_percent"`
	// PayloadBytes is the file data the row moved, in bytes: the whole
	// tree for full rows, the changed files for delta rows when the tool
	// says so.
	PayloadBytes int64 `json:"payload_bytes"`
	// MiBPerSecond is PayloadBytes / MedianWallSeconds in MiB/s.
	MiBPerSecond float64 `json:"mib_per_second"`
	// WireBytes is the median of what crossed the connection, in bytes, as
	// the tool reports it (restoresync's wire_bytes, rsync's --stats sent
	// plus received, the tar stream counted by a relay, the .tar.gz
	// copied); 0 when not measured or nothing crossed a network.
	WireBytes int64 `json:"wire_bytes"`
	// CompressionRatio is PayloadBytes / WireBytes; 0 when WireBytes is 0.
	CompressionRatio float64 `json:"compression_ratio"`
	// ClientCPUSeconds is the median CPU time (user + system, in seconds)
	// of the client processes and the children they waited for (ssh, tar);
	// the far side is in ServerCPUSeconds.
	ClientCPUSeconds float64 `json:"client_cpu_seconds"`
	// VsRsync is MedianWallSeconds divided by that of the rsync baseline
	// of the same phase in the same run; 0 when that baseline did not run.
	VsRsync float64 `json:"vs_rsync"`
	// Verified says how the result was checked: "ok", "not verified"
	// ("skipped" in results saved before), or what differed.
	Verified string `json:"verified"`
	// Error is set when the row failed; its numbers are then incomplete.
	Error string `json:"error,omitempty"`

	// The far side (the source host) and memory.

	// ServerCPUSeconds is the median CPU time (user + system, in seconds)
	// spent on the source host: with RunOptions.ServerPID, everything its
	// sshd reaped (sessions with their crypto, and the commands), else
	// ServerCommandCPUSeconds; 0 when not measured (a local source, no
	// agent there).
	ServerCPUSeconds float64 `json:"server_cpu_seconds"`
	// ServerCommandCPUSeconds is the median CPU time, in seconds, of the
	// commands the row ran on the source host (restoresync serve, rsync
	// --server, tar) and their children, without sshd.
	ServerCommandCPUSeconds float64 `json:"server_command_cpu_seconds"`
	// CPUSecondsPerGiB is (ClientCPUSeconds + ServerCPUSeconds) per GiB of
	// PayloadBytes, for full rows (0 for delta rows).
	CPUSecondsPerGiB float64 `json:"cpu_seconds_per_gib"`
	// ClientPeakRSSBytes is the median over runs of the client processes'
	// peak resident set, in bytes (summed over processes that run at the
	// same time, such as ssh and tar).
	ClientPeakRSSBytes int64 `json:"client_peak_rss_bytes"`
	// ServerPeakRSSBytes is the same for the commands on the source host
	// (sshd not included); 0 when not measured.
	ServerPeakRSSBytes int64 `json:"server_peak_rss_bytes"`
}

// Label names the row for people and charts: "raw zstd j4", "rsync -aH",
// with " (delta)" for delta rows.
func (r *Row) Label() string {
	s := r.Method
	if r.Tool == ToolRestoresync {
		s = fmt.Sprintf("%s %s j%s", r.Method, r.Codec, jobsArg(r.Jobs))
	}
	if r.Phase == PhaseDelta {
		s += " (delta)"
	}
	return s
}

// Formats lists the output formats WriteResults accepts.
func Formats() []string { return []string{"table", "markdown", "csv", "json"} }

// WriteResults writes res to w in format, one of Formats. Every format has
// each row's fastest and slowest run beside its median, and the notes
// (JSON's "notes" too) say which rows' spread is over WideSpreadPercent.
func WriteResults(w io.Writer, res *Results, format string) error {
	res = res.withSpread()
	var err error
	switch format {
	case "table", "":
		err = writeTable(w, res)
	case "markdown":
		err = writeMarkdown(w, res)
	case "csv":
		err = writeCSV(w, res)
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		withNotes := *res
		withNotes.Notes = res.notes()
		err = enc.Encode(&withNotes)
	default:
		return fmt.Errorf("unknown format %q (valid: %s)", format, strings.Join(Formats(), ", "))
	}
	if err != nil {
		return fmt.Errorf("write %s results: %w", format, err)
	}
	return nil
}

var tableHeader = []string{"method", "codec", "jobs", "phase", "median wall s", "min–max s", "MiB/s", "wire MiB", "ratio",
	"client CPU s", "server CPU s", "CPU s/GiB", "client RSS MiB", "server RSS MiB", "vs rsync", "verified"}

// cells formats r's columns for the table and Markdown formats.
func (r *Row) cells() []string {
	blank := func(ok bool, s string) string {
		if !ok {
			return "-"
		}
		return s
	}
	verified := r.Verified
	if r.Error != "" {
		verified = "FAILED: " + r.Error
	}
	jobs := jobsArg(r.Jobs)
	if r.Tool != ToolRestoresync {
		jobs = "-"
	}
	return []string{
		r.Method, r.Codec, jobs, r.Phase,
		blank(r.MedianWallSeconds > 0, fmt.Sprintf("%.2f", r.MedianWallSeconds)),
		r.rangeCell(),
		blank(r.MiBPerSecond > 0, fmt.Sprintf("%.1f", r.MiBPerSecond)),
		blank(r.WireBytes > 0, fmt.Sprintf("%.1f", float64(r.WireBytes)/(1<<20))),
		blank(r.CompressionRatio > 0, fmt.Sprintf("%.2f", r.CompressionRatio)),
		blank(r.ClientCPUSeconds > 0, fmt.Sprintf("%.2f", r.ClientCPUSeconds)),
		blank(r.ServerCPUSeconds > 0, fmt.Sprintf("%.2f", r.ServerCPUSeconds)),
		blank(r.CPUSecondsPerGiB > 0, fmt.Sprintf("%.1f", r.CPUSecondsPerGiB)),
		blank(r.ClientPeakRSSBytes > 0, fmt.Sprintf("%.0f", float64(r.ClientPeakRSSBytes)/(1<<20))),
		blank(r.ServerPeakRSSBytes > 0, fmt.Sprintf("%.0f", float64(r.ServerPeakRSSBytes)/(1<<20))),
		blank(r.VsRsync > 0, fmt.Sprintf("%.2f×", r.VsRsync)),
		verified,
	}
}

// summary is the line above the table.
func (res *Results) summary() string {
	where := "local"
	if res.Remote {
		where = "remote"
	}
	s := fmt.Sprintf("%s (%s): %d files, %.1f MiB; median of %d run(s)", res.Source, where, res.Files,
		float64(res.PayloadBytes)/(1<<20), res.Runs)
	if res.DeltaPercent > 0 {
		s += fmt.Sprintf("; delta rows after changing %g%% of the files", res.DeltaPercent)
	}
	return s
}

// deltaRowsNote says how to read the MiB/s and ratio columns of delta
// rows; the table and Markdown formats print it under the rows when there
// are delta rows.
const deltaRowsNote = "delta rows: MiB/s is the size of the files the tool rewrote (whole files, as restoresync's bytes and rsync's 'Total transferred file size' count them, not only the changed bytes) over the median wall time, not the tree's size; ratio is that same size over the wire MiB, so it counts what the delta transfer saved as well as the compression; neither compares with a full row's"

// notes returns res.Notes, followed by the notes on how to read the rows
// that depend only on the rows (deltaRowsNote, wideSpreadNote), so that
// results saved before those notes existed get them too.
func (res *Results) notes() []string {
	notes := slices.Clone(res.Notes)
	for _, r := range res.Rows {
		if r.Phase == PhaseDelta {
			if !slices.Contains(notes, deltaRowsNote) {
				notes = append(notes, deltaRowsNote)
			}
			break
		}
	}
	if n := res.wideSpreadNote(); n != "" && !slices.Contains(notes, n) {
		notes = append(notes, n)
	}
	return notes
}

func writeTable(w io.Writer, res *Results) error {
	if _, err := fmt.Fprintln(w, res.summary()); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(tableHeader, "\t"))
	for i := range res.Rows {
		fmt.Fprintln(tw, strings.Join(res.Rows[i].cells(), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range res.notes() {
		if _, err := fmt.Fprintln(w, "note: "+n); err != nil {
			return err
		}
	}
	return nil
}

func writeMarkdown(w io.Writer, res *Results) error {
	var b strings.Builder
	b.WriteString(res.summary() + "\n\n")
	b.WriteString("| " + strings.Join(tableHeader, " | ") + " |\n|")
	for i := range tableHeader {
		if i >= 2 && i != 3 && i != len(tableHeader)-1 {
			b.WriteString("---:|")
		} else {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for i := range res.Rows {
		cells := res.Rows[i].cells()
		for j, c := range cells {
			cells[j] = strings.ReplaceAll(c, "|", `\|`)
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	if notes := res.notes(); len(notes) > 0 {
		b.WriteString("\n")
		for _, n := range notes {
			b.WriteString("- " + n + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeCSV(w io.Writer, res *Results) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"tool", "method", "codec", "jobs", "phase", "median_wall_seconds", "mib_per_second",
		"payload_bytes", "wire_bytes", "compression_ratio", "client_cpu_seconds", "vs_rsync", "verified", "error",
		"server_cpu_seconds", "server_command_cpu_seconds", "cpu_seconds_per_gib", "client_peak_rss_bytes", "server_peak_rss_bytes",
		"min_wall_seconds", "max_wall_seconds", "wall_spread_percent"})
	// An empty cell is a figure that does not apply or was not measured,
	// as "-" in the table: a 0 would read as a measurement.
	f := func(v float64) string {
		if v <= 0 {
			return ""
		}
		return strconv.FormatFloat(v, 'f', 4, 64)
	}
	n := func(v int64) string {
		if v <= 0 {
			return ""
		}
		return strconv.FormatInt(v, 10)
	}
	for _, r := range res.Rows {
		jobs := ""
		if r.Tool == ToolRestoresync {
			jobs = jobsArg(r.Jobs)
		}
		cw.Write([]string{r.Tool, r.Method, r.Codec, jobs, r.Phase, f(r.MedianWallSeconds),
			f(r.MiBPerSecond), strconv.FormatInt(r.PayloadBytes, 10), n(r.WireBytes),
			f(r.CompressionRatio), f(r.ClientCPUSeconds), f(r.VsRsync), r.Verified, r.Error,
			f(r.ServerCPUSeconds), f(r.ServerCommandCPUSeconds), f(r.CPUSecondsPerGiB),
			n(r.ClientPeakRSSBytes), n(r.ServerPeakRSSBytes),
			f(r.MinWallSeconds), f(r.MaxWallSeconds), f(r.WallSpreadPercent)})
	}
	cw.Flush()
	return cw.Error()
}

// rowJSON is Row as JSON: the same field names in the same order, with
// null for a figure that does not apply or was not measured (a zero in
// Row), as "-" in the table and an empty cell in CSV. Decoding null into
// Row leaves the zero, so saved results read back as they were.
type rowJSON struct {
	Tool                    string    `json:"tool"`
	Method                  string    `json:"method"`
	Codec                   string    `json:"codec"`
	Jobs                    *int      `json:"jobs"`
	Phase                   string    `json:"phase"`
	WallSeconds             []float64 `json:"wall_seconds"`
	MedianWallSeconds       *float64  `json:"median_wall_seconds"`
	MinWallSeconds          *float64  `json:"min_wall_seconds"`
	MaxWallSeconds          *float64  `json:"max_wall_seconds"`
	WallSpreadPercent       *float64  `json:"wall_spread_percent"`
	PayloadBytes            int64     `json:"payload_bytes"`
	MiBPerSecond            *float64  `json:"mib_per_second"`
	WireBytes               *int64    `json:"wire_bytes"`
	CompressionRatio        *float64  `json:"compression_ratio"`
	ClientCPUSeconds        *float64  `json:"client_cpu_seconds"`
	VsRsync                 *float64  `json:"vs_rsync"`
	Verified                string    `json:"verified"`
	Error                   string    `json:"error,omitempty"`
	ServerCPUSeconds        *float64  `json:"server_cpu_seconds"`
	ServerCommandCPUSeconds *float64  `json:"server_command_cpu_seconds"`
	CPUSecondsPerGiB        *float64  `json:"cpu_seconds_per_gib"`
	ClientPeakRSSBytes      *int64    `json:"client_peak_rss_bytes"`
	ServerPeakRSSBytes      *int64    `json:"server_peak_rss_bytes"`
}

// applies returns a pointer to v, or nil when v is 0 or below: a figure
// that does not apply or was not measured.
func applies[T int | int64 | float64](v T) *T {
	if v <= 0 {
		return nil
	}
	return &v
}

// MarshalJSON writes r with null for the figures that do not apply (see
// rowJSON); the field names are those of Row's tags. Jobs is null for
// baselines, which have no --jobs. Safe for concurrent use.
func (r Row) MarshalJSON() ([]byte, error) {
	j := rowJSON{
		Tool: r.Tool, Method: r.Method, Codec: r.Codec, Phase: r.Phase,
		WallSeconds: r.WallSeconds, MedianWallSeconds: applies(r.MedianWallSeconds),
		MinWallSeconds: applies(r.MinWallSeconds), MaxWallSeconds: applies(r.MaxWallSeconds), WallSpreadPercent: applies(r.WallSpreadPercent),
		PayloadBytes: r.PayloadBytes, MiBPerSecond: applies(r.MiBPerSecond),
		WireBytes: applies(r.WireBytes), CompressionRatio: applies(r.CompressionRatio),
		ClientCPUSeconds: applies(r.ClientCPUSeconds), VsRsync: applies(r.VsRsync),
		Verified: r.Verified, Error: r.Error,
		ServerCPUSeconds: applies(r.ServerCPUSeconds), ServerCommandCPUSeconds: applies(r.ServerCommandCPUSeconds),
		CPUSecondsPerGiB:   applies(r.CPUSecondsPerGiB),
		ClientPeakRSSBytes: applies(r.ClientPeakRSSBytes), ServerPeakRSSBytes: applies(r.ServerPeakRSSBytes),
	}
	if r.Tool == ToolRestoresync {
		j.Jobs = applies(r.Jobs)
	}
	return json.Marshal(j)
}
