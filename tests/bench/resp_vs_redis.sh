#!/usr/bin/env bash
# Side-by-side throughput of kvserver and Debian's redis-server, measured in
# one run with the same third-party client (redis-benchmark), plus kvctl bench
# against kvserver. Prints a table; a benchmark, not a test (nothing is gated).
#
#   tests/bench/resp_vs_redis.sh [--quick] [--json FILE] [--kvserver BIN --kvctl BIN]
#                                [--floor BIN] [--callgrind DIR [--requests N]]
#
# Workloads (redis-benchmark, SET then GET as separate runs, random keys from
# a 10k key space): 4 KiB values, 32 connections; the same with pipelining
# 16; 1 MiB values, 4 connections (32 clients each holding a 1 MiB request
# measure the machine's memory bandwidth more than the server). Then kvctl bench (GET-only and PUT-only) with
# the same value sizes. Everything binds 127.0.0.1 with ports picked here.
#
# It also prints the host's cost of a first write to prefaulted memory and
# how far into its pool kvserver's 4 KiB SETs wrote (see below).
#
# Besides ops/s and latency, each row has the server's CPU time per operation
# (utime+stime of the server process from /proc/<pid>/stat over the run,
# divided by the operations): on a shared machine ops/s swing by +-20 %
# between runs, CPU per operation much less. It is also split into user
# and system (kernel) time.
#
# The 4 KiB rows run a third target, "floor": tests/bench/resp_floor, a
# RESP responder that stores nothing (SET values dropped, GET answers a
# fixed 4 KiB value). Its CPU per operation is what the kernel's TCP path
# and the wake-ups cost any server for these requests before it does work
# of its own: a lower bound for kvserver and Redis alike.
#
# --kvserver/--kvctl run given binaries instead of building this checkout's
# (to compare two builds with the same script, one after the other).
#
# The table ends with each 4 KiB row's CPU per operation above the floor's,
# kvserver's and Redis's, and their ratio: what each server adds to what
# the socket path costs anyway (the goal in docs/performance.md).
#
# --callgrind DIR: instructions instead of time (CPU time per operation
# moves +-20 % between runs on a shared machine; instruction counts repeat
# to a fraction of a percent). Only the 4 KiB rows, N requests each
# (--requests, default 30000), against redis-server, kvserver (a 1G pool)
# and the floor, each under valgrind --tool=callgrind (dumps in DIR, one per
# row). Prints user-space instructions per operation of each server (all of
# its threads), the same above the floor's, and kvserver's over Redis's.
# The kernel's share (the system calls and their copies) is not in these
# counts. About a minute.
set -euo pipefail
cd "$(dirname "$0")/../.."

QUICK=0
JSON_OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --json) JSON_OUT="$2"; shift ;;
    --kvserver) KVSERVER_BIN="$2"; shift ;;
    --kvctl) KVCTL_BIN="$2"; shift ;;
    --floor) FLOOR_BIN="$2"; shift ;;
    --callgrind) CALLGRIND="$2"; shift ;;
    --requests) REQUESTS="$2"; shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

CALLGRIND=${CALLGRIND:-}
REQUESTS=${REQUESTS:-30000}
[[ $REQUESTS =~ ^[1-9][0-9]*$ ]] || { echo "--requests takes a positive number" >&2; exit 2; }
for tool in redis-server redis-benchmark bazel $([[ -n $CALLGRIND ]] && echo valgrind callgrind_control); do
  command -v "$tool" >/dev/null || { echo "missing $tool: run deploy/setup.sh" >&2; exit 1; }
done

if [[ -n ${KVSERVER_BIN:-} || -n ${KVCTL_BIN:-} ]]; then
  [[ -x ${KVSERVER_BIN:-} && -x ${KVCTL_BIN:-} ]] || { echo "--kvserver and --kvctl need executables" >&2; exit 2; }
else
  echo "==> building kvserver and kvctl"
  bazel build -c opt //server:kvserver //client/kvctl 2>&1 | tail -1
  BIN=$(bazel info -c opt bazel-bin 2>/dev/null)
  KVSERVER_BIN=$BIN/server/kvserver
  KVCTL_BIN=$BIN/client/kvctl/kvctl
fi
if [[ -z ${FLOOR_BIN:-} ]]; then
  bazel build -c opt //tests/bench:resp_floor 2>&1 | tail -1
  FLOOR_BIN=$(bazel info -c opt bazel-bin 2>/dev/null)/tests/bench/resp_floor
fi
[[ -x $FLOOR_BIN ]] || { echo "--floor needs an executable" >&2; exit 2; }

if [[ -n $CALLGRIND ]]; then
  exec tests/bench/resp_callgrind.sh "$CALLGRIND" "$REQUESTS" "$KVSERVER_BIN" "$FLOOR_BIN" "$JSON_OUT"
fi

WORK=$(mktemp -d /tmp/kvbench.XXXXXX)
cleanup() {
  [[ -n "${REDIS_PID:-}" ]] && kill "$REDIS_PID" 2>/dev/null || true
  [[ -n "${KV_PID:-}" ]] && kill "$KV_PID" 2>/dev/null || true
  [[ -n "${FLOOR_PID:-}" ]] && kill "$FLOOR_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
  --protected-mode no --daemonize no --logfile "$WORK/redis.log" &
REDIS_PID=$!

"$KVSERVER_BIN" --control_port=0 --resp_port=0 --pool_size=8G --transport=tcp \
  --ready_file="$WORK/kv.ready" 2>"$WORK/kvserver.log" &
KV_PID=$!
"$FLOOR_BIN" --port=0 --get_bytes=4096 --ready_file="$WORK/floor.ready" 2>"$WORK/floor.log" &
FLOOR_PID=$!
# Prefaulting the 8 GiB pool took 25-70 s on this shared machine: wait up to 300 s.
for _ in $(seq 3000); do [[ -f "$WORK/kv.ready" ]] && break; sleep 0.1; done
[[ -f "$WORK/kv.ready" ]] || { cat "$WORK/kvserver.log"; exit 1; }
KV_RESP=$(sed -n 's/^resp_port=//p' "$WORK/kv.ready")
KV_CTL=$(sed -n 's/^control_port=//p' "$WORK/kv.ready")
for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
FLOOR_PORT=$(sed -n 's/^port=//p' "$WORK/floor.ready" 2>/dev/null)
[[ -n $FLOOR_PORT ]] || { echo "resp_floor did not start: $(cat "$WORK/floor.log")" >&2; exit 1; }

echo "==> machine: $(nproc) cores, $(uname -r); redis $(redis-server --version | awk '{print $3}')"
# Some virtual machines back guest memory lazily: the first write to a page
# costs microseconds even after the guest prefaulted it (MAP_POPULATE), and
# later writes a fraction of that. A server whose writes walk memory it has
# not written for a while pays that per page; print it so a run says which
# kind of machine it had.
FIRST_WRITE=$(python3 - <<'PY'
import mmap, time
n = 256 << 20
m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE)
block, out = b"x" * 4096, []
for _ in range(2):
    t = time.perf_counter()
    for i in range(0, n, 4096):
        m[i:i + 4096] = block
    out.append((time.perf_counter() - t) * 1e6 / (n // 4096))
print(f"first write {out[0]:.2f} us per 4 KiB page of prefaulted memory, again {out[1]:.2f} us")
PY
)
echo "    host: $FIRST_WRITE"
echo "    kvserver: $(head -c 300 "$WORK/kvserver.log" | grep -o 'kvserver up.*' | cut -c1-160)"

# N1M: CPU time is read in 10 ms clock ticks, so the 1 MiB rows need enough
# operations (a 1 MiB GET costs tens of microseconds) to span many ticks.
if [[ $QUICK == 1 ]]; then N4K=50000; NPIPE=200000; N1M=1000; DUR=3s; else N4K=200000; NPIPE=1000000; N1M=4000; DUR=10s; fi

RESULTS="$WORK/results.csv"
echo "workload,target,op,ops_per_s,p50_ms,p99_ms,errors,server_cpu_us_per_op,server_user_us_per_op,server_sys_us_per_op" >"$RESULTS"

TCK=$(getconf CLK_TCK)
# cpu_ticks PID: utime + stime of the process, in clock ticks. The command
# name (field 2) may hold spaces, so count fields after its closing ")".
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
# user_sys PID: "utime stime" in clock ticks.
user_sys() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12, $13}'; }
# us_per_op TICKS OPS: CPU microseconds per operation, "-" without operations.
us_per_op() { python3 -c 'import sys; t,n,h=map(float,sys.argv[1:]); print(f"{t*1e6/h/n:.2f}" if n else "-")' "$1" "$2" "$TCK"; }

# redis-benchmark --csv prints "SET","rps","avg","min","p50","p95","p99","max".
# One run per operation, so the server's CPU time belongs to that operation.
rb() {  # workload target port args... (args include -n N)
  local workload=$1 target=$2 port=$3 pid=$REDIS_PID op n u0 s0 u1 s1 line; shift 3
  [[ $target == kvserver ]] && pid=$KV_PID
  [[ $target == floor ]] && pid=$FLOOR_PID
  n=$(sed -n 's/.*-n \([0-9]*\).*/\1/p' <<<"$*")
  for op in set get; do
    read -r u0 s0 <<<"$(user_sys "$pid")"
    line=$(redis-benchmark -h 127.0.0.1 -p "$port" -t "$op" -r 10000 --csv "$@" 2>/dev/null |
      tr -d '"' | awk -F, '$1=="SET"||$1=="GET" {printf "%s,%s,%s,%s", $1, $2, $5, $7}')
    read -r u1 s1 <<<"$(user_sys "$pid")"
    [[ -n $line ]] || line="${op^^},0,-,-"
    echo "$workload,$target,$line,-,$(us_per_op $((u1 + s1 - u0 - s0)) "$n"),$(us_per_op $((u1 - u0)) "$n"),$(us_per_op $((s1 - s0)) "$n")" >>"$RESULTS"
  done
}

for target in redis kvserver floor; do
  port=$REDIS_PORT; [[ $target == kvserver ]] && port=$KV_RESP
  [[ $target == floor ]] && port=$FLOOR_PORT
  echo "==> redis-benchmark -> $target: 4 KiB values, 32 connections"
  rb "4KiB c32" "$target" "$port" -d 4096 -c 32 -n "$N4K"
  echo "==> redis-benchmark -> $target: 4 KiB values, 32 connections, pipeline 16"
  rb "4KiB c32 P16" "$target" "$port" -d 4096 -c 32 -P 16 -n "$NPIPE"
  # How far into its 8 GiB arena kvserver's writes reached for 10,000 keys
  # of 4 KiB (40 MB): near all of it means every SET wrote memory untouched
  # for a lap of the pool, at the first-write cost above.
  [[ $target == kvserver ]] && SPAN=$(redis-cli -p "$port" info | tr -d '\r' |
    awk -F: '/^kvstore_pool_segments_touched:/ {t = $2} /^kvstore_pool_segments:/ {n = $2}
             END {print t " of " n " segments"}')
  # The floor answers GET with 4 KiB whatever was SET: no 1 MiB rows for it.
  [[ $target == floor ]] && continue
  echo "==> redis-benchmark -> $target: 1 MiB values, 4 connections"
  rb "1MiB c4" "$target" "$port" -d 1048576 -c 4 -n "$N1M"
done

kb() {  # workload value-size get-ratio keys
  local out c0 c1
  # kvctl exits 3 when any operation failed; the report still comes, and
  # its error count goes into the table. No report at all (it could not even
  # preload) becomes a row saying why.
  c0=$(cpu_ticks "$KV_PID")
  out=$("$KVCTL_BIN" --server="127.0.0.1:$KV_CTL" --transport=tcp --json bench \
    --keys="$4" --value-size="$2" --get-ratio="$3" --concurrency=32 --duration="$DUR" \
    2>"$WORK/kvctl.err") || true
  c1=$(cpu_ticks "$KV_PID")
  python3 - "$1" "$3" "$out" "$WORK/kvctl.err" $((c1 - c0)) "$TCK" >>"$RESULTS" <<'PY'
import json, sys
w, ratio, text, err = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
ticks, tck = float(sys.argv[5]), float(sys.argv[6])
op = "GET" if ratio >= 1 else "SET"
try:
    out = json.loads(text)
except ValueError:
    why = (open(err).read().strip().splitlines() or ["no output"])[-1].replace(",", ";")
    print(f"{w},kvctl->kvserver,{op},0,-,-,failed: {why},-,-,-")
    sys.exit(0)
lat = out["latency_us"]["get" if op == "GET" else "put"]
# The CPU window includes kvctl's preload and connection set-up, so this
# figure is an upper bound for the measured operations.
cpu = f"{ticks * 1e6 / tck / out['ops']:.2f}" if out["ops"] else "-"
print(f"{w},kvctl->kvserver,{op},{out['ops_per_sec']:.0f},{lat['p50']/1000:.3f},{lat['p99']/1000:.3f},{out['errors']},{cpu},-,-")
PY
}
echo "==> kvctl bench -> kvserver (TCP): 4 KiB and 1 MiB, 32 threads, $DUR each"
kb "4KiB c32" 4096 0 10000
kb "4KiB c32" 4096 1 10000
kb "1MiB c32" 1048576 0 512
kb "1MiB c32" 1048576 1 512

echo
echo "Results (ops/s; latency in ms; server CPU in us per operation; same machine, same run; loopback TCP)"
column -s, -t "$RESULTS"
echo
echo "CPU us per operation above resp_floor's (what the server adds to the socket path), 4 KiB rows"
python3 - "$RESULTS" <<'PY'
import csv, sys
cpu = {}
for r in csv.DictReader(open(sys.argv[1])):
    try:
        cpu[(r["workload"], r["target"], r["op"])] = float(r["server_cpu_us_per_op"])
    except ValueError:
        pass
print(f"{'row':<18}{'redis':>8}{'kvserver':>10}{'kvserver / redis':>18}")
for w in ("4KiB c32", "4KiB c32 P16"):
    for op in ("SET", "GET"):
        fl, rd, kv = (cpu.get((w, t, op)) for t in ("floor", "redis", "kvserver"))
        if None in (fl, rd, kv):
            continue
        ratio = f"{(kv - fl) / (rd - fl):.2f}" if rd > fl else "-"
        print(f"{w + ' ' + op:<18}{rd - fl:>8.2f}{kv - fl:>10.2f}{ratio:>18}")
PY
echo "kvserver's pool written after the 4 KiB rows: ${SPAN:-?}; $FIRST_WRITE"
[[ -n "$JSON_OUT" ]] && python3 -c 'import csv,json,sys; print(json.dumps(list(csv.DictReader(open(sys.argv[1]))), indent=1))' "$RESULTS" >"$JSON_OUT"
exit 0
