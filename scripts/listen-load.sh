#!/bin/sh
# listen-load.sh: N concurrent restores of one small account against one
# 'restoresync serve --listen', the server's peak and settled RSS, and every
# result compared with the source (bench compare). For the README's figures;
# not part of the tests.
#
#   scripts/listen-load.sh [BIN [N [SERVE_FLAGS...]]]
#
# BIN defaults to bin/restoresync, N to 100. Settled RSS is read 15 s after
# the last restore ended. Needs ssh-keygen. Work files go in a temporary
# directory, removed at the end.
set -eu
bin=$(realpath "${1:-bin/restoresync}")
n=${2:-100}
shift 2 2>/dev/null || shift $#
w=$(mktemp -d)
trap 'kill "$srv" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$w"' EXIT
mkdir -p "$w/root" "$w/dst"
"$bin" bench gen --profile hosting --scale 0.01 --seed 1 "$w/root/alice" 2>"$w/gen.log"
ssh-keygen -q -t ed25519 -N '' -f "$w/host" && ssh-keygen -q -t ed25519 -N '' -f "$w/id"
cp "$w/id.pub" "$w/authorized_keys"
"$bin" serve --listen 127.0.0.1:0 --root "$w/root" --authorized-keys "$w/authorized_keys" \
	--host-key "$w/host" "$@" >"$w/serve.out" 2>"$w/serve.log" &
srv=$!
for _ in $(seq 100); do grep -q listening "$w/serve.out" && break; sleep 0.1; done
port=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\),.*/\1/p' "$w/serve.out")
echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$w/host.pub")" >"$w/known_hosts"
rss() { awk -v k="$1" '$1 == k":" { print int($2/1024) }' "/proc/$srv/status"; }
echo "tree: $(cat "$w/gen.log")"
echo "server RSS before: $(rss VmRSS) MiB"
start=$(date +%s.%N)
i=0 pids=
while [ "$i" -lt "$n" ]; do
	"$bin" restore -F none -i "$w/id" --known-hosts "$w/known_hosts" --json \
		"ssh://restore@127.0.0.1:$port/alice" "$w/dst/$i" >"$w/out.$i" 2>"$w/err.$i" &
	pids="$pids $!"
	i=$((i + 1))
done
for p in $pids; do wait "$p" || true; done
end=$(date +%s.%N)
peak=$(rss VmHWM)
echo "peak RSS: $peak MiB; RSS at the end: $(rss VmRSS) MiB; $(echo "$end - $start" | bc) s for $n restores"
ok=0 bad=0
i=0
while [ "$i" -lt "$n" ]; do
	if grep -q '"exit_code":0' "$w/out.$i" && "$bin" bench compare "$w/root/alice" "$w/dst/$i" >/dev/null 2>&1; then
		ok=$((ok + 1))
	else
		bad=$((bad + 1))
		echo "restore $i: $(cat "$w/out.$i" "$w/err.$i" | head -c 400)"
	fi
	i=$((i + 1))
done
echo "results equal to the source: $ok of $n ($bad differ or failed)"
sleep 15
echo "settled RSS (15 s after): $(rss VmRSS) MiB"
grep -c refused "$w/serve.log" | sed 's/^/server log lines "refused": /'
