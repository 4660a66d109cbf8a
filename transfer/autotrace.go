package transfer

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"
)

// AutoTraceEnv names the environment variable that, set to a file's path
// when a process starts, makes every --compress auto controller in it
// append one line per decision to that file: the window's samples, what
// the controller inferred from them (link, contention, cost and ratio
// scales), each rung's predicted time per byte and the rung chosen. It is
// for measuring the controller on a real link and machine (the lab sets
// it for the agent through its sshd's SetEnv); unset, nothing is written.
const AutoTraceEnv = "RESTORESYNC_AUTO_TRACE"

// autoTraceOut is where the controllers trace (nil: nowhere); set once
// at start-up, written by whole lines (an O_APPEND file takes each Write
// whole, so the controllers of several streams do not interleave).
var autoTraceOut = func() io.Writer {
	p := os.Getenv(AutoTraceEnv)
	if p == "" {
		return nil
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil
	}
	return f
}()

// autoTraceIDs numbers the controllers of a process in their trace lines.
var autoTraceIDs atomic.Int64

// trace writes one line for the window just decided, when tracing.
func (a *autoController) trace(prev int, busy float64, link string) {
	if autoTraceOut == nil {
		return
	}
	if a.traceID == 0 {
		a.traceID = autoTraceIDs.Add(1)
	}
	w := &a.win
	line := fmt.Sprintf("pid=%d ctl=%d n=%d rung=%s raw=%d enc=%d comp_raw=%d comp_enc=%d compress_ms=%.2f cpu_ms=%.2f write_ms=%.2f busy_ns_per_enc=%.2f case=%s link_ns=%.2f measured=%v peer_ns=%.2f contention=%.2f cost_scale=%.3f ratio_scale=%.3f",
		os.Getpid(), a.traceID, a.decisions, rungName0(prev), w.raw, w.enc, w.compRaw, w.compEnc,
		float64(w.compress)/1e6, float64(w.compCPU)/1e6, float64(w.write)/1e6, busy, link,
		a.linkNsPerByte, a.linkMeasured, a.peerNsPerByte, a.contention, a.costScale, a.ratioScale)
	line += fmt.Sprintf(" idle_ms=%.2f", float64(w.idle)/1e6)
	for r := range autoLadder {
		line += fmt.Sprintf(" p[%s]=%.2f", rungName0(r), a.predict(r))
	}
	for r := range autoLadder {
		if a.fresh(r) {
			line += fmt.Sprintf(" m[%s]=%.2f", rungName0(r), a.measTime(r))
		}
	}
	line += fmt.Sprintf(" -> %s\n", rungName0(a.rung))
	autoTraceOut.Write([]byte(line))
}

func rungName0(r int) string { return autoLadder[r].String() }
