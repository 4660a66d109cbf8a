package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/restoresync/restoresync/restore"
	"github.com/restoresync/restoresync/restore/dest"
)

// logger returns the restore's log: records on w in --log-format, at level
// Info with -v (a record per restored file), Warn otherwise, Error with -q.
func (o *restoreOptions) logger(w io.Writer) *slog.Logger {
	level := slog.LevelWarn
	switch {
	case o.ops.quiet:
		level = slog.LevelError
	case o.ops.verbose:
		level = slog.LevelInfo
	}
	ho := &slog.HandlerOptions{Level: level}
	if o.ops.logFormat == logJSON {
		return slog.New(slog.NewJSONHandler(w, ho))
	}
	return slog.New(slog.NewTextHandler(w, ho))
}

// warnf returns restore.Options.Warnf: "restoresync: warning: ..." lines
// with --log-format text, Warn records with json, nothing with -q.
func (o *restoreOptions) warnf(w io.Writer, log *slog.Logger) func(format string, args ...any) {
	return func(format string, args ...any) {
		switch {
		case o.ops.quiet:
		case o.ops.logFormat == logJSON:
			log.Warn(fmt.Sprintf(format, args...))
		default:
			fmt.Fprintf(w, "restoresync: warning: "+format+"\n", args...)
		}
	}
}

// fileErrors prints the entries that failed: "restoresync: PATH: ERROR"
// lines with --log-format text, escaped as the itemized lines are (a
// name cannot break the line), Error records with json.
func (o *restoreOptions) fileErrors(w io.Writer, log *slog.Logger, errs []restore.FileError) {
	for _, fe := range errs {
		if o.ops.logFormat == logJSON {
			log.Error("could not restore", "path", fe.Path, "error", fe.Error)
			continue
		}
		fmt.Fprintln(w, dest.EscapeItemized(fmt.Sprintf("restoresync: %s: %s", fe.Path, fe.Error), localeUTF8()))
	}
}

// localeUTF8 reports whether the locale's charset is UTF-8 (LC_ALL, else
// LC_CTYPE, else LANG, as setlocale reads them; none set is the C
// locale): the printed names keep their valid UTF-8 then, as rsync's do,
// and otherwise every byte above 0x7f is escaped.
func localeUTF8() bool {
	for _, k := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if v := strings.ToLower(os.Getenv(k)); v != "" {
			return strings.Contains(v, "utf-8") || strings.Contains(v, "utf8")
		}
	}
	return false
}
