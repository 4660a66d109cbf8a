#!/usr/bin/env bash
# The scale benchmark behind 'make scale' (issue 11's table): as root, an
# OpenSSH sshd on a free loopback port as the backup server, trees from
# 'restoresync bench gen --profile smallfiles --seed 5' at each of
# SCALE_SCALES (scale 1 = 100,000 files), then 'restoresync bench scale' on
# each: restoresync (defaults, and --compress none), rsync -aH and
# tar|ssh|tar, SCALE_RUNS rounds with the tools interleaved, DST on tmpfs
# (/dev/shm) and, with SCALE_DISK=1, also on the disk; each tree is read
# once before the first round, so that every tool finds the cache warm. It writes
# bench/results/<date>-scale-smallfiles.md (and a .json per scale with
# every sample) and removes everything else on exit.
#
#   scripts/scale.sh BIN
#   SCALE_SCALES="0.5 2" SCALE_RUNS=3 SCALE_DISK=1 scripts/scale.sh bin/restoresync
#   SCALE_BIN=/tmp/old/restoresync scripts/scale.sh bin/restoresync  # time another build
#   SCALE_TREES=/var/tmp/scale-trees scripts/scale.sh bin/restoresync # keep the trees for the next run
#
# Far-side CPU is what the sshd reaped from its children during each run
# (sessions with their crypto, and the commands), and, apart, the
# commands', which 'bench rusage' measures one by one with their peak RSS.
set -euo pipefail

BIN=$(realpath "${1:-bin/restoresync}")
SCALE_BIN=$(realpath "${SCALE_BIN:-$BIN}")   # the restoresync that is timed, on both ends
SCALE_SCALES=${SCALE_SCALES:-0.5 2}
SCALE_RUNS=${SCALE_RUNS:-3}
SCALE_DST=${SCALE_DST:-/dev/shm}           # tmpfs
SCALE_DISK=${SCALE_DISK:-0}                # 1: also a destination on the disk (SCALE_DISK_DIR)
SCALE_TOOLS=${SCALE_TOOLS:-restoresync,restoresync-none,rsync,tar}
SCALE_TREES=${SCALE_TREES:-}               # where the trees go and stay; default: removed at the end
RESULTS=${SCALE_RESULTS:-$(dirname "$0")/../bench/results}

if [ "$(id -u)" != 0 ]; then
	echo "scale: must run as root (sshd)" >&2
	exit 1
fi
[ -x "$BIN" ] || { echo "scale: $BIN is not executable (make build)" >&2; exit 1; }
[ -x /usr/sbin/sshd ] || { echo "scale: /usr/sbin/sshd missing (make deps)" >&2; exit 1; }

work=$(mktemp -d /var/tmp/restoresync-scale.XXXXXX)
chmod 755 "$work"
SCALE_DISK_DIR=${SCALE_DISK_DIR:-$work}
sshd_pid=""
cleanup() {
	[ -n "$sshd_pid" ] && kill "$sshd_pid" 2>/dev/null && wait "$sshd_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)))
ssh-keygen -q -t ed25519 -N '' -f "$work/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$work/id_ed25519"
cp "$work/id_ed25519.pub" "$work/authorized_keys"
mkdir -p /run/sshd
cat >"$work/sshd_config" <<EOC
ListenAddress 127.0.0.1:$port
HostKey $work/host_key
AuthorizedKeysFile $work/authorized_keys
PidFile $work/sshd.pid
UsePAM no
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin yes
MaxSessions 100
MaxStartups 100
LogLevel ERROR
EOC
/usr/sbin/sshd -D -e -f "$work/sshd_config" 2>"$work/sshd.log" &
sshd_pid=$!   # the listener: what it reaps is the far side
for _ in $(seq 100); do
	bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null && break
	sleep 0.1
done
echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$work/host_key.pub")" >"$work/known_hosts"
cat >"$work/ssh_config" <<EOC
Host lab
	HostName 127.0.0.1
	Port $port
	User root
	IdentityFile $work/id_ed25519
	IdentitiesOnly yes
	UserKnownHostsFile $work/known_hosts
	GlobalKnownHostsFile /dev/null
	StrictHostKeyChecking yes
	BatchMode yes
	LogLevel ERROR
EOC

dsts=(--dst "$SCALE_DST")
[ "$SCALE_DISK" = 1 ] && dsts+=(--dst "$SCALE_DISK_DIR")
trees=${SCALE_TREES:-$work/trees}
mkdir -p "$trees"
chmod 755 "$trees"
date=$(date +%Y-%m-%d)
mkdir -p "$RESULTS"
out="$RESULTS/$date-scale-smallfiles.md"
load=$(cut -d' ' -f1-3 /proc/loadavg)
: >"$work/tables.md"
status=0
for s in $SCALE_SCALES; do
	src="$trees/smallfiles-$s-seed5"
	if [ ! -e "$src.done" ]; then
		rm -rf "$src"
		"$BIN" bench gen --profile smallfiles --scale "$s" --seed 5 "$src" >/dev/null
		touch "$src.done"
	fi
	sync
	# Read the whole tree once, data and inodes, so that the first tool of
	# the first round does not pay for a cold cache the others then find
	# warm (a tree kept from an earlier run, or pushed out by a larger one).
	# Through a pipe: GNU tar whose archive is /dev/null reads no file's
	# data, only the inodes.
	tar -cf - -C "$src" . | cat >/dev/null
	"$BIN" bench scale --binary "$SCALE_BIN" --src "lab:$src" -F "$work/ssh_config" --server-pid "$sshd_pid" \
		"${dsts[@]}" --tools "$SCALE_TOOLS" --runs "$SCALE_RUNS" --title "smallfiles, scale $s, seed 5" \
		--out "$work/table.md" --json "$RESULTS/$date-scale-smallfiles-$s.json" || status=$?
	cat "$work/table.md" >>"$work/tables.md" 2>/dev/null || true
	echo >>"$work/tables.md"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
{
	echo "# restoresync scale benchmark: smallfiles over loopback sshd"
	echo
	echo "$(date -u +%Y-%m-%dT%H:%M:%SZ), \`scripts/scale.sh\`, $SCALE_RUNS rounds, tools interleaved."
	echo
	cat "$work/tables.md"
	echo "## Machine"
	echo
	echo "- CPU: $cpu, $(nproc) cores (client and server share them)"
	echo "- kernel: $(uname -r); load average (1, 5, 15 min) before: $load, after: $load_after (other work on the machine shares the cores; ratios within one round stay comparable)"
	echo "- restoresync $("$SCALE_BIN" --version | awk '{print $NF}'); OpenSSH: $(ssh -V 2>&1); $(rsync --version 2>/dev/null | awk 'NR==1' || true); $(tar --version | head -1)"
	echo "- source: $trees on $(df --output=fstype "$trees" | tail -1), page cache warm; far side: the sshd (PID $sshd_pid) on 127.0.0.1:$port, unshaped loopback"
} >"$out"
echo "scale: wrote $out" >&2
cat "$out"
exit "$status"
