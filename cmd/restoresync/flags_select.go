package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/restoresync/restoresync/treewalk"
)

// selectOptions are the flags that choose what to restore: rsync's
// --include, --exclude (and their -from files), --files-from, --from0,
// -R, --delete, -n and --itemize-changes.
type selectOptions struct {
	rules     []ruleArg // --include/--exclude(-from), in command-line order
	filesFrom string
	from0     bool
}

// ruleArg is one --include, --exclude, --include-from or --exclude-from,
// kept in order: the -from files are read once --from0 is known.
type ruleArg struct {
	include bool
	file    bool // value names a file of patterns ("-": standard input)
	value   string
}

// ruleFlag appends to the shared rule list (pflag.Value).
type ruleFlag struct {
	list          *[]ruleArg
	include, file bool
}

func (f *ruleFlag) Set(v string) error {
	*f.list = append(*f.list, ruleArg{include: f.include, file: f.file, value: v})
	return nil
}

// String lists the values given to this flag, comma-separated.
func (f *ruleFlag) String() string {
	if f.list == nil {
		return ""
	}
	var vals []string
	for _, r := range *f.list {
		if r.include == f.include && r.file == f.file {
			vals = append(vals, r.value)
		}
	}
	return strings.Join(vals, ",")
}
func (f *ruleFlag) Type() string {
	if f.file {
		return "FILE"
	}
	return "PATTERN"
}

// addSelectFlags registers the selection flags.
func (o *restoreOptions) addSelectFlags(f *pflag.FlagSet) {
	r := &o.opts
	s := &o.sel
	f.BoolVarP(&r.Relative, "relative", "R", false, "keep each SRC's full path under DST (or the part after a /./ in it), like rsync -R")
	f.Var(&ruleFlag{list: &s.rules}, "exclude", "exclude what matches PATTERN (rsync's rules; repeatable; first matching rule wins)")
	f.Var(&ruleFlag{list: &s.rules, include: true}, "include", "don't exclude what matches PATTERN (repeatable; order matters with --exclude)")
	f.Var(&ruleFlag{list: &s.rules, file: true}, "exclude-from", "read exclude patterns from FILE, one a line ('-': standard input)")
	f.Var(&ruleFlag{list: &s.rules, include: true, file: true}, "include-from", "read include patterns from FILE, one a line ('-': standard input)")
	f.StringVar(&s.filesFrom, "files-from", "", "restore only the paths listed in FILE, relative to SRC, placed as with -R ('-': standard input)")
	f.BoolVar(&s.from0, "from0", false, "--files-from, --include-from and --exclude-from items are separated by NUL bytes, not lines")
	f.BoolVar(&r.Delete, "delete", false, "delete what DST has and SRC lacks, below the restored SRCs only (excluded paths are kept)")
	f.BoolVarP(&r.DryRun, "dry-run", "n", false, "write nothing: print what would be created, updated and deleted (rsync's itemized format)")
	f.BoolVar(&r.ItemizeChanges, "itemize-changes", false, "print each change as it is made, in rsync's itemized format")
}

// applySelect reads the pattern and --files-from files into the restore
// options. stdin is read for "-" (once).
func (o *restoreOptions) applySelect(stdin io.Reader) error {
	s := &o.sel
	r := &o.opts
	stdinUsed := ""
	// A pattern file that cannot be opened is a file I/O error (exit 11),
	// a --files-from file a usage error (exit 1), as in rsync.
	open := func(flag, name string, code int) (io.Reader, func(), error) {
		if name == "-" {
			if stdinUsed != "" {
				return nil, nil, &usageError{fmt.Sprintf("%s - and %s - cannot both read standard input", stdinUsed, flag)}
			}
			stdinUsed = flag
			return stdin, func() {}, nil
		}
		f, err := os.Open(name)
		if err != nil {
			return nil, nil, &exitError{code, fmt.Errorf("%s: %w", flag, err)}
		}
		return f, func() { f.Close() }, nil
	}
	for _, a := range s.rules {
		if !a.file {
			r.Filters = treewalk.AddRule(r.Filters, a.value, a.include)
			continue
		}
		flag := "--exclude-from"
		if a.include {
			flag = "--include-from"
		}
		in, done, err := open(flag, a.value, exitFileIO)
		if err != nil {
			return err
		}
		r.Filters, err = treewalk.AddRulesFrom(r.Filters, in, a.include, s.from0)
		done()
		if err != nil {
			return &exitError{exitFileIO, fmt.Errorf("%s %s: %w", flag, a.value, err)}
		}
	}
	if _, err := treewalk.NewFilter(r.Filters); err != nil {
		return &exitError{exitUsage, err}
	}
	if s.filesFrom != "" {
		in, done, err := open("--files-from", s.filesFrom, exitUsage)
		if err != nil {
			return err
		}
		lines, err := treewalk.ReadLines(in, s.from0)
		done()
		if err != nil {
			return &exitError{exitFileIO, fmt.Errorf("--files-from %s: %w", s.filesFrom, err)}
		}
		r.FilesFrom = append([]string{}, lines...)
	}
	if r.DryRun && r.ItemizeChanges {
		r.ItemizeChanges = false // a dry run itemizes anyway
	}
	return nil
}
