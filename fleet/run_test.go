package fleet

import (
	"bytes"
	"context"
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
		Estimate: func(_ context.Context, a Account) (int64, bool) {
			n, ok := sizes[a.Name]
			return n, ok
		},
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
	for _, want := range []string{"small", "broken", "5 accounts, 1 failed, order smallest", "first done after", "(small)", "(broken)", "exit 11"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// --order given and largest; Parallel accounts at once, no more.
func TestRunOrderGivenLargestParallel(t *testing.T) {
	accounts := []Account{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	est := func(_ context.Context, a Account) (int64, bool) { return int64(a.Name[0]), true }
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
