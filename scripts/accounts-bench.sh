#!/usr/bin/env bash
# The multi-account benchmark at a small scale, on loopback through a real
# sshd: N accounts of 'bench gen --profile hosting --scale S' restored
# (1) with one 'restore --accounts' run, (2) with a shell loop of N
# 'restore --account NAME' runs, (3) as one tree holding the same files.
# Prints, for each run (RUNS times, default 1): its wall time, the SSH
# connections sshd accepted for it (counted in its log), the agents
# started on the backup side, the peak RSS of the client and of the
# largest agent, and, for --accounts, when the first and the last account
# were done. Needs root (useradd, sshd); removes its users.
# Usage: scripts/accounts-bench.sh [bin/restoresync]  (ACCOUNTS=N SCALE=S RUNS=R LOOP=0 skips the shell loop)
# LAB=1 runs on the lab's link instead of plain loopback, as scripts/lab.sh
# builds it: sshd and every run in a network namespace, sshd's traffic
# shaped to LAB_RATE (default 1gbit) by tc HTB at MTU 1500, LAB_DELAY
# (default 0.5ms) each way through 'restoresync bench relay'.
set -euo pipefail
bin=$(realpath "${1:-bin/restoresync}")
n=${ACCOUNTS:-20}
scale=${SCALE:-0.02}
runs=${RUNS:-1}
work=$(mktemp -d "${TMPDIR:-/tmp}/restoresync-accounts.XXXXXX")
sshd_pid=
relay_pid=
ns=
run=()
users=()
cleanup() {
	[ -n "$sshd_pid" ] && kill "$sshd_pid" 2>/dev/null
	[ -n "$relay_pid" ] && kill "$relay_pid" 2>/dev/null
	[ -n "$ns" ] && ip netns del "$ns" 2>/dev/null
	for u in "${users[@]}"; do userdel "$u" 2>/dev/null || true; groupdel "$u" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

for i in $(seq "$n"); do
	u=$(printf 'rsbench%03d' "$i")
	useradd -U -M -s /usr/sbin/nologin -d /nonexistent "$u"
	users+=("$u")
	"$bin" bench gen --profile hosting --scale "$scale" --seed "$i" "$work/snap/home/$u" >/dev/null
	mkdir -p "$work/one"
	cp -a "$work/snap/home/$u" "$work/one/$u"
done
printf '%s\n' "${users[@]}" >"$work/accounts.txt"

mkdir -p /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$work/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$work/id"
cp "$work/id.pub" "$work/authorized_keys"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
if [ "${LAB:-0}" = 1 ]; then
	ns="restoresync-accounts-$$"
	ip netns add "$ns"
	run=(ip netns exec "$ns")
	"${run[@]}" ip link set lo up
	port=2222
fi
cat >"$work/sshd_config" <<CFG
ListenAddress 127.0.0.1:$port
HostKey $work/host_key
AuthorizedKeysFile $work/authorized_keys
PidFile $work/sshd.pid
UsePAM no
StrictModes no
PasswordAuthentication no
PermitRootLogin yes
MaxSessions 100
MaxStartups 100
LogLevel INFO
CFG
"${run[@]}" /usr/sbin/sshd -D -e -f "$work/sshd_config" 2>"$work/sshd.log" &
sshd_pid=$!
link="plain loopback"
if [ -n "$ns" ]; then
	rate=${LAB_RATE:-1gbit} delay=${LAB_DELAY:-0.5ms}
	"${run[@]}" ip link set lo mtu 1500
	"${run[@]}" tc qdisc add dev lo root handle 1: htb default 10
	"${run[@]}" tc class add dev lo parent 1: classid 1:10 htb rate 100gbit
	"${run[@]}" tc class add dev lo parent 1: classid 1:20 htb rate "$rate" ceil "$rate"
	"${run[@]}" tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip sport 2222 0xffff flowid 1:20
	"${run[@]}" tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip dport 2222 0xffff flowid 1:20
	"${run[@]}" "$bin" bench relay --listen 127.0.0.1:2223 --to 127.0.0.1:2222 --delay "$delay" 2>"$work/relay.log" &
	relay_pid=$!
	port=2223
	link="lab link: $rate, $delay each way, in a network namespace"
fi
for _ in $(seq 100); do "${run[@]}" bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null && break; sleep 0.05; done
echo "[127.0.0.1]:$port $(cat "$work/host_key.pub")" >"$work/known_hosts"
# The agent, through a wrapper that books each start and its peak RSS.
printf '#!/bin/sh\nexec /usr/bin/time -a -o %s -f %%M %s "$@"\n' "$work/agents" "$bin" >"$work/agent"
chmod 755 "$work/agent"
ssh=(-F none -i "$work/id" --known-hosts "$work/known_hosts" --remote-path "$work/agent" --config none --progress none)
url="ssh://root@127.0.0.1:$port$work/snap/home"

conns() { grep -c 'Accepted publickey' "$work/sshd.log" || true; }
measure() { # name, command...
	local name=$1 before after start end done
	shift
	sync # no run pays for the writeback of the one before
	before=$(conns)
	: >"$work/agents"
	start=$(date +%s.%N)
	"${run[@]}" /usr/bin/time -o "$work/$name.rss" -f %M "$@" >"$work/$name.out" 2>"$work/$name.err" || echo "$name: exit $? (see below)"
	end=$(date +%s.%N)
	after=$(conns)
	done=$(grep -o 'first done after [0-9.]*s ([^)]*), last after [0-9.]*s' "$work/$name.out" | sed 's/ ([^)]*)//' || true)
	printf '%-10s %8.2f s  %4d SSH connections  %4d agents  RSS client %6d KB, agent %6d KB  %s\n' "$name" \
		"$(echo "$end - $start" | bc)" "$((after - before))" "$(wc -l <"$work/agents")" \
		"$(cat "$work/$name.rss")" "$(sort -n "$work/agents" | tail -1)" "$done"
}

echo "$n accounts, bench gen --profile hosting --scale $scale, $(du -sh "$work/snap" | cut -f1) in all, $link"
{ # the shell loop, as a script: time(1) runs it
	printf 'set -e\n'
	for u in "${users[@]}"; do printf '%q ' "$bin" restore "${ssh[@]}" --account "$u" "$url/$u" "$work/dst2/$u"; printf '\n'; done
} >"$work/loop.sh"
for r in $(seq "$runs"); do
	rm -rf "$work"/dst*
	measure accounts "$bin" restore "${ssh[@]}" --accounts-from "$work/accounts.txt" "$url/{account}" "$work/dst1/{account}"
	[ "${LOOP:-1}" = 0 ] || measure loop bash "$work/loop.sh"
	measure one-tree "$bin" restore "${ssh[@]}" "ssh://root@127.0.0.1:$port$work/one" "$work/dst3"
	measure given "$bin" restore "${ssh[@]}" --order given --accounts-from "$work/accounts.txt" "$url/{account}" "$work/dst4/{account}"
done
tail -n 3 "$work/accounts.out" "$work/given.out"
