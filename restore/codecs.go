package restore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/restoresync/restoresync/transfer"
)

// CodecReport is what the frames of one codec carried from the sending
// side in a raw restore over a network: with --compress auto, what it
// chose.
type CodecReport struct {
	// Codec is the codec in --compress form ("zstd:3", "lz4", "none").
	// Frames a codec did not shrink went out raw and count under it.
	Codec string `json:"codec"`
	// Files is the number of files whose data started in its frames.
	Files int64 `json:"files"`
	// Bytes is the data its frames carried (file data and the messages
	// around it), WireBytes what they took on the wire, headers included.
	Bytes     int64 `json:"bytes"`
	WireBytes int64 `json:"wire_bytes"`
	// Ratio is Bytes over WireBytes (1 for none, a little less with the
	// headers).
	Ratio float64 `json:"ratio"`
	// MiBPerSec is the codec's measured compression throughput, in MiB of
	// data per second of one core's wall time (other work on the machine
	// included); absent for none.
	MiBPerSec float64 `json:"mib_per_s,omitempty"`
	// CPUSeconds is the CPU time the sending side's compression took,
	// measured with --compress auto on Linux (absent otherwise): against
	// Bytes / MiBPerSec, its wall time, it says how much of a core the
	// codec had, and so what it took from the other work.
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
}

// frameStatser is a session whose streams can say what their sending side
// sent (pull: the agent's frames; push: ours).
type frameStatser interface {
	frameStats(ctx context.Context) (transfer.FrameStats, error)
}

func (s *pullSession) frameStats(ctx context.Context) (transfer.FrameStats, error) {
	var all transfer.FrameStats
	for _, c := range s.p.all() {
		st, err := c.PeerStats(ctx)
		if err != nil {
			return all, err
		}
		all.Add(st)
	}
	return all, nil
}

func (s *pushSession) frameStats(context.Context) (transfer.FrameStats, error) {
	var all transfer.FrameStats
	for _, c := range s.p.all() {
		all.Add(c.SentStats())
	}
	return all, nil
}

// all returns the open streams.
func (p *pool) all() []*transfer.Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*transfer.Conn(nil), p.conns...)
}

// addStreams books in rep what the session's streams did: with --jobs
// auto, the streams opened and why no more (a fixed -j reports the
// number asked for, as the streams still dialing when the work was done
// are not waited for); and what each codec carried with the link's
// measured throughput. ran is how long the session's streams ran. A stats
// request that fails leaves the codecs out: the restore itself is
// complete.
func (rep *Report) addStreams(ctx context.Context, s session, jobsAuto bool, ran time.Duration) {
	if p, ok := s.(interface{ pool() *pool }); ok && jobsAuto {
		rep.Jobs, rep.JobsReason = p.pool().opened()
	}
	fs, ok := s.(frameStatser)
	if !ok {
		return
	}
	st, err := fs.frameStats(ctx)
	if err != nil {
		return
	}
	for _, c := range st.Codecs {
		cr := CodecReport{Codec: c.Codec, Files: c.Files, Bytes: c.RawBytes, WireBytes: c.WireBytes, CPUSeconds: c.CompressCPUSeconds}
		if c.WireBytes > 0 {
			cr.Ratio = float64(c.RawBytes) / float64(c.WireBytes)
		}
		if c.CompressSeconds > 0 {
			cr.MiBPerSec = float64(c.RawBytes) / (1 << 20) / c.CompressSeconds
		}
		rep.Codecs = append(rep.Codecs, cr)
	}
	// The receiver's rate while the link was the bottleneck is the
	// link's; without it (a push, or a link the sender always outran
	// the receiver on), the sender's writes are the measure.
	switch {
	case st.PeerSeconds > 0:
		rep.LinkMiBPerSec = float64(st.PeerBytes) / (1 << 20) / st.PeerSeconds * float64(max(rep.Jobs, 1))
		// That assumes every stream ran the whole time; a stream --jobs
		// auto opened later shared a link that had been the first one's,
		// and the streams together moved no more than the session's
		// bytes in its time while the link bound them.
		if ran.Seconds() > 0 {
			rep.LinkMiBPerSec = min(rep.LinkMiBPerSec, float64(st.WireBytes)/(1<<20)/ran.Seconds())
		}
	case st.WriteSeconds > 0:
		rep.LinkMiBPerSec = float64(st.WireBytes) / (1 << 20) / st.WriteSeconds * float64(max(rep.Jobs, 1))
	}
}

func (s *pullSession) pool() *pool { return s.p }
func (s *pushSession) pool() *pool { return s.p }

// codecsSummary is the summary line's account of the codecs and the link:
// "zstd:3 12.0 MB -> 3.9 MB (3.1x, 140 MiB/s), none 40.0 MB; link 110 MiB/s".
// A codec whose frames carried no file and less than 0.05 MB (the file
// list's first frames, before auto chose) is left out; --json keeps it.
func (rep *Report) codecsSummary() string {
	if len(rep.Codecs) == 0 {
		return ""
	}
	var parts []string
	for _, c := range rep.Codecs {
		if c.Files == 0 && c.Bytes < 50e3 {
			continue // no file, and "0.0 MB": the file list's first frames
		}
		if c.Codec == "none" {
			parts = append(parts, fmt.Sprintf("none %.1f MB", float64(c.WireBytes)/1e6))
			continue
		}
		p := fmt.Sprintf("%s %.1f MB -> %.1f MB (%.1fx", c.Codec, float64(c.Bytes)/1e6, float64(c.WireBytes)/1e6, c.Ratio)
		if c.MiBPerSec > 0 {
			p += fmt.Sprintf(", %.0f MiB/s", c.MiBPerSec)
		}
		parts = append(parts, p+")")
	}
	if len(parts) == 0 {
		return ""
	}
	s := strings.Join(parts, ", ")
	if rep.LinkMiBPerSec > 0 {
		s += fmt.Sprintf("; link %.0f MiB/s", rep.LinkMiBPerSec)
	}
	return s
}
