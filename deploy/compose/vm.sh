#!/usr/bin/env bash
# The compose cluster inside the project's Soft-RoCE VM (tests/rxe), where
# the containers reach kvserver over RDMA on the VM's rxe0.  The host needs
# no RDMA and no running dockerd: the VM runs its own dockerd (host binaries
# over 9p, tests/rxe/guest-dockerd.sh).
#
# Usage: deploy/compose/vm.sh up [options] [-- GUEST-CMD...]
#        deploy/compose/vm.sh run [options] -- GUEST-CMD...
#        (deploy/cluster.sh up --vm ARGS = vm.sh up ARGS)
#
#   up    boots the VM, starts the cluster there with
#         docker-compose.rdma.yml (deploy/cluster.sh up --rdma), runs
#         GUEST-CMD in the VM (default: deploy/cluster.sh status, then
#         deploy/cluster.sh bench over RDMA and over TCP), then
#         deploy/cluster.sh down; the VM powers off.  The VM lives only as
#         long as GUEST-CMD: everything (containers, data) is in its RAM.
#   run   boots the VM with dockerd and the images loaded, runs GUEST-CMD
#         (the cluster is not started; the VM test does that itself)
#
# Options:
#   --no-build      do not run bazel (use bazel-bin as it is)
#   --timeout S     VM timeout (default 1500)
#   --mem MB        VM memory (default 3072)
#   --rw DIR        a directory the guest may write to (repeatable)
#   --env NAME=VAL  pass to the guest (repeatable)
#   -h, --help      this text
#
# Before booting, on the host: bazel build of kvserver, kvctl and
# //tests/cluster:chaos_load (unless --no-build), then build-images.sh --save
# .vm/compose-images (image root file systems as tars; only changed ones are
# rewritten), and deploy/make-certs.sh --dir=.vm/compose-tls (the cluster's
# CA and certificates, made once).  In the guest, deploy/cluster.sh up loads
# the images (KV_IMAGES_FROM) with docker import and copies the certificates
# into the containers' directories (KV_TLS_DIR).
#
# Timings for an emulated CPU (TCG), given to the guest unless already set:
# KV_MEMBER_TTL=15s KV_FENCE_MARGIN=3s KV_ETCD_HEARTBEAT_MS=300
# KV_ETCD_ELECTION_MS=3000 KV_HEALTH_INTERVAL=15s KV_HEALTH_TIMEOUT=30s KV_HEALTH_START=600s
# KV_POOL_SIZE=64M (see docker-compose.yml), COMPOSE_HTTP_TIMEOUT=600,
# KV_STATUS_TIMEOUT=30s KV_OP_TIMEOUT=30s (deploy/cluster.sh, chaos.sh), and
# KV_TLS=off: with TLS on, the kvservers' calls to etcd and their TLS
# handshakes with it ran out of their deadlines under TCG on a loaded host
# ("Handshake timed out", "Range: Deadline Exceeded"), so a node never
# started; the deadlines are kvserver's own (no flag).  --env KV_TLS=on tries
# it anyway (docs/operations.md §13.8).
# Without them kvservers lapse their etcd leases, etcd misses health checks,
# and docker-compose gives up on dockerd (its default 60 s read timeout:
# creating three containers at once takes longer under TCG).
#
# Exit status: GUEST-CMD's (up: 0 only if up, the commands and down
# worked); vm-run.sh's codes for VM problems (124 timeout, 250-254 setup);
# 1 a host-side build failed; 2 bad usage.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
IMAGES=$REPO/.vm/compose-images
TLS=$REPO/.vm/compose-tls
BAZEL=${BAZEL:-bazel}

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
say() { echo "vm.sh: $*" >&2; }
bad_usage() {
    echo "vm.sh: $* (see deploy/compose/vm.sh --help)" >&2
    exit 2
}

# The VM's settings; the caller's values win.
TCG_ENV=(KV_MEMBER_TTL=15s KV_FENCE_MARGIN=3s KV_ETCD_HEARTBEAT_MS=300 KV_ETCD_ELECTION_MS=3000
    KV_HEALTH_INTERVAL=15s KV_HEALTH_TIMEOUT=30s KV_HEALTH_START=600s KV_POOL_SIZE=64M COMPOSE_HTTP_TIMEOUT=600
    KV_STATUS_TIMEOUT=30s KV_OP_TIMEOUT=30s KV_TLS=off)

# --- guest side ------------------------------------------------------------------
# vm.sh guest-up [GUEST-CMD...]: in the VM, cluster up, the commands, down.
guest_up() {
    local rc=0 c=$REPO/deploy/cluster.sh
    "$c" up --rdma --no-build --timeout=600 || {
        diagnose
        "$c" down || true
        return 1
    }
    if (($#)); then
        "$@" || rc=$?
    else
        "$c" status || rc=$?
        "$c" bench --duration=5s --concurrency=4 --value-size=1K --keys=500 --transport=rdma || rc=$?
        "$c" bench --duration=5s --concurrency=4 --value-size=1K --keys=500 --transport=tcp || rc=$?
    fi
    "$c" down || rc=1
    return "$rc"
}

# What went wrong with a cluster that did not come up: every container's
# state and health log, and its last log lines.
diagnose() {
    local id
    docker ps -a --format '{{.Names}} {{.Status}}' >&2 || true
    for id in $(docker ps -aq); do
        echo "--- $(docker inspect -f '{{.Name}} {{.State.Status}} exit={{.State.ExitCode}}' "$id")" >&2
        docker inspect -f '{{if .State.Health}}{{range .State.Health.Log}}health rc={{.ExitCode}} {{.Output}}{{end}}{{end}}' "$id" 2>/dev/null | tail -n 4 >&2
        docker logs --tail 15 "$id" 2>&1 | sed 's/^/  | /' >&2
    done
}

case ${1:-} in
guest-up)
    shift
    guest_up "$@"
    exit
    ;;
guest-diagnose)
    diagnose
    exit 0
    ;;
esac

# --- host side -------------------------------------------------------------------
(($#)) || {
    usage
    exit 2
}
MODE=$1
shift
case $MODE in
up | run) ;;
-h | --help | help) usage && exit 0 ;;
*) bad_usage "unknown command $MODE" ;;
esac
NOBUILD=0 TIMEOUT=1500 MEM=3072 VMARGS=() GUEST=()
while (($#)); do
    case $1 in
    --no-build) NOBUILD=1 ;;
    --timeout) TIMEOUT=${2:?} && shift ;;
    --mem) MEM=${2:?} && shift ;;
    --rw) VMARGS+=(--rw "${2:?}") && shift ;;
    --env) VMARGS+=(--env "${2:?}") && shift ;;
    --)
        shift
        GUEST=("$@")
        break
        ;;
    *) bad_usage "$MODE: unknown option $1" ;;
    esac
    shift
done
[[ $MODE == run && ${#GUEST[@]} -eq 0 ]] && bad_usage "run needs -- GUEST-CMD"

T0=$SECONDS
if ((!NOBUILD)); then
    say "bazel build //server:kvserver //client/kvctl:kvctl //tests/cluster:chaos_load"
    (cd "$REPO" && "$BAZEL" build //server:kvserver //client/kvctl:kvctl //tests/cluster:chaos_load 2>&1 |
        tail -n 2) || {
        say "bazel build failed"
        exit 1
    }
fi
"$REPO/deploy/compose/build-images.sh" --save "$IMAGES" kvstore-server kvstore-client kvstore-etcd >&2 || {
    say "building the image tars failed"
    exit 1
}
# The cluster's CA and certificates, made here (only what is missing): openssl
# under the guest's emulated CPU took 100 s.  The guest's cluster.sh copies
# them into its containers' directories (KV_TLS_DIR).
"$REPO/deploy/make-certs.sh" --dir="$TLS" >&2 || {
    say "making the certificates failed"
    exit 1
}
say "host side ready after $((SECONDS - T0)) s; booting the VM"

ENVS=(--env DOCKER_API_VERSION=1.41 --env "KV_IMAGES_FROM=$IMAGES" --env "KV_TLS_DIR=$TLS"
    --env KV_COMPOSE_STATE=/run/kvstore-compose)
for kv in "${TCG_ENV[@]}"; do
    name=${kv%%=*}
    if [[ -n ${!name:-} ]]; then ENVS+=(--env "$name"); else ENVS+=(--env "$kv"); fi
done
for name in KV_REPLICAS KV_COMPOSE_PROJECT KV_TRANSPORT; do
    [[ -z ${!name:-} ]] || ENVS+=(--env "$name")
done
CMD=("${GUEST[@]}")
[[ $MODE == up ]] && CMD=("$REPO/deploy/compose/vm.sh" guest-up "${GUEST[@]}")
cd "$REPO"
rc=0
"$REPO/tests/rxe/vm-run.sh" --docker --quiet --timeout "$TIMEOUT" --mem "$MEM" \
    "${ENVS[@]}" "${VMARGS[@]}" -- "${CMD[@]}" || rc=$?
say "VM done after $((SECONDS - T0)) s (exit $rc)"
exit "$rc"
