#!/usr/bin/env bash
# Starts dockerd inside the Soft-RoCE VM (vm-run.sh --docker runs it before
# the command).  Runs in the guest, as root, in the host's tree (9p root with
# a RAM overlay): dockerd, containerd, runc and docker-compose are the host's
# binaries; nothing is installed in the guest.
#
# Usage (guest only): tests/rxe/guest-dockerd.sh [--log FILE]
#
#   --log FILE   dockerd's output (default /run/dockerd.log, in guest RAM;
#                give a file under a --rw directory to keep it)
#
# What it sets up, and why:
#   * cgroup2 on /sys/fs/cgroup: vm-init mounts no cgroup file system, and
#     runc needs one (v2 works with this kernel and runc);
#   * tmpfs on /var/lib/docker, /var/lib/containerd and /etc/docker: the
#     root's overlay has 9p below it, and overlay2 cannot stack on that;
#     tmpfs takes overlay2 (and keeps the host's /etc/docker/daemon.json,
#     made for the host, out of the guest's dockerd);
#   * RLIMIT_MEMLOCK unlimited for dockerd and so for every container it
#     starts: a container's `ulimits: memlock: -1` cannot go above dockerd's
#     own hard limit (runc: "error setting rlimit type 8"), and registering a
#     kvserver pool with ibv_reg_mr locks all of it;
#   * dockerd --iptables=false --ip-masq=false: the guest has the nf_tables
#     modules for the embedded DNS's per-container rules (vm-init loads them
#     with kvvm.docker=1), not the full set docker's NAT rules need; nothing
#     in the VM has to reach past the bridge.
# The socket is the default /run/docker.sock (/var/run is a link to /run).
#
# Exit status: 0 dockerd answers `docker info`; 1 it did not within 90 s
# (the last lines of its log are printed); 2 bad usage.
set -euo pipefail

LOG=/run/dockerd.log
case ${1:-} in
--log) LOG=${2:?--log needs a file} ;;
"") ;;
-h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" && exit 0 ;;
*) echo "guest-dockerd: unknown argument $1" >&2 && exit 2 ;;
esac
say() { echo "guest-dockerd: $*" >&2; }
uptime_s() { cut -d' ' -f1 /proc/uptime; }

# devtmpfs has no /dev/fd: bash's process substitution (<(...)), which
# docker-compose's and our scripts' helpers use, needs it.
[[ -e /dev/fd ]] || ln -s /proc/self/fd /dev/fd
if ! grep -q ' /sys/fs/cgroup cgroup2 ' /proc/mounts; then
    mkdir -p /sys/fs/cgroup
    mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup
fi
for d in /var/lib/docker /var/lib/containerd /etc/docker; do
    mkdir -p "$d"
    mount -t tmpfs -o mode=0711 tmpfs "$d"
done
ulimit -l unlimited
ulimit -n 1048576 2>/dev/null || true

export DOCKER_API_VERSION=${DOCKER_API_VERSION:-1.41}
t0=$(uptime_s)
setsid dockerd --storage-driver=overlay2 --iptables=false --ip-masq=false \
    --host unix:///run/docker.sock >"$LOG" 2>&1 </dev/null &
pid=$!
for ((i = 0; i < 180; i++)); do
    if docker info >/dev/null 2>&1; then
        say "dockerd $(docker version -f '{{.Server.Version}}' 2>/dev/null) up (pid $pid, $(awk -v a="$t0" -v b="$(uptime_s)" 'BEGIN{printf "%.1f", b-a}') s)"
        exit 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
done
tail -n 20 "$LOG" >&2
say "dockerd did not answer"
exit 1
