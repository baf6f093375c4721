#!/usr/bin/env bash
# Run a server command and a client command in two Soft-RoCE VMs that share a
# private Ethernet segment, so RDMA traffic really crosses a (virtual) wire.
#
# Usage: tests/rxe/run-two-vm.sh --server-cmd 'CMD' --client-cmd 'CMD' [options]
#   e.g. tests/rxe/run-two-vm.sh --server-cmd 'ib_read_bw -d rxe0' \
#            --client-cmd 'sleep 3; ib_read_bw -d rxe0 $KV_RDMA_PEER_IP'
#
#   VM A ("server"): qemu -netdev socket,listen=127.0.0.1:PORT, eth0 10.0.2.15/24,
#                    MAC 52:54:00:12:34:56, runs the server command;
#   VM B ("client"): -netdev socket,connect=127.0.0.1:PORT, eth0 10.0.2.16/24,
#                    MAC 52:54:00:12:34:57, started once VM A listens, runs the
#                    client command.
# Both commands run with `bash -c` as root in the current directory, with
# KV_RDMA_DEVICE=rxe0, KV_RDMA_ROLE=server|client, KV_RDMA_IP (own address)
# and KV_RDMA_PEER_IP (the other VM).  Nothing tells the client when the server
# is ready: the client command must wait/retry (e.g. ping the server first).
# Output lines are prefixed with "[server] " / "[client] ".
#
# When the client has finished, the server gets --server-grace seconds to end
# by itself; then its VM is shut down (killed: it is a throw-away VM).
#
# Options:
#   --server-cmd CMD   command line for VM A (required)
#   --client-cmd CMD   command line for VM B (required)
#   --timeout S        client VM timeout (default 900); the server VM gets S+60
#   --server-grace S   see above (default 5)
#   --port N           TCP port on 127.0.0.1 for the link (default: a free one)
#   --rw DIR           writable host directory in both VMs (repeatable)
#   --env NAME=VAL     environment for both commands (repeatable)
#   --mem MB, --smp N  size of each VM (default 2048 MB and 1 vCPU each: two
#                      VMs on a 2-core host run faster with one vCPU apiece)
#   --server-log FILE, --client-log FILE   save the VMs' console logs
#   --server-status FILE  write the server VM's exit status (or "stopped") there
#   --quiet            only the commands' output
#   -h, --help         this text
#
# Exit status: the client's (as from vm-run.sh: the command's status, 124 on
# timeout, 250-254 VM setup failures); 125 bad usage or qemu missing; if the
# server VM fails before the client is started, the server VM's status.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SERVER_CMD=
CLIENT_CMD=
TIMEOUT=900
GRACE=5
PORT=
COMMON=()
QUIET=()
SERVER_LOG=
CLIENT_LOG=
SERVER_STATUS=

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
msg() { echo "run-two-vm: $*" >&2; }
bad_usage() {
    msg "$* (see --help)"
    exit 125
}

while (($#)); do
    case "$1" in
    --server-cmd | --client-cmd | --timeout | --server-grace | --port | --rw | --env | --mem | --smp | \
        --server-log | --client-log | --server-status)
        (($# >= 2)) || bad_usage "$1 needs an argument"
        case "$1" in
        --server-cmd) SERVER_CMD=$2 ;;
        --client-cmd) CLIENT_CMD=$2 ;;
        --timeout) TIMEOUT=$2 ;;
        --server-grace) GRACE=$2 ;;
        --port) PORT=$2 ;;
        --rw | --env | --mem | --smp) COMMON+=("$1" "$2") ;;
        --server-log) SERVER_LOG=$2 ;;
        --client-log) CLIENT_LOG=$2 ;;
        --server-status) SERVER_STATUS=$2 ;;
        esac
        shift 2
        ;;
    --quiet) QUIET=(--quiet) && shift ;;
    -h | --help) usage && exit 0 ;;
    *) bad_usage "unknown argument $1" ;;
    esac
done
[[ -n $SERVER_CMD && -n $CLIENT_CMD ]] || bad_usage "--server-cmd and --client-cmd are required"
[[ $TIMEOUT =~ ^[0-9]+$ && $GRACE =~ ^[0-9]+$ ]] || bad_usage "--timeout/--server-grace take numbers"
command -v "${KV_VM_QEMU:-qemu-system-x86_64}" >/dev/null || bad_usage "qemu-system-x86_64 not found"
[[ " ${COMMON[*]-} " == *" --smp "* ]] || COMMON+=(--smp 1)

# Build the image once up front, so the two VMs do not both wait on it.
"$HERE/build-image.sh" >/dev/null 2>&1 || "$HERE/build-image.sh" || exit 250

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvtwovm.XXXXXX")
SERVER_PID=
CLIENT_PID=
cleanup() {
    local p
    for p in $CLIENT_PID $SERVER_PID; do kill -TERM "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'msg interrupted; exit 130' INT
trap 'msg terminated; exit 143' TERM HUP

listening() { [[ -n $(ss -Hltn "sport = :$1" 2>/dev/null) ]]; }
free_port() {
    local p
    for _ in $(seq 50); do
        p=$((20000 + RANDOM % 40000))
        listening "$p" || {
            echo "$p"
            return 0
        }
    done
    return 1
}

# start_server PORT: VM A in the background (SERVER_PID is its vm-run.sh)
start_server() {
    local port=$1
    "$HERE/vm-run.sh" "${QUIET[@]}" "${COMMON[@]}" --timeout $((TIMEOUT + 60)) \
        --netdev "socket,listen=127.0.0.1:$port" --ip 10.0.2.15/24 --mac 52:54:00:12:34:56 \
        --log "$WORK/server-console.log" \
        --env KV_RDMA_DEVICE=rxe0 --env KV_RDMA_ROLE=server \
        --env KV_RDMA_IP=10.0.2.15 --env KV_RDMA_PEER_IP=10.0.2.16 \
        -- bash -c "$SERVER_CMD" > >(sed -u 's/^/[server] /') 2>&1 &
    SERVER_PID=$!
}
# bash reaps finished background jobs itself, so kill -0 fails once it ended
server_running() { kill -0 "$SERVER_PID" 2>/dev/null; }

# VM A must be listening before VM B connects (qemu binds the port right
# away, before the guest boots).  Retry with another port if it was taken.
t0=$(date +%s)
for _ in 1 2 3; do
    port=${PORT:-$(free_port)} || bad_usage "no free TCP port found"
    rm -f "$WORK/server-console.log"
    start_server "$port"
    for _ in $(seq 300); do
        listening "$port" && break
        server_running || break
        sleep 0.1
    done
    listening "$port" && break
    src=0
    wait "$SERVER_PID" || src=$?
    SERVER_PID=
    if [[ -z $PORT ]] && grep -q 'Address already in use' "$WORK/server-console.log" 2>/dev/null; then
        msg "port $port was taken, retrying"
        continue
    fi
    msg "server VM did not start listening on 127.0.0.1:$port (exit $src)"
    [[ -n $SERVER_STATUS ]] && echo "$src" >"$SERVER_STATUS"
    exit "$src"
done
msg "link 127.0.0.1:$port: server VM listening; starting client VM"

"$HERE/vm-run.sh" "${QUIET[@]}" "${COMMON[@]}" --timeout "$TIMEOUT" \
    --netdev "socket,connect=127.0.0.1:$port" --ip 10.0.2.16/24 --mac 52:54:00:12:34:57 \
    --log "$WORK/client-console.log" \
    --env KV_RDMA_DEVICE=rxe0 --env KV_RDMA_ROLE=client \
    --env KV_RDMA_IP=10.0.2.16 --env KV_RDMA_PEER_IP=10.0.2.15 \
    -- bash -c "$CLIENT_CMD" > >(sed -u 's/^/[client] /') 2>&1 &
CLIENT_PID=$!
crc=0
wait "$CLIENT_PID" || crc=$?
CLIENT_PID=

# Give the server a moment to finish on its own, then stop its VM
# (vm-run.sh kills its qemu on SIGTERM and exits 143).
for _ in $(seq $((GRACE * 10))); do
    server_running || break
    sleep 0.1
done
stopped=0
if server_running; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    stopped=1
fi
src=0
wait "$SERVER_PID" || src=$?
SERVER_PID=
if ((stopped)); then
    server_state=stopped
    msg "server VM still running ${GRACE}s after the client finished: stopped"
else
    server_state=$src
    msg "server VM exited with $src"
fi

[[ -n $SERVER_STATUS ]] && echo "$server_state" >"$SERVER_STATUS"
[[ -n $SERVER_LOG && -f $WORK/server-console.log ]] && cp "$WORK/server-console.log" "$SERVER_LOG"
[[ -n $CLIENT_LOG && -f $WORK/client-console.log ]] && cp "$WORK/client-console.log" "$CLIENT_LOG"
msg "client exit $crc; both VMs done in $(($(date +%s) - t0))s"
exit "$crc"
