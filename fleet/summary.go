package fleet

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"
)

// Result is how one account's restore ended.
type Result struct {
	// Account is the account's name.
	Account string `json:"account"`
	// ExitCode is the account's exit code, as 'restore --account NAME'
	// would exit (0: complete; 23: some files failed; 26: the post-hook
	// failed...).
	ExitCode int `json:"exit_code"`
	// Error says why the account did not complete ("" when it did).
	Error string `json:"error,omitempty"`
	// Files and Bytes are the files written and their payload in bytes;
	// Seconds the restore's wall time (its report's).
	Files   int     `json:"files"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	// Hooks says how the account's hooks ended: "pre ok, post ok",
	// "post exit 3", "" when none ran.
	Hooks string `json:"hooks,omitempty"`
	// EstimateBytes is the size estimate in bytes the order used; nil
	// (absent from JSON) when the account had none.
	EstimateBytes *int64 `json:"estimate_bytes,omitempty"`
	// Report is the account's own report (restore --json's object), nil
	// when the restore did not start.
	Report any `json:"report,omitempty"`
	// Started and Done are when the account's restore began and ended.
	Started time.Time `json:"started"`
	Done    time.Time `json:"done"`
}

// Summary is a multi-account run's outcome.
type Summary struct {
	// Results holds one Result per account, in the order the accounts
	// were given.
	Results []Result
	// Order is the order asked; OrderNote says how it could not be
	// followed ("" when it was), EstimateSeconds how long estimating
	// the sizes took.
	Order           Order
	OrderNote       string
	EstimateSeconds float64
	// Started and Ended bound the run.
	Started, Ended time.Time

	estimates []int64 // per account, in the order given; -1: none
	runOrder  []int   // the indices of Results in the order they start
}

// ExitCode is the run's exit code: the worst account's, the highest of
// them (0 when every account completed).
func (s *Summary) ExitCode() int {
	code := 0
	for _, r := range s.Results {
		code = max(code, r.ExitCode)
	}
	return code
}

// FirstDone and LastDone return the result of the account that completed
// (exit code 0) first and last, and false when none did: an account that
// failed, however soon, brought no customer back.
func (s *Summary) FirstDone() (Result, bool) {
	return s.pick(func(a, b time.Time) bool { return a.Before(b) })
}

// LastDone: see FirstDone.
func (s *Summary) LastDone() (Result, bool) {
	return s.pick(func(a, b time.Time) bool { return a.After(b) })
}

func (s *Summary) pick(better func(a, b time.Time) bool) (Result, bool) {
	var best Result
	found := false
	for _, r := range s.Results {
		if r.Done.IsZero() || r.ExitCode != 0 {
			continue
		}
		if !found || better(r.Done, best.Done) {
			best, found = r, true
		}
	}
	return best, found
}

// WriteTable writes the summary table: one line per account (account,
// files, bytes, seconds, exit code, hooks), in the order the accounts were
// to start (the order asked, the same whatever Options.Parallel), then
// when the first and the last account were done, counted from the start
// of the run.
func (s *Summary) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "account\tfiles\tbytes\tseconds\texit\thooks\t")
	for _, r := range s.inRunOrder() {
		hooks := r.Hooks
		if hooks == "" {
			hooks = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.3f\t%d\t%s\t\n", r.Account, r.Files, r.Bytes, r.Seconds, r.ExitCode, hooks)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	failed := 0
	for _, r := range s.Results {
		if r.ExitCode != 0 {
			failed++
		}
	}
	line := fmt.Sprintf("%d accounts, %d failed, order %s", len(s.Results), failed, s.Order)
	if s.OrderNote != "" {
		line += " (" + s.OrderNote + ")"
	}
	if first, ok := s.FirstDone(); ok {
		last, _ := s.LastDone()
		line += fmt.Sprintf("; first done after %.3fs (%s), last after %.3fs (%s)",
			first.Done.Sub(s.Started).Seconds(), first.Account, last.Done.Sub(s.Started).Seconds(), last.Account)
	}
	_, err := fmt.Fprintln(w, line+"; exit "+strconv.Itoa(s.ExitCode()))
	return err
}

// inRunOrder returns the results in the order the accounts were to
// start.
func (s *Summary) inRunOrder() []Result {
	if len(s.runOrder) != len(s.Results) {
		return s.Results
	}
	out := make([]Result, len(s.Results))
	for k, i := range s.runOrder {
		out[k] = s.Results[i]
	}
	return out
}

// JSON is the --json object of a multi-account run.
type JSON struct {
	// Accounts holds each account's result with its report, in the
	// order given.
	Accounts []Result `json:"accounts"`
	// Order, OrderNote and EstimateSeconds: see Summary.
	Order           Order   `json:"order"`
	OrderNote       string  `json:"order_note,omitempty"`
	EstimateSeconds float64 `json:"estimate_seconds"`
	// FirstDoneSeconds and LastDoneSeconds are when the first and the
	// last account that completed ended, from the start of the run (0
	// when none completed);
	// Seconds is the run's wall time.
	FirstDoneSeconds float64 `json:"first_done_seconds"`
	LastDoneSeconds  float64 `json:"last_done_seconds"`
	Seconds          float64 `json:"seconds"`
	// ExitCode is the run's (the worst account's).
	ExitCode int `json:"exit_code"`
}

// JSON returns the summary as the --json object.
func (s *Summary) JSON() JSON {
	j := JSON{Accounts: s.Results, Order: s.Order, OrderNote: s.OrderNote, EstimateSeconds: s.EstimateSeconds,
		Seconds: s.Ended.Sub(s.Started).Seconds(), ExitCode: s.ExitCode()}
	if j.Accounts == nil {
		j.Accounts = []Result{}
	}
	if first, ok := s.FirstDone(); ok {
		last, _ := s.LastDone()
		j.FirstDoneSeconds = first.Done.Sub(s.Started).Seconds()
		j.LastDoneSeconds = last.Done.Sub(s.Started).Seconds()
	}
	return j
}
