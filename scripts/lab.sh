#!/usr/bin/env bash
# The benchmark lab behind 'make bench': as root, a network namespace with
# only loopback, an OpenSSH sshd in it as the backup server, a shaped link
# (LAB_RATE with tc HTB on lo for the sshd port; LAB_DELAY each way through
# 'restoresync bench relay', since this kernel has no netem), a generated
# account, then 'restoresync bench run' with the baselines. It writes
# bench/results/<date>-<profile>-<link>.md (and .json, .svg, .png) and tears everything
# down on exit. Without ip/tc (or when a namespace cannot be made) it runs
# over plain, unshaped loopback and says so.
#
#   scripts/lab.sh BIN
#   LAB_RATE=1gbit LAB_DELAY=0.5ms LAB_SCALE=1 LAB_PROFILE=hosting LAB_RUNS=3 \
#   LAB_METHODS=raw,tar,rsync LAB_COMPRESS=none,zstd LAB_JOBS=4 \
#   LAB_BASELINES=rsync,rsync-z,tar-ssh LAB_DELTA=1% scripts/lab.sh bin/restoresync
#   LAB_NETNS=0 scripts/lab.sh bin/restoresync   # plain loopback, no shaping
#   LAB_TMP=/dev/shm scripts/lab.sh bin/restoresync  # destinations on tmpfs
#
# Server CPU is what the lab's sshd reaped from its children during each
# run (bench run --server-pid): sessions with their crypto, and the
# commands, which 'bench rusage' also measures one by one with their peak
# RSS.
set -euo pipefail

BIN=$(realpath "${1:-bin/restoresync}")
LAB_RATE=${LAB_RATE:-1gbit}
LAB_DELAY=${LAB_DELAY:-0.5ms}
LAB_SCALE=${LAB_SCALE:-1}
LAB_PROFILE=${LAB_PROFILE:-hosting}
LAB_RUNS=${LAB_RUNS:-3}
LAB_METHODS=${LAB_METHODS:-raw,tar,rsync}
LAB_COMPRESS=${LAB_COMPRESS:-none,zstd}
LAB_JOBS=${LAB_JOBS:-4}
LAB_BASELINES=${LAB_BASELINES:-rsync,rsync-z,tar-ssh}
LAB_DELTA=${LAB_DELTA:-}
LAB_TMP=${LAB_TMP:-}       # where the destinations go (default: the lab's work dir; /dev/shm for tmpfs)
RESULTS=${LAB_RESULTS:-$(dirname "$0")/../bench/results}

if [ "$(id -u)" != 0 ]; then
	echo "lab: must run as root (sshd, network namespace, tc)" >&2
	exit 1
fi
[ -x "$BIN" ] || { echo "lab: $BIN is not executable (make build)" >&2; exit 1; }
[ -x /usr/sbin/sshd ] || { echo "lab: /usr/sbin/sshd missing (make deps)" >&2; exit 1; }

work=$(mktemp -d /tmp/restoresync-lab.XXXXXX)
chmod 755 "$work"
ns=""
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	[ -n "$ns" ] && ip netns del "$ns" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

run=()   # prefix that runs a command in the lab's network
link="loopback"
mode="loopback"
if [ "${LAB_NETNS:-1}" != 0 ] && command -v ip >/dev/null && command -v tc >/dev/null && ip netns add "restoresync-lab-$$" 2>/dev/null; then
	ns="restoresync-lab-$$"
	run=(ip netns exec "$ns")
	mode="netns"
	"${run[@]}" ip link set lo up
else
	[ "${LAB_NETNS:-1}" = 0 ] || echo "lab: ip/tc missing or no network namespaces here: plain unshaped loopback, no LAB_RATE/LAB_DELAY" >&2
fi

# Ports: fixed inside the private namespace, free ones on the host's loopback.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)); }
if [ "$mode" = netns ]; then sshd_port=2222; relay_port=2223; else sshd_port=$(free_port); relay_port=$sshd_port; fi

ssh-keygen -q -t ed25519 -N '' -f "$work/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$work/id_ed25519"
cp "$work/id_ed25519.pub" "$work/authorized_keys"
mkdir -p /run/sshd
cat >"$work/sshd_config" <<EOF
ListenAddress 127.0.0.1:$sshd_port
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
Subsystem sftp internal-sftp
MaxStartups 100
LogLevel ERROR
EOF
"${run[@]}" /usr/sbin/sshd -D -e -f "$work/sshd_config" 2>"$work/sshd.log" &
sshd_pid=$!   # ip netns exec execs sshd: this is the listener, whose reaped children are the far side
pids+=($sshd_pid)

if [ "$mode" = netns ]; then
	# The shaped link: sshd's traffic both ways in an HTB class at
	# LAB_RATE, at an Ethernet-like MTU; everything else unshaped.
	"${run[@]}" ip link set lo mtu 1500
	"${run[@]}" tc qdisc add dev lo root handle 1: htb default 10
	"${run[@]}" tc class add dev lo parent 1: classid 1:10 htb rate 100gbit
	"${run[@]}" tc class add dev lo parent 1: classid 1:20 htb rate "$LAB_RATE" ceil "$LAB_RATE"
	"${run[@]}" tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip sport "$sshd_port" 0xffff flowid 1:20
	"${run[@]}" tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip dport "$sshd_port" 0xffff flowid 1:20
	link="${LAB_RATE}-${LAB_DELAY}"
	"${run[@]}" "$BIN" bench relay --listen "127.0.0.1:$relay_port" --to "127.0.0.1:$sshd_port" --delay "$LAB_DELAY" 2>"$work/relay.log" &
	pids+=($!)
fi

for _ in $(seq 100); do
	"${run[@]}" bash -c "exec 3<>/dev/tcp/127.0.0.1/$relay_port" 2>/dev/null && break
	sleep 0.1
done
echo "[127.0.0.1]:$relay_port $(cut -d' ' -f1,2 "$work/host_key.pub")" >"$work/known_hosts"
cat >"$work/ssh_config" <<EOF
Host lab
	HostName 127.0.0.1
	Port $relay_port
	User root
	IdentityFile $work/id_ed25519
	IdentitiesOnly yes
	UserKnownHostsFile $work/known_hosts
	GlobalKnownHostsFile /dev/null
	StrictHostKeyChecking yes
	BatchMode yes
	LogLevel ERROR
EOF

src="$work/src"
LAB_TMP=${LAB_TMP:-$work}
"$BIN" bench gen --profile "$LAB_PROFILE" --scale "$LAB_SCALE" --seed 1 "$src"

date=$(date +%Y-%m-%d)
mkdir -p "$RESULTS"
name="$date-$LAB_PROFILE-$link"
out="$RESULTS/$name.md"
delta=()
[ -n "$LAB_DELTA" ] && delta=(--delta "$LAB_DELTA")
load=$(cut -d' ' -f1-3 /proc/loadavg)
"${run[@]}" "$BIN" bench run --src "lab:$src" -F "$work/ssh_config" --remote-path "$BIN" --server-pid "$sshd_pid" \
	--methods "$LAB_METHODS" --compress "$LAB_COMPRESS" --jobs "$LAB_JOBS" --baselines "$LAB_BASELINES" \
	--runs "$LAB_RUNS" "${delta[@]}" --tmp "$LAB_TMP" --format json --out "$RESULTS/$name.json" || status=$?
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
"$BIN" bench report --in "$RESULTS/$name.json" --format markdown --out "$work/table.md" \
	--chart "$RESULTS/$name.svg" --chart "$RESULTS/$name.png"

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
cipher=$(ssh -F "$work/ssh_config" -G lab 2>/dev/null | awk '$1=="ciphers"{print $2}' | cut -d, -f1)
{
	echo "# restoresync bench: $LAB_PROFILE scale $LAB_SCALE, $link"
	echo
	echo "$(date -u +%Y-%m-%dT%H:%M:%SZ), \`scripts/lab.sh\` ($mode)."
	echo
	cat "$work/table.md"
	echo
	echo "![median wall time per row]($name.png)"
	echo
	echo "Also: [$name.svg]($name.svg), and every figure in [$name.json]($name.json) ('restoresync bench report --in $name.json' writes the table and charts again)."
	echo
	echo "## Machine"
	echo
	echo "- CPU: $cpu, $(nproc) cores (client and server share them)"
	echo "- kernel: $(uname -r); load average (1, 5, 15 min) before the run: $load, after: $load_after (other work on the machine shares the cores and skews the numbers; ratios within one run stay comparable)"
	echo "- Go: $(go version 2>/dev/null | awk '{print $3}' || echo unknown); restoresync $("$BIN" --version | awk '{print $NF}')"
	echo "- OpenSSH: $(ssh -V 2>&1)"
	echo "- rsync: $(rsync --version 2>/dev/null | awk 'NR==1' || true)"
	echo "- SSH cipher: OpenSSH client (baselines) ${cipher:-default}; restoresync's built-in client prefers aes128-gcm@openssh.com"
	if [ "$mode" = netns ]; then
		echo "- link: network namespace loopback, MTU 1500, tc HTB $LAB_RATE on the sshd port, $LAB_DELAY each way by a TCP relay (no netem in this kernel; the relay's CPU is the link's, counted on neither side)"
	echo "- destinations: $LAB_TMP; server CPU: what the lab's sshd (PID $sshd_pid) reaped from its children during each run (sessions with their crypto, and the commands); server RSS: the wrapped commands' (bench rusage)"
	else
		echo "- link: plain loopback, unshaped (LAB_NETNS=0, or ip/tc/network namespaces unavailable)"
	fi
} >"$out"
echo "lab: wrote $out" >&2
cat "$out"
exit "${status:-0}"
