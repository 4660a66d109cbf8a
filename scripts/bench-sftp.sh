#!/usr/bin/env bash
# The sftp method against the raw method and OpenSSH's 'sftp -r' (get -pr),
# in one run, over one OpenSSH sshd on loopback (its internal-sftp for SFTP,
# the agent BIN for raw), on the hosting and smallfiles profiles: each
# restore runs RUNS times into a fresh DST and the median wall time is
# printed, with MB/s of the tree's payload. With DELAY (e.g. 500us) the
# clients reach sshd through 'restoresync bench relay', which adds DELAY
# each way (the lab's link without its rate limit). Needs root (sshd) and
# /usr/sbin/sshd, ssh-keygen, sftp.
#
#   [DELAY=500us] scripts/bench-sftp.sh [BIN [SCALE [RUNS]]]    (defaults: bin/restoresync 0.1 3)
set -euo pipefail
bin=$(realpath "${1:-bin/restoresync}")
scale=${2:-0.1}
runs=${3:-3}
work=$(mktemp -d /tmp/restoresync-bench-sftp.XXXXXX)
sshd=
relay=
cleanup() {
	[ -n "$relay" ] && kill "$relay" 2>/dev/null && wait "$relay" 2>/dev/null
	[ -n "$sshd" ] && kill "$sshd" 2>/dev/null && wait "$sshd" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

ssh-keygen -q -t ed25519 -N '' -f "$work/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$work/id"
cp "$work/id.pub" "$work/authorized_keys"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$work/sshd_config" <<EOF
ListenAddress 127.0.0.1:$port
HostKey $work/host_key
AuthorizedKeysFile $work/authorized_keys
PidFile $work/sshd.pid
UsePAM no
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin yes
MaxSessions 100
MaxStartups 100
LogLevel ERROR
Subsystem sftp internal-sftp
EOF
mkdir -p /run/sshd
/usr/sbin/sshd -D -e -f "$work/sshd_config" 2>"$work/sshd.log" &
sshd=$!
for _ in $(seq 100); do
	(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
	sleep 0.05
done
if [ -n "${DELAY:-}" ]; then
	"$bin" bench relay --listen 127.0.0.1:0 --to "127.0.0.1:$port" --delay "$DELAY" 2>"$work/relay.log" &
	relay=$!
	for _ in $(seq 100); do
		grep -q '^relay: ' "$work/relay.log" 2>/dev/null && break
		sleep 0.05
	done
	port=$(sed -n 's/^relay: 127.0.0.1:\([0-9]*\) .*/\1/p' "$work/relay.log")
fi
echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$work/host_key.pub")" >"$work/known_hosts"
user=$(id -un)
conn=(-F none -i "$work/id" --known-hosts "$work/known_hosts")
sftpopts=(-F /dev/null -i "$work/id" -P "$port" -o UserKnownHostsFile="$work/known_hosts" -o GlobalKnownHostsFile=/dev/null -o BatchMode=yes)

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# timed NAME CMD...: runs CMD RUNS times, each into a fresh $work/dst,
# and prints the median seconds.
timed() {
	local name=$1
	shift
	for _ in $(seq "$runs"); do
		rm -rf "$work/dst"
		local t0 t1
		t0=$(date +%s.%N)
		"$@" >/dev/null 2>"$work/err" || {
			echo "$name failed:" >&2
			cat "$work/err" >&2
			exit 1
		}
		t1=$(date +%s.%N)
		echo "$t1 - $t0" | bc
	done | median
}

printf '%-11s %-10s %8s %10s %10s\n' profile method seconds MB/s vs_raw
for profile in hosting smallfiles; do
	tree="$work/backup/$profile"
	"$bin" bench gen --profile "$profile" --scale "$scale" --seed 1 "$tree" >/dev/null 2>&1
	mb=$(du -sb --apparent-size "$tree" | awk '{print $1/1e6}')
	url="ssh://$user@127.0.0.1:$port$tree"
	raw=$(timed raw "$bin" restore --method raw --remote-path "$bin" "${conn[@]}" "$url" "$work/dst")
	sftpm=$(timed sftp "$bin" restore --method sftp "${conn[@]}" "$url" "$work/dst")
	echo "get -pr $tree $work/dst" >"$work/batch"
	sftpr=$(timed 'sftp -r' sftp -q -b "$work/batch" "${sftpopts[@]}" "$user@127.0.0.1")
	for row in "raw $raw" "sftp $sftpm" "sftp-r $sftpr"; do
		set -- $row
		printf '%-11s %-10s %8.2f %10.1f %9.0f%%\n' "$profile" "$1" "$2" "$(echo "$mb / $2" | bc -l)" "$(echo "100 * $raw / $2" | bc -l)"
	done
done
