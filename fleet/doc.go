// Package fleet restores many accounts in one run (restore --accounts):
// it orders them, runs a bounded number at a time, and gathers one result
// per account into a Summary. It knows nothing of how one account is
// restored: the caller's Restore function does that (cmd/restoresync
// restores each as 'restore --account NAME' would, with the account's
// owner, configuration section, hooks and exit code), and its Estimate
// function sizes an account for the order.
//
//	s := Run(ctx, accounts, Options{Parallel: 4, Order: OrderSmallest,
//	        Estimate: sizeOf, Restore: restoreOne})
//	s.WriteTable(w)                  // account, files, bytes, seconds, exit, hooks
//	s.ExitCode()                     // the worst account's
//
// Guarantees: every account is restored once, whatever the others do: a
// failed account never stops the others (only a cancelled ctx does, and
// the accounts not started are then reported as not run, exit code 20);
// at most Options.Parallel accounts run at a time; accounts start in the
// order asked (OrderSmallest: the smallest estimate first, so that most
// accounts are done soonest), accounts without an estimate after them, in
// the order given, and accounts that cannot run on this host
// (Options.Check) last; the table lists them in that order, whatever
// Parallel; the first and last done are accounts that completed. Memory
// is one Result per account.
//
// What an interruption leaves behind is each account's own restore's
// (see package restore): a rerun of the same command completes every
// account.
//
// Files: doc.go — this overview; run.go — Account, Options, Order, Run;
// summary.go — Result, Summary, the table and the exit code.
package fleet
