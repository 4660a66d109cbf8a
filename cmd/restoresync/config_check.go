package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/pflag"
)

// rangeChecks check the restore settings whose type lets through values
// a restore cannot use, by config key. Each returns what is wrong in
// plain words ("" when the value is fine), without the setting's name, so
// that a flag's error and a config file's error can each name it their
// way. They run once the flags and the configuration file are applied.
var rangeChecks = map[string]func(o *restoreOptions) string{
	"jobs": func(o *restoreOptions) string {
		if j := o.opts.Jobs; j < 0 || j > 256 {
			if j == -1 {
				j = 0
			}
			return fmt.Sprintf("%d: must be auto or 1 to 256", j)
		}
		return ""
	},
	"max_jobs": func(o *restoreOptions) string {
		if j := o.opts.MaxJobs; j < 1 || j > 256 {
			return fmt.Sprintf("%d: must be 1 to 256", j)
		}
		return ""
	},
	"block_size": func(o *restoreOptions) string {
		if o.blockSize < 64<<10 {
			return fmt.Sprintf("%s: must be at least 64KiB", o.blockSize.String())
		}
		return ""
	},
	"read_buffer": func(o *restoreOptions) string {
		if o.readBuf < 4<<10 {
			return fmt.Sprintf("%s: must be at least 4KiB", o.readBuf.String())
		}
		return ""
	},
	"write_buffer": func(o *restoreOptions) string {
		if o.writeBuf < 4<<10 {
			return fmt.Sprintf("%s: must be at least 4KiB", o.writeBuf.String())
		}
		return ""
	},
	"timeout": func(o *restoreOptions) string {
		if s := o.faultFlags.timeoutSec; s < 0 {
			return fmt.Sprintf("%d: must be 0 (none) or a number of seconds", s)
		}
		return ""
	},
	"contimeout": func(o *restoreOptions) string {
		if s := o.faultFlags.contimeoutSec; s < 1 {
			return fmt.Sprintf("%d: must be at least 1 second", s)
		}
		return ""
	},
}

// checkRanges returns a usage error for the first flag whose value is out
// of range ("--jobs 0: must be 1 to 256"), in configKeys order.
func (o *restoreOptions) checkRanges() error {
	for _, key := range configKeys {
		if check, ok := rangeChecks[key]; ok {
			if msg := check(o); msg != "" {
				return &usageError{"--" + flagName(key) + " " + msg}
			}
		}
	}
	return nil
}

// plainSetError rewords the error of fl.Value.Set(value) for a person:
// pflag's integer and boolean flags return strconv's errors as they are
// ("strconv.ParseInt: parsing "many": invalid syntax").
func plainSetError(fl *pflag.Flag, value string, err error) string {
	var ne *strconv.NumError
	if !errors.As(err, &ne) {
		return err.Error()
	}
	switch fl.Value.Type() {
	case "bool":
		return fmt.Sprintf("%q: must be true or false", value)
	case "int", "int64", "uint", "uint64", "int32", "uint32":
		if errors.Is(ne.Err, strconv.ErrRange) {
			return fmt.Sprintf("%q: number too large", value)
		}
		return fmt.Sprintf("%q: must be a whole number", value)
	}
	return fmt.Sprintf("%q: not a valid %s", value, fl.Value.Type())
}
