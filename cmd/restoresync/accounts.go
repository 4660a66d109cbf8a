package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/user"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/restoresync/restoresync/config"
	"github.com/restoresync/restoresync/fleet"
	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/transport"
	"github.com/restoresync/restoresync/treewalk"
)

// accountsOptions are restore's flags for many accounts in one run.
type accountsOptions struct {
	list     []string    // --accounts
	from     string      // --accounts-from
	all      bool        // --all-accounts
	parallel int         // --parallel
	order    fleet.Order // --order
	maxConns int         // --max-connections; 0: --parallel
}

// defaultParallel is --parallel's default: one account per core, at least
// two (an account waits on its connections and disk about as much as it
// computes), at most eight (each account runs --jobs streams).
func defaultParallel() int { return min(max(runtime.NumCPU(), 2), 8) }

func (o *restoreOptions) addAccountsFlags(f *pflag.FlagSet) {
	a := &o.accts
	a.order = fleet.OrderSmallest
	f.StringSliceVar(&a.list, "accounts", nil, "restore each of these accounts (comma-separated, repeatable) as --account NAME would, {account} in SRC and DST standing for its name")
	f.StringVar(&a.from, "accounts-from", "", "restore the accounts listed in FILE, one a line ('#' comments), as --accounts")
	f.BoolVar(&a.all, "all-accounts", false, "restore every account that has an [account.NAME] section in the configuration file, as --accounts")
	f.IntVar(&a.parallel, "parallel", defaultParallel(), "with --accounts, how many accounts are restored at a time")
	f.IntVar(&a.maxConns, "max-connections", 0, "with --accounts, the SSH connections to the backup host that every account's streams share, at most (0: --parallel; built-in client; each carries up to 10 streams)")
	f.Var(&a.order, "order", "with --accounts, which accounts start first: "+strings.Join(fleet.Orders(), ", ")+" (smallest: least data first, so most accounts are back soonest)")
}

// given reports whether the command line asks for several accounts.
func (a *accountsOptions) given() bool { return len(a.list) > 0 || a.from != "" || a.all }

// rawArgsKey is the context key of the command line run() executes, which
// each account of a multi-account run executes again as its own.
type rawArgsKey struct{}

// accountRun is one account of a multi-account run, as runRestore finds it
// in its context: the account it restores, its SRCs and DST (templates
// expanded), and what it reports back.
type accountRun struct {
	name string
	args []string
	mux  *transport.SSHMux // the run's shared SSH connections

	mu    sync.Mutex
	rep   *restore.Report
	jr    *jsonReport
	hooks []string
}

type accountRunKey struct{}

func accountRunFrom(ctx context.Context) *accountRun {
	ar, _ := ctx.Value(accountRunKey{}).(*accountRun)
	return ar
}

// noteHook records how a hook ended (status, or the error that kept it
// from running) for the summary.
func (ar *accountRun) noteHook(phase string, status int, err error) {
	if ar == nil {
		return
	}
	s := phase + " ok"
	switch {
	case err != nil:
		s = phase + " failed to start"
	case status != 0:
		s = fmt.Sprintf("%s exit %d", phase, status)
	}
	ar.mu.Lock()
	ar.hooks = append(ar.hooks, s)
	ar.mu.Unlock()
}

// accountName is what --accounts accepts as a name: a portable user name,
// which a template can place in a path without leaving its directory.
var accountName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// accountNames gathers the accounts of --accounts, --accounts-from and
// --all-accounts, in that order, each once.
func (o *restoreOptions) accountNames() ([]string, error) {
	a := &o.accts
	names := slices.Clone(a.list)
	if a.from != "" {
		f, err := os.Open(a.from)
		if err != nil {
			return nil, &exitError{exitFileIO, fmt.Errorf("--accounts-from: %w", err)}
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
				names = append(names, l)
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, &exitError{exitFileIO, fmt.Errorf("--accounts-from %s: %w", a.from, err)}
		}
	}
	if a.all {
		if o.cfg == nil || len(o.cfg.Accounts) == 0 {
			return nil, &usageError{"--all-accounts: the configuration file has no [account.NAME] section"}
		}
		names = append(names, o.cfg.AccountNames()...)
	}
	var out []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		if !accountName.MatchString(n) {
			return nil, &usageError{fmt.Sprintf("account name %q: a name is letters, digits, '_', '.' and '-', not starting with '.' or '-'", n)}
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, &usageError{"--accounts: no account named"}
	}
	return out, nil
}

// runAccounts restores each account of --accounts (--accounts-from,
// --all-accounts) as 'restore --account NAME' would, by running this
// command line again for it with NAME for {account} in SRC and DST, at
// most --parallel at a time in --order; it prints each account's output
// prefixed with its name, then the summary table (or, with --json, one
// object with every account's report), and ends with the worst account's
// exit code.
func runAccounts(ctx context.Context, cmd *cobra.Command, o *restoreOptions, args []string) error {
	raw, _ := ctx.Value(rawArgsKey{}).([]string)
	switch {
	case raw == nil:
		return fmt.Errorf("--accounts: the command line is not known") // run() always sets it
	case o.ops.account != "":
		return &usageError{"--account and --accounts (--accounts-from, --all-accounts) cannot be combined"}
	case o.accts.parallel < 1:
		return &usageError{fmt.Sprintf("--parallel %d: must be at least 1", o.accts.parallel)}
	case o.accts.maxConns < 0:
		return &usageError{fmt.Sprintf("--max-connections %d: must be at least 1 (0: --parallel)", o.accts.maxConns)}
	}
	for _, r := range o.sel.rules {
		if r.file && r.value == "-" {
			return &usageError{"--accounts: --include-from - and --exclude-from - read standard input once, not once per account"}
		}
	}
	if o.sel.filesFrom == "-" {
		return &usageError{"--accounts: --files-from - reads standard input once, not once per account"}
	}
	names, err := o.accountNames()
	if err != nil {
		return err
	}
	dstT := args[len(args)-1]
	srcT := args[:len(args)-1]
	if !strings.Contains(dstT, config.AccountPlaceholder) {
		return &usageError{fmt.Sprintf("--accounts: DST %q must name %s, or every account would land in one DST", dstT, config.AccountPlaceholder)}
	}
	for _, s := range srcT {
		if !strings.Contains(s, config.AccountPlaceholder) {
			return &usageError{fmt.Sprintf("--accounts: SRC %q must name %s, or every account would restore the same tree", s, config.AccountPlaceholder)}
		}
	}
	accounts := make([]fleet.Account, len(names))
	for i, n := range names {
		a := fleet.Account{Name: n, Dst: config.ExpandAccount(dstT, n)}
		for _, s := range srcT {
			a.Srcs = append(a.Srcs, config.ExpandAccount(s, n))
		}
		if len(srcT) == 0 && o.cfg != nil { // SRC from the account's src setting
			if v, ok := o.cfg.Settings(n)["src"]; ok && len(v.Values) == 1 {
				a.Srcs = []string{v.Values[0]}
			}
		}
		accounts[i] = a
	}

	// Every account's streams (and the size estimates' listings) are
	// sessions on these connections: a connection's setup is paid once
	// per connection, not once per stream of every account.
	mux := transport.NewSSHMux(cmp.Or(o.accts.maxConns, o.accts.parallel), transport.DefaultSessionsPerConn)
	defer mux.Close()
	o.opts.SSH.Mux = mux
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	var outMu sync.Mutex
	fo := fleet.Options{
		Parallel: o.accts.parallel,
		Order:    o.accts.order,
		Estimate: o.estimateAccounts,
		Check: func(a fleet.Account) error {
			_, err := user.Lookup(a.Name) // as applyAccount will
			return err
		},
		Restore: func(ctx context.Context, a fleet.Account) fleet.Result {
			ar := &accountRun{name: a.Name, args: append(slices.Clone(a.Srcs), a.Dst), mux: mux}
			if len(srcT) == 0 {
				ar.args = []string{a.Dst} // SRC from the account's src setting, as --account NAME DST
			}
			var out bytes.Buffer
			errw := &prefixWriter{w: stderr, mu: &outMu, prefix: a.Name + ": "}
			code := runAccount(ctx, raw, ar, &out, errw)
			errw.flush()
			r := fleet.Result{ExitCode: code}
			if ar.jr != nil {
				r.Error = ar.jr.Error
				r.Report = ar.jr
			}
			if ar.rep != nil {
				r.Files, r.Bytes, r.Seconds = ar.rep.Files, ar.rep.Bytes, ar.rep.Seconds
			}
			if r.Error == "" && code != 0 {
				r.Error = errw.lastError()
			}
			r.Hooks = strings.Join(ar.hooks, ", ")
			if !o.json && out.Len() > 0 {
				pw := &prefixWriter{w: stdout, mu: &outMu, prefix: a.Name + ": "}
				pw.Write(out.Bytes())
				pw.flush()
			}
			return r
		},
	}
	s := fleet.Run(ctx, accounts, fo)
	outMu.Lock()
	defer outMu.Unlock()
	if o.json {
		b, _ := json.Marshal(accountsReport{s.JSON(), mux.Opened()})
		fmt.Fprintln(stdout, string(b))
	} else if !o.ops.quiet {
		s.WriteTable(stdout)
		fmt.Fprintf(stdout, "%d SSH %s opened (at most %d)\n", mux.Opened(), plural(mux.Opened(), "connection", "connections"), cmp.Or(o.accts.maxConns, o.accts.parallel))
	}
	if code := s.ExitCode(); code != 0 {
		failed := 0
		for _, r := range s.Results {
			if r.ExitCode != 0 {
				failed++
			}
		}
		return &exitError{code, fmt.Errorf("%d of %d accounts did not complete (exit %d, the worst account's)", failed, len(s.Results), code)}
	}
	return nil
}

// accountsReport is restore --accounts --json's object.
type accountsReport struct {
	fleet.JSON
	// SSHConnections is how many SSH connections the built-in client
	// opened for the whole run (0 with -e or local SRCs).
	SSHConnections int `json:"ssh_connections"`
}

// runAccount executes the command line raw again for one account (ar in
// the context: runRestore restores ar.name's SRCs into its DST as
// --account NAME), its output to stdout and stderr, and returns its exit
// code, as the process would for 'restore --account NAME'.
func runAccount(ctx context.Context, raw []string, ar *accountRun, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(raw)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(context.WithValue(ctx, accountRunKey{}, ar))
	return endRun(ctx, root, raw, err, stderr)
}

// estimateAccounts is the size in bytes of each account's SRCs (their
// regular files', a file with several links once; -1 when unknown), with
// the global settings, which an account's section may change. The SRCs on
// one host are sized in one request to its agent, which walks them
// without sending their lists (restore.Sizes); a host whose agent cannot
// (none, or an older one) has each account listed instead
// (estimateAccount).
func (o *restoreOptions) estimateAccounts(ctx context.Context, accounts []fleet.Account) []int64 {
	type ref struct{ account, path int }
	hosts := map[string][]ref{} // by user@host:port ("" for local paths)
	var keys []string
	paths := make([][]string, len(accounts))
	sizes := make([]int64, len(accounts))
	listed := make([]bool, len(accounts)) // sized whole by estimateAccount
	for i, a := range accounts {
		if len(a.Srcs) == 0 {
			sizes[i] = -1
			continue
		}
		for _, src := range a.Srcs {
			k := ""
			if l, err := transport.ParseLocation(src); err == nil && l.Remote() {
				k = fmt.Sprintf("%s@%s:%d", l.User, l.Host, l.Port)
			}
			if _, ok := hosts[k]; !ok {
				keys = append(keys, k)
			}
			hosts[k] = append(hosts[k], ref{i, len(paths[i])})
			paths[i] = append(paths[i], src)
		}
	}
	for _, k := range keys {
		refs := hosts[k]
		var ps []string
		for _, r := range refs {
			ps = append(ps, paths[r.account][r.path])
		}
		got, err := restore.Sizes(ctx, restore.SizeOptions{Paths: ps, SSH: o.opts.SSH,
			IdleTimeout: o.opts.IdleTimeout, Version: version})
		for j, r := range refs {
			switch {
			case sizes[r.account] < 0 || listed[r.account]:
			case err != nil: // no agent to size them: list the account
				n, ok := o.estimateAccount(ctx, accounts[r.account])
				sizes[r.account], listed[r.account] = n, true
				if !ok {
					sizes[r.account] = -1
				}
			case got[j].Error != "":
				sizes[r.account] = -1
			default:
				sizes[r.account] += got[j].Bytes
			}
		}
	}
	return sizes
}

// estimateAccount is the size of an account's SRCs in bytes (its regular
// files'), from a recursive listing (the agent's walk, or GNU find's);
// false when it cannot be listed.
func (o *restoreOptions) estimateAccount(ctx context.Context, a fleet.Account) (int64, bool) {
	ls, err := restore.List(ctx, restore.ListOptions{Paths: a.Srcs, Recursive: true, SSH: o.opts.SSH,
		IdleTimeout: o.opts.IdleTimeout, Version: version})
	if err != nil {
		return 0, false
	}
	var n int64
	for _, l := range ls {
		if l.Err != nil {
			return 0, false
		}
		for i := range l.Entries {
			if e := &l.Entries[i]; e.Kind == treewalk.KindFile && !e.IsHardlink() {
				n += e.Size
			}
		}
	}
	return n, true
}

// prefixWriter writes whole lines to w, each prefixed, under mu (shared
// by the accounts that write to one stream at once); flush writes a last
// line without its newline.
// Safe for concurrent use.
type prefixWriter struct {
	w      io.Writer
	mu     *sync.Mutex
	prefix string

	bmu  sync.Mutex
	buf  []byte
	last string // the last line that starts with "restoresync: "
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.bmu.Lock()
	defer p.bmu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		p.line(p.buf[:i])
		p.buf = p.buf[i+1:]
	}
}

func (p *prefixWriter) line(l []byte) {
	if s, ok := strings.CutPrefix(string(l), "restoresync: "); ok {
		p.last = s
	}
	p.mu.Lock()
	fmt.Fprintf(p.w, "%s%s\n", p.prefix, l)
	p.mu.Unlock()
}

func (p *prefixWriter) flush() {
	p.bmu.Lock()
	defer p.bmu.Unlock()
	if len(p.buf) > 0 {
		p.line(p.buf)
		p.buf = nil
	}
}

// lastError is the last "restoresync: MESSAGE" line written, without its
// prefix.
func (p *prefixWriter) lastError() string {
	p.bmu.Lock()
	defer p.bmu.Unlock()
	return p.last
}
