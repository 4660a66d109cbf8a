#!/usr/bin/env bash
# Installs the programs the tests use when they are missing: OpenSSH's
# server and client, rsync, GNU tar, the zstd, lz4 and gzip tools (tar
# archive tests), chattr (a per-file failure test), and setfacl, setfattr,
# setcap (xattr, ACL and file capability tests: acl, attr, libcap2-bin), and
# strace (the system-call count of the safe writer). Needs root (CI runs as root);
# otherwise it says what to install.
set -euo pipefail
need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
command -v rsync >/dev/null 2>&1 || need+=(rsync)
command -v tar >/dev/null 2>&1 || need+=(tar)
command -v zstd >/dev/null 2>&1 || need+=(zstd)
command -v lz4 >/dev/null 2>&1 || need+=(lz4)
command -v gzip >/dev/null 2>&1 || need+=(gzip)
command -v chattr >/dev/null 2>&1 || need+=(e2fsprogs)
command -v setfacl >/dev/null 2>&1 || need+=(acl)
command -v setfattr >/dev/null 2>&1 || need+=(attr)
command -v setcap >/dev/null 2>&1 || need+=(libcap2-bin)
command -v strace >/dev/null 2>&1 || need+=(strace)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing ${need[*]}; install them (as root: apt-get install -y ${need[*]})" >&2
	exit 1
fi
echo "deps: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
	{ apt-get update >/dev/null && apt-get install -y --no-install-recommends "${need[@]}" >/dev/null; }
