package fleet

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Account is one account to restore.
type Account struct {
	// Name is the account's name (the user on this host).
	Name string
	// Srcs and Dst are the account's SRCs and DST, templates expanded.
	Srcs []string
	Dst  string
}

// Order is the order in which accounts start (--order). It implements
// pflag.Value and encoding.TextUnmarshaler.
type Order string

// The orders.
const (
	// OrderSmallest starts the accounts with the least data first: most
	// customers are back soonest. It is the default.
	OrderSmallest Order = "smallest"
	// OrderLargest starts the largest first: the last account is done
	// soonest when the largest ones dominate.
	OrderLargest Order = "largest"
	// OrderGiven keeps the order the accounts were given in.
	OrderGiven Order = "given"
)

// Orders lists the valid orders.
func Orders() []string {
	return []string{string(OrderGiven), string(OrderSmallest), string(OrderLargest)}
}

// String returns the order's name; the zero Order is OrderSmallest.
func (o *Order) String() string {
	if *o == "" {
		return string(OrderSmallest)
	}
	return string(*o)
}

// Set parses s; a bad value's error lists the valid ones.
func (o *Order) Set(s string) error {
	if !slices.Contains(Orders(), s) {
		return fmt.Errorf("unknown order %q (valid: %s)", s, strings.Join(Orders(), ", "))
	}
	*o = Order(s)
	return nil
}

// Type names the flag's value in help.
func (o *Order) Type() string { return "order" }

// UnmarshalText is Set.
func (o *Order) UnmarshalText(b []byte) error { return o.Set(string(b)) }

// Options configure Run. Restore is required.
type Options struct {
	// Parallel is how many accounts run at a time; 0 or less means 1.
	Parallel int
	// Order is the start order; the zero value is OrderSmallest.
	Order Order
	// Estimate returns the size in bytes of each of accounts (those
	// that pass Check), one per account in order, negative for an
	// account without an estimate (a result of another length counts
	// as none). It is called once, before any restore starts, and only
	// for OrderSmallest and OrderLargest: it should size them all at
	// once (one request per backup host), since no account starts
	// before it returns. nil: no estimates (the order stays as given,
	// and the Summary says so).
	Estimate func(ctx context.Context, accounts []Account) (sizesBytes []int64)
	// Check, when not nil, says whether an account can run on this host
	// (its user exists here): an account it fails (non-nil error) is
	// not sized and runs after every other, in every order, as it would
	// fail at once: no customer's restore waits behind it, and it is not
	// the first done. It is called once per account before any restore
	// starts, from Run's goroutine.
	Check func(a Account) error
	// Restore restores one account and returns its result (Account,
	// Started and Done are filled in by Run). It is called from Parallel
	// goroutines at once: it must be safe for concurrent use.
	Restore func(ctx context.Context, a Account) Result
	// Done, when not nil, is called with each result as its account ends,
	// from the goroutine that ran it (say, to print its output).
	Done func(r Result)
}

// Run restores every account, Parallel at a time, in Order, and returns
// the Summary. It returns when every account has been restored, or, with
// ctx cancelled, when those that had started have ended (the others are
// reported not run).
func Run(ctx context.Context, accounts []Account, o Options) *Summary {
	s := &Summary{Order: o.Order, Started: time.Now()}
	if s.Order == "" {
		s.Order = OrderSmallest
	}
	parallel := max(o.Parallel, 1)
	order := s.order(ctx, accounts, o.Check, o.Estimate)
	s.runOrder = order
	s.Results = make([]Result, len(accounts))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(parallel, len(accounts)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				a := accounts[i]
				start := time.Now()
				r := o.Restore(ctx, a)
				r.Account, r.Started, r.Done = a.Name, start, time.Now()
				if n := s.estimates[i]; n >= 0 {
					r.EstimateBytes = &n
				}
				s.Results[i] = r
				if o.Done != nil {
					o.Done(r)
				}
			}
		}()
	}
	started := make([]bool, len(accounts))
feed:
	for _, i := range order {
		if ctx.Err() != nil {
			break
		}
		select {
		case next <- i:
			started[i] = true
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	for i, ok := range started {
		if !ok {
			s.Results[i] = Result{Account: accounts[i].Name, ExitCode: ExitNotRun, Error: "not run: " + context.Cause(ctx).Error()}
		}
	}
	s.Ended = time.Now()
	return s
}

// ExitNotRun is the exit code of an account that a cancelled run did not
// start: rsync's 20, interrupted by a signal.
const ExitNotRun = 20

// order returns the indices of accounts in the order they start, and
// records the estimates and the note on how the order was made: the
// accounts that pass check in the order asked (those without an estimate
// after those with one, in the order given), then those that fail it, in
// the order given.
func (s *Summary) order(ctx context.Context, accounts []Account, check func(Account) error,
	estimate func(context.Context, []Account) []int64) []int {
	s.estimates = make([]int64, len(accounts))
	for i := range s.estimates {
		s.estimates[i] = -1
	}
	var idx, unfit []int
	for i, a := range accounts {
		if check != nil && check(a) != nil {
			unfit = append(unfit, i)
		} else {
			idx = append(idx, i)
		}
	}
	var notes []string
	if len(unfit) > 0 {
		notes = append(notes, fmt.Sprintf("%d of %d accounts cannot run on this host: they run last", len(unfit), len(accounts)))
	}
	defer func() { s.OrderNote = strings.Join(notes, "; ") }()
	if s.Order == OrderGiven {
		return append(idx, unfit...)
	}
	if estimate == nil {
		notes = append(notes, "no size estimate: accounts run in the order given")
		return append(idx, unfit...)
	}
	start := time.Now()
	fit := make([]Account, len(idx))
	for k, i := range idx {
		fit[k] = accounts[i]
	}
	if sizes := estimate(ctx, fit); len(sizes) == len(idx) {
		for k, i := range idx {
			s.estimates[i] = max(sizes[k], -1)
		}
	}
	s.EstimateSeconds = time.Since(start).Seconds()
	unknown := 0
	for _, i := range idx {
		if s.estimates[i] < 0 {
			unknown++
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		ea, eb := s.estimates[a], s.estimates[b]
		switch { // unknown sizes last, in the order given
		case ea < 0 && eb < 0:
			return 0
		case ea < 0:
			return 1
		case eb < 0:
			return -1
		case s.Order == OrderLargest:
			return cmp.Compare(eb, ea)
		}
		return cmp.Compare(ea, eb)
	})
	if unknown > 0 {
		verb, pron := "have", "they run"
		if unknown == 1 {
			verb, pron = "has", "it runs"
		}
		notes = append(notes, fmt.Sprintf("%d of %d accounts %s no size estimate: %s last, in the order given", unknown, len(accounts), verb, pron))
	}
	return append(idx, unfit...)
}
