package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Accounts start smallest first (unknown sizes last, in the order given),
// at most Parallel at a time; one failing leaves the others restored; the
// exit code is the worst account's; the table has a line per account and
// says when the first and last were done.
func TestRunOrdersBoundsAndIsolates(t *testing.T) {
	sizes := map[string]int64{"big": 300, "small": 10, "mid": 100}
	var accounts []Account
	for _, n := range []string{"big", "nosize", "small", "mid", "broken"} {
		accounts = append(accounts, Account{Name: n})
	}
	var mu sync.Mutex
	var started []string
	var running, peak atomic.Int32
	s := Run(t.Context(), accounts, Options{
		Parallel: 1,
		Estimate: perAccount(func(a Account) (int64, bool) {
			n, ok := sizes[a.Name]
			return n, ok
		}),
		Restore: func(_ context.Context, a Account) Result {
			if n := running.Add(1); n > peak.Load() {
				peak.Store(n)
			}
			defer running.Add(-1)
			mu.Lock()
			started = append(started, a.Name)
			mu.Unlock()
			if a.Name == "broken" {
				return Result{ExitCode: 11, Error: "no such account on the backup"}
			}
			return Result{Files: 3, Bytes: sizes[a.Name]}
		},
	})
	if got, want := strings.Join(started, ","), "small,mid,big,nosize,broken"; got != want {
		t.Errorf("started %s, want %s", got, want)
	}
	if peak.Load() != 1 {
		t.Errorf("%d accounts ran at once, want at most 1", peak.Load())
	}
	if s.ExitCode() != 11 {
		t.Errorf("exit code %d, want the broken account's 11", s.ExitCode())
	}
	for i, r := range s.Results {
		if r.Account != accounts[i].Name || r.Done.IsZero() {
			t.Errorf("result %d: %+v, want %s's, done", i, r, accounts[i].Name)
		}
	}
	if s.OrderNote == "" {
		t.Error("no note about the accounts without an estimate")
	}
	var b bytes.Buffer
	if err := s.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"small", "broken", "5 accounts, 1 failed, order smallest", "first done after", "(small)", "(nosize)", "exit 11"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// --order given and largest; Parallel accounts at once, no more.
func TestRunOrderGivenLargestParallel(t *testing.T) {
	accounts := []Account{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	est := perAccount(func(a Account) (int64, bool) { return int64(a.Name[0]), true })
	for _, c := range []struct {
		order Order
		want  string
	}{{OrderGiven, "a,b,c"}, {OrderLargest, "c,b,a"}, {OrderSmallest, "a,b,c"}} {
		var started []string
		Run(t.Context(), accounts, Options{Parallel: 1, Order: c.order, Estimate: est,
			Restore: func(_ context.Context, a Account) Result { started = append(started, a.Name); return Result{} }})
		if got := strings.Join(started, ","); got != c.want {
			t.Errorf("order %s: started %s, want %s", c.order, got, c.want)
		}
	}
	// Parallel 2: two run at once (each waits for the other to start).
	var wg sync.WaitGroup
	wg.Add(2)
	s := Run(t.Context(), accounts[:2], Options{Parallel: 2, Order: OrderGiven,
		Restore: func(context.Context, Account) Result { wg.Done(); wg.Wait(); return Result{} }})
	if s.ExitCode() != 0 {
		t.Errorf("exit %d", s.ExitCode())
	}
	var o Order
	if err := o.Set("biggest"); err == nil || !strings.Contains(err.Error(), "given, smallest, largest") {
		t.Errorf("Set(biggest) = %v, want an error listing the orders", err)
	}
}

// A cancelled run starts no more accounts: those not started are reported
// not run, exit 20.
func TestRunCancelledReportsNotRun(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	accounts := []Account{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	s := Run(ctx, accounts, Options{Parallel: 1, Order: OrderGiven,
		Restore: func(context.Context, Account) Result { cancel(); return Result{ExitCode: 20} }})
	notRun := 0
	for _, r := range s.Results {
		if r.Done.IsZero() {
			notRun++
			if r.ExitCode != ExitNotRun || !strings.HasPrefix(r.Error, "not run") {
				t.Errorf("%+v: want not run, exit 20", r)
			}
		}
	}
	if notRun == 0 || s.ExitCode() != 20 {
		t.Errorf("%d accounts not run, exit %d; want some, 20", notRun, s.ExitCode())
	}
}

// An account that cannot run on this host (Check fails) is not sized and
// runs after every other, in every order, even when its backup is the
// smallest; a failed account is never named the first or last done.
func TestRunUnfitAccountRunsLastAndIsNotDone(t *testing.T) {
	sizes := map[string]int64{"nouser": 1, "a": 10, "b": 20}
	accounts := []Account{{Name: "nouser"}, {Name: "b"}, {Name: "a"}}
	for _, c := range []struct {
		order Order
		want  string
	}{{OrderSmallest, "a,b,nouser"}, {OrderLargest, "b,a,nouser"}, {OrderGiven, "b,a,nouser"}} {
		var started []string
		var sized []string
		s := Run(t.Context(), accounts, Options{Parallel: 1, Order: c.order,
			Check: func(a Account) error {
				if a.Name == "nouser" {
					return errors.New("no such user")
				}
				return nil
			},
			Estimate: perAccount(func(a Account) (int64, bool) {
				sized = append(sized, a.Name)
				return sizes[a.Name], true
			}),
			Restore: func(_ context.Context, a Account) Result {
				started = append(started, a.Name)
				if a.Name == "nouser" {
					return Result{ExitCode: 1, Error: "no such user"}
				}
				return Result{}
			}})
		if got := strings.Join(started, ","); got != c.want {
			t.Errorf("order %s: started %s, want %s", c.order, got, c.want)
		}
		if slices.Contains(sized, "nouser") {
			t.Errorf("order %s: the account that cannot run was sized", c.order)
		}
		first, ok1 := s.FirstDone()
		last, ok2 := s.LastDone()
		if !ok1 || !ok2 || first.Account != strings.Split(c.want, ",")[0] || last.Account != strings.Split(c.want, ",")[1] {
			t.Errorf("order %s: first done %q, last %q; want the first and last that completed", c.order, first.Account, last.Account)
		}
		if !strings.Contains(s.OrderNote, "cannot run on this host") {
			t.Errorf("order %s: note %q does not say why an account runs last", c.order, s.OrderNote)
		}
	}
	// No account completed: neither first nor last done.
	s := Run(t.Context(), accounts[:1], Options{Order: OrderGiven,
		Restore: func(context.Context, Account) Result { return Result{ExitCode: 11} }})
	if r, ok := s.FirstDone(); ok {
		t.Errorf("first done %q, though none completed", r.Account)
	}
	if j := s.JSON(); j.FirstDoneSeconds != 0 || j.LastDoneSeconds != 0 {
		t.Errorf("--json first/last done %v/%v, want 0 when none completed", j.FirstDoneSeconds, j.LastDoneSeconds)
	}
}

// estimate_bytes is the estimate the order used, and absent from --json
// when the account had none (not -1, which reads as a size).
func TestResultEstimateAbsentWhenUnknown(t *testing.T) {
	accounts := []Account{{Name: "known"}, {Name: "unknown"}, {Name: "empty"}}
	s := Run(t.Context(), accounts, Options{
		Estimate: perAccount(func(a Account) (int64, bool) {
			switch a.Name {
			case "known":
				return 42, true
			case "empty":
				return 0, true
			}
			return 0, false
		}),
		Restore: func(context.Context, Account) Result { return Result{} }})
	b, err := json.Marshal(s.JSON())
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Accounts []map[string]any `json:"accounts"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"known": 42.0, "empty": 0.0}
	for _, a := range j.Accounts {
		name := a["account"].(string)
		got, present := a["estimate_bytes"]
		if w, ok := want[name]; ok != present || ok && got != w {
			t.Errorf("%s: estimate_bytes %v (present %v), want %v (present %v):\n%s", name, got, present, w, ok, b)
		}
	}
}

// The table lists the accounts in the order they were to start, the same
// with one account at a time as with several, whichever ends first.
func TestWriteTableOrderIndependentOfParallel(t *testing.T) {
	accounts := []Account{{Name: "c"}, {Name: "a"}, {Name: "b"}}
	est := perAccount(func(a Account) (int64, bool) { return int64(a.Name[0]), true })
	table := func(parallel int) string {
		// With several at once, "a" (the first to start) ends after
		// "c" (the last): it waits for c's result.
		cDone := make(chan struct{})
		s := Run(t.Context(), accounts, Options{Parallel: parallel, Estimate: est,
			Restore: func(_ context.Context, a Account) Result {
				if a.Name == "a" && parallel > 1 {
					<-cDone
				}
				return Result{Files: int(a.Name[0])}
			},
			Done: func(r Result) {
				if r.Account == "c" {
					close(cDone)
				}
			}})
		if parallel > 1 && !s.Results[1].Done.After(s.Results[0].Done) {
			t.Fatalf("a ended before c: the test does not test the order")
		}
		var b bytes.Buffer
		if err := s.WriteTable(&b); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, l := range strings.Split(b.String(), "\n")[1:] {
			if f := strings.Fields(l); len(f) == 6 {
				names = append(names, f[0])
			}
		}
		return strings.Join(names, ",")
	}
	one, three := table(1), table(3)
	if one != "a,b,c" || three != one {
		t.Errorf("table order %s with --parallel 1, %s with 3; want a,b,c (smallest first) both", one, three)
	}
}

// perAccount is an Options.Estimate from one account's estimate.
func perAccount(f func(Account) (int64, bool)) func(context.Context, []Account) []int64 {
	return func(_ context.Context, accounts []Account) []int64 {
		out := make([]int64, len(accounts))
		for i, a := range accounts {
			if n, ok := f(a); ok {
				out[i] = n
			} else {
				out[i] = -1
			}
		}
		return out
	}
}
