#!/usr/bin/env bash
# make demo: restore a generated hosting account from the embedded
# 'restoresync serve --listen' endpoint on a free loopback port, with default
# settings; print the summary, check the result against the source, and
# show that a rerun sends nothing.
set -euo pipefail
bin=$(realpath "${1:-bin/restoresync}")
scale=${DEMO_SCALE:-0.1}
work=$(mktemp -d "${TMPDIR:-/tmp}/restoresync-demo.XXXXXX")
server=
cleanup() {
	[ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }

step "generating a hosting account (profile hosting, scale $scale) in $work/backup/alice"
"$bin" bench gen --profile hosting --scale "$scale" --seed 1 "$work/backup/alice"

step "starting the backup server: restoresync serve --listen 127.0.0.1:0"
ssh-keygen -q -t ed25519 -N '' -C demo-host -f "$work/host_key"
ssh-keygen -q -t ed25519 -N '' -C demo-admin -f "$work/admin_key"
cp "$work/admin_key.pub" "$work/authorized_keys"
"$bin" serve --listen 127.0.0.1:0 --root "$work/backup" \
	--authorized-keys "$work/authorized_keys" --host-key "$work/host_key" >"$work/serve.out" 2>"$work/serve.err" &
server=$!
for _ in $(seq 100); do
	grep -q '^listening on ' "$work/serve.out" 2>/dev/null && break
	kill -0 "$server" 2>/dev/null || { cat "$work/serve.err" >&2; exit 1; }
	sleep 0.1
done
addr=$(sed -n 's/^listening on \([^,]*\),.*/\1/p' "$work/serve.out")
[ -n "$addr" ] || { echo "demo: the server did not start" >&2; cat "$work/serve.err" >&2; exit 1; }
port=${addr##*:}
echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$work/host_key.pub")" >"$work/known_hosts"
cat "$work/serve.out"

ssh_flags=(-F none -i "$work/admin_key" --known-hosts "$work/known_hosts")
src="ssh://admin@127.0.0.1:$port/alice"
dst="$work/restored/home/alice"

step "restoresync restore $src $dst"
"$bin" restore "${ssh_flags[@]}" "$src" "$dst"

step "checking the restored tree against the source (content, modes, owners, mtimes, links)"
"$bin" bench compare "$work/backup/alice" "$dst"

step "rerun: the quick check finds everything in place"
"$bin" restore "${ssh_flags[@]}" "$src" "$dst"

printf '\ndemo: OK\n'
