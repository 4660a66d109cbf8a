package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// opsOptions are the restore flags for operators: the account, hooks,
// progress, logs and the bandwidth limit.
type opsOptions struct {
	account string
	// ignoreDstOwner (--ignore-dst-owner) restores --account NAME into a
	// DST that another user owns.
	ignoreDstOwner bool
	preHook        string
	postHook       string
	progress       progressMode
	quiet          bool
	verbose        bool
	logFormat      logFormat
	bwlimit        bwLimit
}

func (o *restoreOptions) addOpsFlags(f *pflag.FlagSet) {
	p := &o.ops
	p.progress = progressAuto
	p.logFormat = logText
	f.StringVar(&p.account, "account", "", "restore the tree of this account: owned by its user and group here (after the --usermap, --groupmap, --chown rules), DST must be its own (unless --ignore-dst-owner); selects the config's [account.NAME]")
	f.BoolVar(&p.ignoreDstOwner, "ignore-dst-owner", false, "with --account, restore into a DST owned by another user (an empty DST owned by root is accepted without it)")
	f.StringVar(&p.preHook, "pre-hook", "", "shell command run before anything is written; a non-zero exit aborts the restore with that status")
	f.StringVar(&p.postHook, "post-hook", "", "shell command run after the transfer (also after a failed one), with the outcome in RESTORE_* variables")
	f.Var(&p.progress, "progress", "progress on stderr: auto (a bar on a terminal, else plain), bar, plain (a line every few seconds), none")
	f.BoolVarP(&p.quiet, "quiet", "q", false, "print only errors (no summary, warnings or progress; --json still prints the report)")
	f.BoolVarP(&p.verbose, "verbose", "v", false, "log each restored file (path, size, action) to stderr")
	f.Var(&p.logFormat, "log-format", "log records on stderr as text or json")
	f.Var(&p.bwlimit, "bwlimit", "limit the streams together to RATE bytes/s: 50M, 1.5MiB, 800K; a bare number is KiB/s, as rsync's; 0 for no limit")
}

// progressMode is --progress.
type progressMode string

const (
	progressAuto  progressMode = "auto"
	progressBar   progressMode = "bar"
	progressPlain progressMode = "plain"
	progressNone  progressMode = "none"
)

func (m *progressMode) String() string { return string(*m) }
func (m *progressMode) Type() string   { return "mode" }
func (m *progressMode) Set(s string) error {
	switch v := progressMode(s); v {
	case progressAuto, progressBar, progressPlain, progressNone:
		*m = v
		return nil
	}
	return fmt.Errorf("unknown progress mode %q (valid: auto, bar, plain, none)", s)
}

// logFormat is --log-format.
type logFormat string

const (
	logText logFormat = "text"
	logJSON logFormat = "json"
)

func (l *logFormat) String() string { return string(*l) }
func (l *logFormat) Type() string   { return "format" }
func (l *logFormat) Set(s string) error {
	switch v := logFormat(s); v {
	case logText, logJSON:
		*l = v
		return nil
	}
	return fmt.Errorf("unknown log format %q (valid: text, json)", s)
}

// bwLimit is --bwlimit in bytes per second, parsed as rsync does: a size
// with an optional unit suffix (K, M, G powers of 1024, KB, MB, GB powers
// of 1000, KiB, MiB, GiB), where a bare number is in KiB. 0 means no limit.
type bwLimit int64

func (b *bwLimit) Set(s string) error {
	t := strings.TrimSpace(s)
	if v, err := strconv.ParseFloat(t, 64); err == nil {
		if v < 0 {
			return fmt.Errorf("invalid rate %q", s)
		}
		*b = bwLimit(v * 1024) // rsync: a bare number is KiB/s
		return nil
	}
	v, err := parseSize(t)
	if err != nil {
		return fmt.Errorf("invalid rate %q (use e.g. 50M for 50 MiB/s, 800K, or a bare number of KiB/s)", s)
	}
	*b = bwLimit(v)
	return nil
}

func (b *bwLimit) String() string {
	// A form Set reads back: bytes need a unit, a bare number is KiB.
	if *b == 0 {
		return "0"
	}
	if *b%1024 != 0 {
		return strconv.FormatInt(int64(*b), 10) + "B"
	}
	s := byteSize(*b)
	return s.String()
}

func (b *bwLimit) Type() string { return "rate" }
