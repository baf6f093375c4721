#!/usr/bin/env bash
# User-space instructions per RESP request of redis-server, kvserver and
# resp_floor under valgrind's callgrind: the --callgrind mode of
# resp_vs_redis.sh, which builds the binaries and runs this. A benchmark,
# not a test (nothing is gated).
#
#   tests/bench/resp_callgrind.sh DIR REQUESTS KVSERVER FLOOR [JSON]
#
# Each server runs under valgrind --tool=callgrind --separate-threads=no
# (one dump per row in DIR, all of the server's threads together). For each
# 4 KiB row (SET and GET, 32 connections, unpipelined and pipelined 16,
# redis-benchmark -r 10000) the counters are zeroed, REQUESTS requests run,
# and the dump's total is divided by REQUESTS. Redis and kvserver then get
# their instructions above the floor's (what each adds to parsing and
# answering) and kvserver's over Redis's. Instruction counts leave out the
# kernel: the system calls, their copies and wake-ups, which are most of a
# 4 KiB request's CPU time on this kind of machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ $# -ge 4 ]] || { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 2; }
DIR=$1 N=$2 KVSERVER_BIN=$3 FLOOR_BIN=$4 JSON_OUT=${5:-}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
rm -f "$DIR"/{redis,kvserver,floor}.out* "$DIR/instructions.csv"

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# exec: run in the background, the subshell becomes valgrind, so $! is its pid.
vg() { exec valgrind --tool=callgrind --separate-threads=no --callgrind-out-file="$DIR/$1.out" "${@:2}"; }

declare -A PORT PID
PORT[redis]=$(free_port)
vg redis redis-server --port "${PORT[redis]}" --bind 127.0.0.1 --save '' --appendonly no \
  --protected-mode no --daemonize no >"$DIR/redis.log" 2>&1 &
PID[redis]=$!
PORT[kvserver]=$(free_port)
vg kvserver "$KVSERVER_BIN" --control_port=0 --resp_port="${PORT[kvserver]}" --pool_size=1G \
  --transport=tcp >"$DIR/kvserver.log" 2>&1 &
PID[kvserver]=$!
PORT[floor]=$(free_port)
vg floor "$FLOOR_BIN" --port="${PORT[floor]}" --get_bytes=4096 >"$DIR/floor.log" 2>&1 &
PID[floor]=$!
PIDS=("${PID[@]}")

# Under valgrind a server starts in seconds to a minute (kvserver prefaults
# its pool): wait for each to answer PING, up to 300 s.
for t in redis kvserver floor; do
  for _ in $(seq 1500); do
    redis-cli -p "${PORT[$t]}" ping 2>/dev/null | grep -q PONG && break
    kill -0 "${PID[$t]}" 2>/dev/null || { echo "$t exited under valgrind:" >&2; tail -5 "$DIR/$t.log" >&2; exit 1; }
    sleep 0.2
  done
  redis-cli -p "${PORT[$t]}" ping 2>/dev/null | grep -q PONG || { echo "$t did not start" >&2; exit 1; }
done

echo "target,op,pipeline,requests,instructions,ir_per_op" >"$DIR/instructions.csv"
for t in redis kvserver floor; do
  for pipe in 1 16; do
    for op in set get; do
      echo "==> $t: $N ${op^^} of 4 KiB, 32 connections, pipeline $pipe (under callgrind)"
      callgrind_control -z "${PID[$t]}" >/dev/null 2>&1
      redis-benchmark -h 127.0.0.1 -p "${PORT[$t]}" -t "$op" -r 10000 -d 4096 -c 32 -P "$pipe" \
        -n "$N" -q >/dev/null 2>&1
      callgrind_control --dump="$op-P$pipe" "${PID[$t]}" >/dev/null 2>&1
      # The newest dump of this server is this row's.
      f=$(ls -t "$DIR/$t.out".* | head -1)
      ir=$(awk '/^(totals|summary):/ {print $2; exit}' "$f")
      echo "$t,${op^^},$pipe,$N,$ir,$((ir / N))" >>"$DIR/instructions.csv"
    done
  done
done

/usr/bin/python3 - "$DIR/instructions.csv" "$JSON_OUT" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ir = {(r["target"], r["op"], r["pipeline"]): int(r["ir_per_op"]) for r in rows}
out, lines = [], [["row", "redis", "kvserver", "floor", "redis above floor",
                   "kvserver above floor", "kvserver / redis", "above floor: kvserver / redis"]]
for pipe in ("1", "16"):
    for op in ("SET", "GET"):
        rd, kv, fl = (ir.get((t, op, pipe)) for t in ("redis", "kvserver", "floor"))
        if None in (rd, kv, fl):
            continue
        row = {"row": f"4KiB c32{' P16' if pipe == '16' else ''} {op}", "redis_ir_per_op": rd,
               "kvserver_ir_per_op": kv, "floor_ir_per_op": fl,
               "redis_above_floor": rd - fl, "kvserver_above_floor": kv - fl,
               "kvserver_over_redis": round(kv / rd, 2),
               "above_floor_kvserver_over_redis": round((kv - fl) / (rd - fl), 2) if rd > fl else None}
        out.append(row)
        lines.append([row["row"], f"{rd:,}", f"{kv:,}", f"{fl:,}", f"{rd - fl:,}", f"{kv - fl:,}",
                      f"{row['kvserver_over_redis']:.2f}",
                      "-" if row["above_floor_kvserver_over_redis"] is None
                      else f"{row['above_floor_kvserver_over_redis']:.2f}"])
print("\nUser-space instructions per request (callgrind, every thread of the server; 4 KiB values)")
width = [max(len(l[i]) for l in lines) for i in range(len(lines[0]))]
for l in lines:
    print("  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(l, width))))
if sys.argv[2]:
    json.dump(out, open(sys.argv[2], "w"), indent=1)
PY
