package restore

import (
	"context"
	"fmt"
	"strings"

	"github.com/restoresync/restoresync/transport"
)

// Method is a restore method (--method). It implements pflag.Value.
type Method string

// The methods.
const (
	// MethodRaw: a file list, rsync's quick check on the receiver, then file
	// contents over parallel streams, small files batched and big ones
	// split into blocks.
	MethodRaw Method = "raw"
)

// methodRun runs one restore with a method, filling rep (all but Seconds,
// which Run sets). src and dst are parsed and at most one is remote. Per-file
// failures go into rep.Errors; the error is for what ends the run.
type methodRun func(ctx context.Context, o Options, src, dst transport.Location, rep *Report) error

// methods lists the methods in the order help texts show them;
// methodRuns runs each. A method's file adds itself with registerMethod.
var (
	methods    = []Method{MethodRaw}
	methodRuns = map[Method]methodRun{MethodRaw: runRaw}
)

// registerMethod adds a method; called from package-level var
// initialisation or init functions of the method's file.
func registerMethod(m Method, run methodRun) {
	methods = append(methods, m)
	methodRuns[m] = run
}

// Methods returns the names of the available methods, for help texts.
func Methods() []string {
	names := make([]string, len(methods))
	for i, v := range methods {
		names[i] = string(v)
	}
	return names
}

// String returns the method's name.
func (m Method) String() string { return string(m) }

// Set parses a method name, listing the valid ones on error (pflag.Value).
func (m *Method) Set(s string) error {
	if _, ok := methodRuns[Method(s)]; ok {
		*m = Method(s)
		return nil
	}
	return fmt.Errorf("unknown method %q (valid: %s)", s, strings.Join(Methods(), ", "))
}

// Type returns the flag type name (pflag.Value).
func (m *Method) Type() string { return "method" }
