#!/usr/bin/env bash
# Side-by-side throughput of kvserver and Debian's redis-server, measured in
# one run with the same third-party client (redis-benchmark), plus kvctl bench
# against kvserver. Prints a table; a benchmark, not a test (nothing is gated).
#
#   tests/bench/resp_vs_redis.sh [--quick] [--json FILE]
#
# Workloads (redis-benchmark -t set,get, 32 connections, random keys from a
# 10k key space): 4 KiB values; 4 KiB values with pipelining 16; 1 MiB values.
# Then kvctl bench (GET-only and PUT-only) with the same value sizes.
# Everything binds 127.0.0.1 with ports picked here.
set -euo pipefail
cd "$(dirname "$0")/../.."

QUICK=0
JSON_OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --json) JSON_OUT="$2"; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

for tool in redis-server redis-benchmark bazel; do
  command -v "$tool" >/dev/null || { echo "missing $tool: run deploy/setup.sh" >&2; exit 1; }
done

echo "==> building kvserver and kvctl"
bazel build -c opt //server:kvserver //client/kvctl 2>&1 | tail -1
BIN=$(bazel info -c opt bazel-bin 2>/dev/null)

WORK=$(mktemp -d /tmp/kvbench.XXXXXX)
cleanup() {
  [[ -n "${REDIS_PID:-}" ]] && kill "$REDIS_PID" 2>/dev/null || true
  [[ -n "${KV_PID:-}" ]] && kill "$KV_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
  --protected-mode no --daemonize no --logfile "$WORK/redis.log" &
REDIS_PID=$!

"$BIN/server/kvserver" --control_port=0 --resp_port=0 --pool_size=8G --transport=tcp \
  --ready_file="$WORK/kv.ready" 2>"$WORK/kvserver.log" &
KV_PID=$!
for _ in $(seq 600); do [[ -f "$WORK/kv.ready" ]] && break; sleep 0.1; done
[[ -f "$WORK/kv.ready" ]] || { cat "$WORK/kvserver.log"; exit 1; }
KV_RESP=$(sed -n 's/^resp_port=//p' "$WORK/kv.ready")
KV_CTL=$(sed -n 's/^control_port=//p' "$WORK/kv.ready")
for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

echo "==> machine: $(nproc) cores, $(uname -r); redis $(redis-server --version | awk '{print $3}')"
echo "    kvserver: $(head -c 300 "$WORK/kvserver.log" | grep -o 'kvserver up.*' | cut -c1-160)"

if [[ $QUICK == 1 ]]; then N4K=50000; NPIPE=200000; N1M=500; DUR=3s; else N4K=200000; NPIPE=1000000; N1M=2000; DUR=10s; fi

RESULTS="$WORK/results.csv"
echo "workload,target,op,ops_per_s,p50_ms,p99_ms,errors" >"$RESULTS"

# redis-benchmark --csv prints "SET","rps","avg","min","p50","p95","p99","max".
rb() {  # workload target port args...
  local workload=$1 target=$2 port=$3; shift 3
  redis-benchmark -h 127.0.0.1 -p "$port" -t set,get -r 10000 --csv "$@" 2>/dev/null |
    tr -d '"' | awk -F, -v w="$workload" -v t="$target" \
      '$1=="SET"||$1=="GET" {printf "%s,%s,%s,%s,%s,%s,-\n", w, t, $1, $2, $5, $7}' >>"$RESULTS"
}

for target in redis kvserver; do
  port=$REDIS_PORT; [[ $target == kvserver ]] && port=$KV_RESP
  echo "==> redis-benchmark -> $target: 4 KiB values, 32 connections"
  rb "4KiB c32" "$target" "$port" -d 4096 -c 32 -n "$N4K"
  echo "==> redis-benchmark -> $target: 4 KiB values, 32 connections, pipeline 16"
  rb "4KiB c32 P16" "$target" "$port" -d 4096 -c 32 -P 16 -n "$NPIPE"
  echo "==> redis-benchmark -> $target: 1 MiB values, 32 connections"
  rb "1MiB c32" "$target" "$port" -d 1048576 -c 32 -n "$N1M"
done

kb() {  # workload value-size get-ratio keys
  local out
  # kvctl exits 3 when any operation failed; the report still comes, and
  # its error count goes into the table. No report at all (it could not even
  # preload) becomes a row saying why.
  out=$("$BIN/client/kvctl/kvctl" --server="127.0.0.1:$KV_CTL" --transport=tcp --json bench \
    --keys="$4" --value-size="$2" --get-ratio="$3" --concurrency=32 --duration="$DUR" \
    2>"$WORK/kvctl.err") || true
  python3 - "$1" "$3" "$out" "$WORK/kvctl.err" >>"$RESULTS" <<'PY'
import json, sys
w, ratio, text, err = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
op = "GET" if ratio >= 1 else "SET"
try:
    out = json.loads(text)
except ValueError:
    why = (open(err).read().strip().splitlines() or ["no output"])[-1].replace(",", ";")
    print(f"{w},kvctl->kvserver,{op},0,-,-,failed: {why}")
    sys.exit(0)
lat = out["latency_us"]["get" if op == "GET" else "put"]
print(f"{w},kvctl->kvserver,{op},{out['ops_per_sec']:.0f},{lat['p50']/1000:.3f},{lat['p99']/1000:.3f},{out['errors']}")
PY
}
echo "==> kvctl bench -> kvserver (TCP): 4 KiB and 1 MiB, 32 threads, $DUR each"
kb "4KiB c32" 4096 0 10000
kb "4KiB c32" 4096 1 10000
kb "1MiB c32" 1048576 0 512
kb "1MiB c32" 1048576 1 512

echo
echo "Results (ops/s; latency in ms; same machine, same run; loopback TCP)"
column -s, -t "$RESULTS"
[[ -n "$JSON_OUT" ]] && python3 -c 'import csv,json,sys; print(json.dumps(list(csv.DictReader(open(sys.argv[1]))), indent=1))' "$RESULTS" >"$JSON_OUT"
exit 0
