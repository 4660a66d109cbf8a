package restore

import (
	"context"
	"fmt"
	"strings"

	"github.com/restoresync/restoresync/transport"
)

// Method is a restore method (--method). It implements pflag.Value.
type Method string

// methodRun runs one restore with a method, filling rep (all but Seconds,
// which Run sets). src and dst are parsed and at most one is remote. Per-file
// failures go into rep.Errors; the error is for what ends the run.
type methodRun func(ctx context.Context, o Options, src, dst transport.Location, rep *Report) error

// methods lists the methods in the order help texts show them (raw, the
// first, then the others as their files register); methodRuns runs each. A
// method's file (raw.go, auto.go, rsync.go, tar.go) declares its Method
// constant, and all but raw add themselves with registerMethod.
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
