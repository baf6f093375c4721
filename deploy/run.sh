#!/usr/bin/env bash
# Quick start: install what kvstore needs, build it, start one local kvserver
# (RDMA when this machine has an RDMA device, TCP otherwise), show it
# answering through kvctl and redis-cli, then keep serving until Ctrl-C.
#
#   deploy/run.sh [kvserver flags...]     e.g. deploy/run.sh --pool_size=2G
#
# Ports: control (gRPC) 127.0.0.1:7300, data (RESP2) 127.0.0.1:6380, unless
# overridden with --control_port / --resp_port. Loopback needs no set-up; a
# non-loopback --listen needs a client credential (--auth_token_file for data
# clients, --admin_token_file for admins, --users_file for read-only users),
# or --insecure; a cluster node (--etcd) also --cluster_secret_file
# (docs/security.md).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"

case "${1:-}" in -h|--help) sed -n '2,13p' "$0"; exit 0 ;; esac

echo "==> setup (Debian packages; idempotent)"
deploy/setup.sh

echo "==> build (bazel, offline)"
bazel build //server:kvserver //client/kvctl 2>&1 | grep -E '^(ERROR|INFO: Build completed)' || true
BIN=bazel-bin
[[ -x $BIN/server/kvserver && -x $BIN/client/kvctl/kvctl ]] || { echo "build failed" >&2; exit 1; }

READY=$(mktemp -u /tmp/kvserver.ready.XXXXXX)
echo "==> starting kvserver"
"$BIN/server/kvserver" --ready_file="$READY" "$@" &
PID=$!
trap 'kill -TERM $PID 2>/dev/null; wait $PID 2>/dev/null; rm -f "$READY"' EXIT INT TERM
for _ in $(seq 300); do
  [[ -f $READY ]] && break
  kill -0 $PID 2>/dev/null || { echo "kvserver failed to start (see above)" >&2; exit 1; }
  sleep 0.1
done
CTL=127.0.0.1:$(sed -n 's/^control_port=//p' "$READY")
RESP=$(sed -n 's/^resp_port=//p' "$READY")

show() { echo "\$ $*"; "$@"; }
echo "==> it answers:"
show "$BIN/client/kvctl/kvctl" --server="$CTL" put hello "kvstore is running"
show "$BIN/client/kvctl/kvctl" --server="$CTL" get hello; echo
show redis-cli -p "$RESP" GET hello
echo "\$ $BIN/client/kvctl/kvctl --server=$CTL stat"
"$BIN/client/kvctl/kvctl" --server="$CTL" stat | grep -E '^transport|transports|^  kvstore_keys |^  pool ' || true
echo
echo "==> serving: control $CTL, RESP 127.0.0.1:$RESP. Try:"
echo "      $BIN/client/kvctl/kvctl --server=$CTL put k v"
echo "      redis-cli -p $RESP"
echo "    Ctrl-C stops it."
wait $PID
