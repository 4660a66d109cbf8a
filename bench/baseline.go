package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// The baselines Run can time beside restoresync, as RunOptions.Baselines
// names them.
const (
	// BaselineRsync is `rsync -aH SRC/ DST/` (over ssh when SRC is remote).
	BaselineRsync = "rsync"
	// BaselineRsyncZ is BaselineRsync with `-z --compress-choice=zstd`.
	BaselineRsyncZ = "rsync-z"
	// BaselineTarSSH is `ssh HOST tar -cf - -C DIR . | tar -xpf - -C DST`
	// (`tar | tar` when SRC is local).
	BaselineTarSSH = "tar-ssh"
	// BaselineTarGzSCP builds DIR.tar.gz on the remote, copies it with scp,
	// unpacks it and removes both archives.
	BaselineTarGzSCP = "targz-scp"
)

// ToolRestoresync is Row.Tool for restoresync's own rows.
const ToolRestoresync = "restoresync"

// Baselines lists the baseline names RunOptions.Baselines accepts.
func Baselines() []string {
	return []string{BaselineRsync, BaselineRsyncZ, BaselineTarSSH, BaselineTarGzSCP}
}

// baseline is one external command Run times for comparison.
type baseline struct {
	name   string
	method func(remote bool) string // for Row.Method
	codec  string
	// delta is true when a second run after changes is worth timing (the
	// tool sends only what changed); tar sends everything again.
	delta bool
	// tools are the local programs needed, beyond the ssh command.
	tools func(remote bool) []string
	// prepare returns the commands that copy src (a local path, or the
	// path on e's host) into the existing, empty directory dst.
	prepare func(e *env, src, dst string) (baselineRun, error)
}

// baselineRun is one prepared run of a baseline.
type baselineRun struct {
	steps [][]*exec.Cmd
	// wire, when not nil, returns the bytes that crossed the connection;
	// otherwise the relayed byte count is used.
	wire func(m measured) int64
	// payload, when not nil, returns the file data moved, in bytes, when
	// the tool reports it (0 if not).
	payload func(m measured) int64
	// cleanup removes what the run left outside dst; not timed.
	cleanup func()
}

var baselines = map[string]*baseline{
	BaselineRsync: {
		name: BaselineRsync, codec: "none", delta: true,
		method: func(bool) string { return "rsync -aH" },
		tools:  func(bool) []string { return []string{"rsync"} },
		prepare: func(e *env, src, dst string) (baselineRun, error) {
			return e.rsync(src, dst)
		},
	},
	BaselineRsyncZ: {
		name: BaselineRsyncZ, codec: "zstd", delta: true,
		method: func(bool) string { return "rsync -aHz" },
		tools:  func(bool) []string { return []string{"rsync"} },
		prepare: func(e *env, src, dst string) (baselineRun, error) {
			return e.rsync(src, dst, "-z", "--compress-choice=zstd")
		},
	},
	BaselineTarSSH: {
		name: BaselineTarSSH, codec: "none",
		method: func(remote bool) string {
			if remote {
				return "tar|ssh|tar"
			}
			return "tar|tar"
		},
		tools:   func(bool) []string { return []string{"tar"} },
		prepare: (*env).tarSSH,
	},
	BaselineTarGzSCP: {
		name: BaselineTarGzSCP, codec: "gzip",
		method: func(remote bool) string {
			if remote {
				return "tar.gz+scp"
			}
			return "tar.gz"
		},
		tools:   func(bool) []string { return []string{"tar", "gzip"} },
		prepare: (*env).tarGzSCP,
	},
}

// rsyncStat matches the --stats lines Run reads.
var rsyncStat = regexp.MustCompile(`(?m)^(Total bytes sent|Total bytes received|Total transferred file size): ([0-9,.]+)`)

// parseRsyncStats returns wire bytes (sent + received) and the
// transferred file size from rsync --stats output.
func parseRsyncStats(out []byte) (wire, payload int64) {
	for _, m := range rsyncStat.FindAllSubmatch(out, -1) {
		n, err := strconv.ParseInt(strings.NewReplacer(",", "", ".", "").Replace(string(m[2])), 10, 64)
		if err != nil {
			continue
		}
		if string(m[1]) == "Total transferred file size" {
			payload = n
		} else {
			wire += n
		}
	}
	return wire, payload
}

func (e *env) rsync(src, dst string, extra ...string) (baselineRun, error) {
	args := append([]string{"-aH", "--stats"}, extra...)
	if e.remote {
		if e.far != nil {
			args = append(args, "--rsync-path", rshString(e.farWords("rsync")))
		}
		args = append(args, "-e", rshString(e.ssh), e.src.Host+":"+src+"/")
	} else {
		args = append(args, src+"/")
	}
	args = append(args, dst+"/")
	return baselineRun{
		steps:   [][]*exec.Cmd{{e.command("rsync", args...)}},
		wire:    func(m measured) int64 { w, _ := parseRsyncStats(m.stdout); return w },
		payload: func(m measured) int64 { _, p := parseRsyncStats(m.stdout); return p },
	}, nil
}

// tarCreate is the tar command line that writes DIR's contents to
// standard output: POSIX format, so that mtimes keep their nanoseconds and
// the result compares equal to the source.
func tarCreate(dir string, gzip bool, out string) []string {
	flags := "-cf"
	if gzip {
		flags = "-czf"
	}
	return []string{"tar", "--format=posix", "-C", dir, flags, out, "."}
}

// tarExtract returns the tar that unpacks an archive (from standard input
// when archive is "-") into dst, with permissions and owners.
func (e *env) tarExtract(dst, archive string, gzip bool) *exec.Cmd {
	flags := "-xpf"
	if gzip {
		flags = "-xpzf"
	}
	return e.command("tar", "-C", dst, flags, archive)
}

func (e *env) tarSSH(src, dst string) (baselineRun, error) {
	var create *exec.Cmd
	if e.remote {
		create = e.sshCommand(e.farWords(tarCreate(src, false, "-")...)...)
	} else {
		create = e.command(tarCreate(src, false, "-")[0], tarCreate(src, false, "-")[1:]...)
	}
	return baselineRun{steps: [][]*exec.Cmd{{create, e.tarExtract(dst, "-", false)}}}, nil
}

func (e *env) tarGzSCP(src, dst string) (baselineRun, error) {
	local := filepath.Join(e.tmp, fmt.Sprintf("targz-%d.tar.gz", e.nextID()))
	var steps [][]*exec.Cmd
	var out *os.File // the local archive, when a command writes it through its stdout
	cleanup := func() { os.Remove(local) }
	if !e.remote {
		c := tarCreate(src, true, local)
		steps = append(steps, []*exec.Cmd{e.command(c[0], c[1:]...)})
	} else {
		remote := fmt.Sprintf("/tmp/restoresync-bench-%d-%d.tar.gz", os.Getpid(), e.nextID())
		steps = append(steps, []*exec.Cmd{e.sshCommand(e.farWords(tarCreate(src, true, remote)...)...)})
		if e.opts.SSH.Rsh == "" {
			args := []string{"-q", "-o", "BatchMode=yes"}
			o := e.opts.SSH
			if o.ConfigFile != "" {
				args = append(args, "-F", o.ConfigFile)
			}
			for _, id := range o.Identities {
				args = append(args, "-i", id, "-o", "IdentitiesOnly=yes")
			}
			if len(o.KnownHosts) > 0 {
				args = append(args, "-o", "UserKnownHostsFile="+strings.Join(o.KnownHosts, " "))
			}
			if e.src.Port != 0 {
				args = append(args, "-P", strconv.Itoa(e.src.Port))
			}
			host := e.src.Host
			if e.src.User != "" {
				host = e.src.User + "@" + host
			}
			steps = append(steps, []*exec.Cmd{e.command("scp", append(args, host+":"+remote, local)...)})
		} else {
			// -e gives a command, not scp options: cat the archive over it.
			f, err := os.Create(local)
			if err != nil {
				return baselineRun{}, fmt.Errorf("targz-scp: %w", err)
			}
			c := e.sshCommand("cat", remote)
			c.Stdout = f
			steps = append(steps, []*exec.Cmd{c})
			out = f
		}
		cleanup = func() {
			if out != nil {
				out.Close()
			}
			os.Remove(local)
			e.sshCommand("rm", "-f", remote).Run()
		}
	}
	steps = append(steps, []*exec.Cmd{e.tarExtract(dst, local, true)})
	return baselineRun{
		steps: steps,
		wire: func(measured) int64 {
			if fi, err := os.Stat(local); err == nil && e.remote {
				return fi.Size()
			}
			return 0
		},
		cleanup: cleanup,
	}, nil
}
