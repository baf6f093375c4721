#!/usr/bin/env bash
# The figures against peers in one run, each beside its peer, as ONE table and one
# JSON file. A benchmark, not a test: it prints figures and gates nothing.
#
#   tests/bench/perf_report.sh [--quick] [--json FILE] [--skip-resp] [--skip-replication] [--rdma]
#                              [--skip-callgrind] [--targets "redis kvserver"] [--kvserver BIN --kvctl BIN]
#
# Sections (docs/performance.md explains each):
#   resp      tests/bench/resp_vs_redis.sh: redis-benchmark against kvserver
#             and Debian's redis-server (ops/s, p50, server CPU per op, split
#             into user and kernel time), and for the 4 KiB rows the CPU per
#             op of resp_floor, a responder that stores nothing.
#   replication  tests/bench/replication_vs_redis.sh: a three-node kvstore
#             cluster at R=1, 2, 3 against Redis Cluster (3 primaries, with
#             0, 1, 2 replicas each), redis-benchmark --cluster SET of 4 KiB
#             values from 32 connections, unpipelined and pipelined 16: CPU
#             per SET of all servers summed and its ratio to the same
#             system's R=1, ops/s, and PING p99 on the loaded node.
#   flat      cost against the number of keys: GET and PUT (redis-benchmark,
#             8 connections, random keys over the whole key space, 16-byte
#             keys, 32-byte values) with 10 thousand keys loaded and with
#             10 million, on two servers of the same configuration, up side
#             by side and measured alternately (3 pairs; 2 with --quick),
#             each pair's ratio taken within it, the median shown: p50, ops/s,
#             server CPU per op; kvserver's index load factor and index-full
#             refusals. Redis is measured the same way for reference.
#   memory    bytes per key after loading 10 million keys (16 B key, 32 B
#             value) and 1 million keys with 1 KiB values: kvserver's pool
#             bytes in use (whole segments) + index bytes + the growth of its
#             resident size while loading (heap outside the prefaulted
#             arenas), against redis-server's INFO used_memory (net of the
#             empty server's).
#   rdma      only with --rdma, inside the Soft-RoCE VM (needs qemu): runs
#             the RDMA benchmark script (tests/bench/rdma_get_bench.sh when
#             present, else tests/bench/rdma_vs_tcp.sh) and keeps its table.
#             Wrap the whole command in your VM lock if the machine has one.
#   rdma-callgrind  with --rdma, unless --skip-callgrind: runs
#             tests/bench/rdma_get_callgrind.sh (another VM boot, ~12 minutes,
#             ~9 with --quick; needs valgrind) with the same kvserver and
#             kvctl: the client's instructions per GET (hit, miss, 1 MiB copy
#             and zero copy) against ib_read_lat's per READ, as table rows;
#             its JSON goes under "rdma_callgrind".
#
# --quick: 1 million keys instead of 10 million, 100 thousand 1 KiB values
# instead of 1 million, shorter measurements, resp_vs_redis.sh --quick.
# The full run takes about 10-15 minutes on 2 cores (loading 10 million keys
# into each server takes 1.5-3 minutes of it) and peaks near 4 GiB for the
# two kvservers of the flat section and 1.5 GiB for Redis.
#
# --targets limits the flat and memory sections to some servers (e.g. only
# kvserver, to compare two builds); the table then lacks the Redis peers.
# --kvserver/--kvctl run given binaries instead of building this checkout's.
# KV_EXTRA_FLAGS (environment) replaces the extra kvserver flags of the
# flat and memory sections, --transparent_hugepages by default.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

QUICK=0
JSON_OUT=""
SKIP_RESP=0
SKIP_REPLICATION=0
RDMA=0
CALLGRIND=1
TARGETS="redis kvserver"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --json) JSON_OUT="$2"; shift ;;
    --skip-resp) SKIP_RESP=1 ;;
    --skip-replication) SKIP_REPLICATION=1 ;;
    --rdma) RDMA=1 ;;
    --skip-callgrind) CALLGRIND=0 ;;
    --targets) TARGETS="$2"; shift ;;
    --kvserver) KVSERVER_BIN="$2"; shift ;;
    --kvctl) KVCTL_BIN="$2"; shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "perf_report: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

for tool in redis-server redis-benchmark python3; do
  command -v "$tool" >/dev/null || { echo "perf_report: missing $tool: run deploy/setup.sh" >&2; exit 1; }
done
if [[ -n ${KVSERVER_BIN:-} || -n ${KVCTL_BIN:-} ]]; then
  [[ -x ${KVSERVER_BIN:-} && -x ${KVCTL_BIN:-} ]] || { echo "--kvserver and --kvctl need executables" >&2; exit 2; }
else
  echo "==> building kvserver and kvctl (-c opt)"
  bazel build -c opt //server:kvserver //client/kvctl 2>&1 | tail -1
  BIN=$(bazel info -c opt bazel-bin 2>/dev/null)
  KVSERVER_BIN=$BIN/server/kvserver
  KVCTL_BIN=$BIN/client/kvctl/kvctl
fi

# KV_EXTRA_FLAGS: kvserver flags for the flat and memory sections
# (default --transparent_hugepages; set it empty to measure 4 KiB pages).
KV_EXTRA_FLAGS=${KV_EXTRA_FLAGS---transparent_hugepages}

if [[ $QUICK == 1 ]]; then
  N_SMALL=10000; N_LARGE=1000000; N_BIG=100000; OPS=100000; REPS=2
else
  N_SMALL=10000; N_LARGE=10000000; N_BIG=1000000; OPS=300000; REPS=3
fi
SMALL_VALUE=32
BIG_VALUE=1024

WORK=$(mktemp -d /tmp/kvperf.XXXXXX)
ROWS="$WORK/rows.jsonl"
: >"$ROWS"
SERVER_PID=""
ALL_PIDS=()  # every server started, for the exit trap
stop_server() {
  if [[ -n $SERVER_PID ]]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
  fi
}
cleanup() {
  for pid in "${ALL_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
TCK=$(getconf CLK_TCK)
# utime + stime in clock ticks; the command name (field 2) may hold spaces.
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
row() { echo "$1" >>"$ROWS"; }  # one JSON object per line
now() { date +%s.%N; }

# start_server TARGET KEYS VALUE_SIZE: a fresh server sized for KEYS entries
# of VALUE_SIZE bytes; sets PORT and SERVER_PID.
start_server() {
  local target=$1 keys=$2 vsize=$3
  PORT=$(free_port)
  if [[ $target == redis ]]; then
    redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
      --protected-mode no --daemonize no --logfile "$WORK/redis.log" &
    SERVER_PID=$!
    ALL_PIDS+=("$SERVER_PID")
    for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
    return
  fi
  # Pool: the entries (header + key + value, 32-byte aligned) plus a quarter
  # for open segments, the cleaner's reserve and the PUT runs' dead entries.
  # Index: keys / 4 buckets (2 slots per key, load factor 0.5 when full):
  # docs/operations.md "Sizing the index".
  local entry=$(( (32 + 16 + vsize + 31) / 32 * 32 ))
  local pool_mib=$(( (keys * entry * 5 / 4) / 1048576 + 64 ))
  local buckets=$(( keys / 4 > 1024 ? keys / 4 : 1024 ))
  rm -f "$WORK/kv.ready"
  # Transparent huge pages: without them random GETs over 10 million keys
  # cost ~25 % more CPU than over 10 thousand (TLB misses; performance.md).
  # Assembling the huge pages can make start-up take a minute on a busy host.
  "$KVSERVER_BIN" --control_port=0 --resp_port=0 --transport=tcp $KV_EXTRA_FLAGS \
    --pool_size="${pool_mib}M" --index_buckets="$buckets" \
    --ready_file="$WORK/kv.ready" 2>"$WORK/kvserver.${#ALL_PIDS[@]}.log" &
  SERVER_PID=$!
  ALL_PIDS+=("$SERVER_PID")
  for _ in $(seq 3000); do [[ -f "$WORK/kv.ready" ]] && break; sleep 0.1; done
  local log="$WORK/kvserver.$((${#ALL_PIDS[@]} - 1)).log"
  [[ -f "$WORK/kv.ready" ]] || { cat "$log" >&2; exit 1; }
  PORT=$(sed -n 's/^resp_port=//p' "$WORK/kv.ready")
  echo "    $(grep -o 'kvserver up.*' "$log" | cut -c1-110)"
}

info_json() { python3 tests/bench/perf_keys.py info "$PORT"; }

# load TARGET KEYS VALUE_SIZE: prints the loader's JSON line.
load() {
  local out
  out=$(python3 tests/bench/perf_keys.py load "$PORT" "$2" "$3")
  echo "    loaded $2 keys of $3 B into $1: $out" >&2
  echo "$out"
}

# measure TARGET KEYS VALUE_SIZE REP: GET and PUT rows for the loaded server.
measure() {
  local target=$1 keys=$2 vsize=$3 rep=$4 op c0 c1 line info
  for op in get set; do
    c0=$(cpu_ticks "$SERVER_PID")
    line=$(redis-benchmark -h 127.0.0.1 -p "$PORT" -t "$op" -r "$keys" -d "$vsize" -c 8 \
      -n "$OPS" --csv 2>/dev/null | tr -d '"' | awk -F, '$1=="SET"||$1=="GET" {print $2, $5, $7}')
    c1=$(cpu_ticks "$SERVER_PID")
    info=$(info_json)
    python3 - "$target" "$keys" "$op" "$OPS" "$((c1 - c0))" "$TCK" "$line" "$info" "$rep" >>"$ROWS" <<'PY'
import json, sys
target, keys, op, n, ticks, tck, line, info, rep = sys.argv[1:10]
rps, p50, p99 = (line.split() + ["0", "0", "0"])[:3]
info = json.loads(info)
row = {"section": "flat", "target": target, "keys": int(keys), "rep": int(rep),
       "op": "GET" if op == "get" else "PUT",
       "ops_per_s": float(rps), "p50_ms": float(p50), "p99_ms": float(p99),
       "server_cpu_us_per_op": round(float(ticks) * 1e6 / float(tck) / int(n), 2)}
if target == "kvserver":
    slots = int(info.get("index_capacity", 0)) or 1
    row["index_load_factor"] = round(int(info.get("kvstore_keys", 0)) / slots, 4)
    row["index_full_refusals"] = int(info.get("kvstore_index_full_errors_total", 0))
print(json.dumps(row))
PY
  done
}

rss_bytes() { awk '/^VmRSS:/ {print $2 * 1024}' "/proc/$SERVER_PID/status"; }

# memory TARGET KEYS VALUE_SIZE BASELINE_INFO LOAD_JSON RSS_BEFORE: the memory row.
memory() {
  python3 - "$1" "$2" "$3" "$4" "$(info_json)" "$5" "$6" "$(rss_bytes)" >>"$ROWS" <<'PY'
import json, sys
target, keys, vsize = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
before, after, loaded = json.loads(sys.argv[4]), json.loads(sys.argv[5]), json.loads(sys.argv[6])
rss_before, rss_after = int(sys.argv[7]), int(sys.argv[8])
row = {"section": "memory", "target": target, "keys": keys, "key_bytes": 16, "value_bytes": vsize,
       "load_seconds": loaded["seconds"], "load_errors": loaded["errors"],
       "load_first_error": loaded["first_error"]}
if target == "redis":
    used = int(after["used_memory"]) - int(before["used_memory"])
    row.update(used_memory=int(after["used_memory"]), empty_used_memory=int(before["used_memory"]),
               bytes_per_key=round(used / keys, 1), rss_growth_bytes=rss_after - rss_before)
else:
    seg_total, seg_free = int(after["segments_total"]), int(after["segments_free"])
    seg_bytes = int(after["pool_bytes"]) // max(seg_total, 1)
    in_use = (seg_total - seg_free) * seg_bytes
    index = int(after["kvstore_index_bytes"])
    stored = int(after["kvstore_keys"])
    # The arenas are prefaulted, so what the resident size grows by while
    # loading is heap outside them: the per-segment entry lists the cleaner
    # walks (4 bytes per entry, more while a vector has spare capacity).
    heap = max(rss_after - rss_before, 0)
    row.update(keys_stored=stored, pool_bytes=int(after["pool_bytes"]), pool_in_use_bytes=in_use,
               live_bytes=int(after["live_bytes"]), index_bytes=index,
               index_load_factor=round(stored / int(after["index_capacity"]), 4),
               index_full_refusals=int(after.get("kvstore_index_full_errors_total", 0)),
               entry_bytes_per_key=round(int(after["live_bytes"]) / max(stored, 1), 1),
               index_bytes_per_key=round(index / max(stored, 1), 1),
               heap_growth_bytes=heap, heap_bytes_per_key=round(heap / max(stored, 1), 1),
               bytes_per_key=round((in_use + index + heap) / max(stored, 1), 1))
print(json.dumps(row))
PY
}

echo "==> machine: $(nproc) cores, $(uname -r); redis $(redis-server --version | awk '{print $3}')"

if [[ $SKIP_RESP == 0 ]]; then
  echo "==> RESP rows: tests/bench/resp_vs_redis.sh $([[ $QUICK == 1 ]] && echo --quick)"
  resp_args=(--json "$WORK/resp.json" --kvserver "$KVSERVER_BIN" --kvctl "$KVCTL_BIN")
  [[ $QUICK == 1 ]] && resp_args+=(--quick)
  if ! bash tests/bench/resp_vs_redis.sh "${resp_args[@]}" >"$WORK/resp.out" 2>&1; then
    echo "    resp_vs_redis.sh failed; its output:" >&2; tail -20 "$WORK/resp.out" >&2
  fi
fi

if [[ $SKIP_REPLICATION == 0 ]]; then
  echo "==> replication rows: tests/bench/replication_vs_redis.sh $([[ $QUICK == 1 ]] && echo --quick)"
  repl_args=(--json "$WORK/replication.json" --kvserver "$KVSERVER_BIN" --kvctl "$KVCTL_BIN")
  [[ $QUICK == 1 ]] && repl_args+=(--quick)
  if ! bash tests/bench/replication_vs_redis.sh "${repl_args[@]}" >"$WORK/replication.out" 2>&1; then
    echo "    replication_vs_redis.sh failed; its output:" >&2; tail -20 "$WORK/replication.out" >&2
  fi
fi

for target in $TARGETS; do
  echo "==> key-count flatness and memory, $target: $N_LARGE and $N_SMALL keys, alternately ($SMALL_VALUE B values)"
  # Two fresh servers of the same configuration (sized for the large key
  # count), so the only difference between the runs is the number of keys,
  # and the memory figure holds no dead entries from a PUT run.
  # Both stay up, and the measurements alternate large, small, large, ...
  # REPS times: the machine's speed drifts over minutes, and a comparison
  # made within each pair, seconds apart, cancels most of that drift.
  start_server "$target" "$N_LARGE" "$SMALL_VALUE"
  empty=$(info_json); rss=$(rss_bytes)
  loaded=$(load "$target" "$N_LARGE" "$SMALL_VALUE")
  memory "$target" "$N_LARGE" "$SMALL_VALUE" "$empty" "$loaded" "$rss"
  large_port=$PORT large_pid=$SERVER_PID
  start_server "$target" "$N_LARGE" "$SMALL_VALUE"
  load "$target" "$N_SMALL" "$SMALL_VALUE" >/dev/null
  small_port=$PORT small_pid=$SERVER_PID
  for rep in $(seq "$REPS"); do
    PORT=$large_port SERVER_PID=$large_pid measure "$target" "$N_LARGE" "$SMALL_VALUE" "$rep"
    PORT=$small_port SERVER_PID=$small_pid measure "$target" "$N_SMALL" "$SMALL_VALUE" "$rep"
  done
  SERVER_PID=$large_pid; stop_server
  SERVER_PID=$small_pid; stop_server
  echo "==> memory, $target: $N_BIG keys of $BIG_VALUE B values"
  start_server "$target" "$N_BIG" "$BIG_VALUE"
  empty=$(info_json); rss=$(rss_bytes)
  loaded=$(load "$target" "$N_BIG" "$BIG_VALUE")
  memory "$target" "$N_BIG" "$BIG_VALUE" "$empty" "$loaded" "$rss"
  stop_server
done

RDMA_SCRIPT=""
for s in tests/bench/rdma_get_bench.sh tests/bench/rdma_vs_tcp.sh; do
  [[ -f $s ]] && { RDMA_SCRIPT=$s; break; }
done
if [[ $RDMA == 1 && -n $RDMA_SCRIPT ]]; then
  echo "==> RDMA rows: $RDMA_SCRIPT (Soft-RoCE VM)"
  rdma_args=(); [[ $QUICK == 1 ]] && rdma_args+=(--quick)
  bash "$RDMA_SCRIPT" "${rdma_args[@]}" >"$WORK/rdma.out" 2>&1 || echo "    $RDMA_SCRIPT failed (exit $?)" >&2
else
  echo "RDMA rows need the Soft-RoCE VM: run tests/bench/perf_report.sh --rdma" \
    "(runs ${RDMA_SCRIPT:-the RDMA bench script}; qemu from deploy/setup.sh)" >"$WORK/rdma.out"
fi
# Instruction counts of the same binaries under callgrind, in a VM of its
# own: its rows join the table (section rdma-callgrind), its JSON the report's.
if [[ $RDMA == 1 && $CALLGRIND == 1 && -f tests/bench/rdma_get_callgrind.sh ]]; then
  echo "==> RDMA instruction rows: tests/bench/rdma_get_callgrind.sh (Soft-RoCE VM, callgrind)"
  cg_args=(--json "$WORK/callgrind.json" --kvserver "$KVSERVER_BIN" --kvctl "$KVCTL_BIN")
  [[ $QUICK == 1 ]] && cg_args+=(--quick)
  bash tests/bench/rdma_get_callgrind.sh "${cg_args[@]}" >"$WORK/callgrind.out" 2>&1 ||
    { echo "    rdma_get_callgrind.sh failed (exit $?); its output:" >&2; tail -20 "$WORK/callgrind.out" >&2; }
fi

python3 - "$ROWS" "$WORK/resp.json" "$WORK/resp.out" "$WORK/rdma.out" "$JSON_OUT" "$QUICK" \
  "$WORK/replication.json" "$WORK/callgrind.json" <<'PY'
import json, os, statistics, sys
rows_path, resp_json, resp_out, rdma_out, json_out, quick, repl_json, cg_json = sys.argv[1:9]
rows = [json.loads(l) for l in open(rows_path) if l.strip()]
resp = json.load(open(resp_json)) if os.path.exists(resp_json) else []
repl = json.load(open(repl_json))["rows"] if os.path.exists(repl_json) else []
table = []  # section, figure, kvserver, peer, peer name, kvserver / peer

def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "-"

def num(x, digits=1):
    return f"{x:,.{digits}f}" if isinstance(x, float) else f"{x:,}"

for wl_op in sorted({(r["workload"], r["op"]) for r in resp}):
    pick = {r["target"]: r for r in resp if (r["workload"], r["op"]) == wl_op}
    kv, rd = pick.get("kvserver"), pick.get("redis")
    if not kv or not rd:
        continue
    fl = pick.get("floor")
    for row, field, label in (
            (kv, "ops_per_s", "ops/s"),
            (kv, "server_cpu_us_per_op", "CPU us/op"),
            (kv, "server_user_us_per_op", "CPU us/op, user"),
            (kv, "server_sys_us_per_op", "CPU us/op, kernel"),
            # The responder that stores nothing: the kernel's floor.
            (fl, "server_cpu_us_per_op", "CPU us/op of resp_floor (stores nothing)")):
        try:
            a, b = float(row[field]), float(rd[field])
        except (KeyError, TypeError, ValueError):
            continue
        d = 0 if field == "ops_per_s" else 2
        table.append(("resp", f"{wl_op[0]} {wl_op[1]} {label}", num(a, d), num(b, d), "redis", ratio(a, b)))

# Replication: kvstore against Redis Cluster at the same R and pipeline,
# and each system's own R=1 (the issue's goals are ratios to both).
for r, pipe in sorted({(x["R"], x["pipeline"]) for x in repl}):
    pick = {x["system"]: x for x in repl if (x["R"], x["pipeline"]) == (r, pipe)}
    kv, rd = pick.get("kvstore"), pick.get("redis")
    if not kv:
        continue
    rd = rd or {}
    what = f"R={r} P{pipe}"
    for field, label, d in (("cpu_us_per_set", "CPU us/SET (all nodes)", 2),
                            ("cpu_ratio_to_r1", "CPU/SET over own R=1", 2),
                            ("ops_per_s", "ops/s", 0), ("writes_per_batch", "writes per stream batch", 1),
                            ("cs_per_set", "context switches per SET (all nodes)", 3),
                            ("ping_p99_us", "PING p99 us under load", 0)):
        a, b = kv.get(field), rd.get(field)
        if a is None:
            continue
        table.append(("replication", f"{what} {label}", num(float(a), d),
                      num(float(b), d) if isinstance(b, (int, float)) else "-", "redis cluster",
                      ratio(float(a), float(b)) if isinstance(b, (int, float)) else "-"))

flat = [r for r in rows if r["section"] == "flat"]
for target in ("kvserver", "redis"):
    mine = [r for r in flat if r["target"] == target]
    if not mine:
        continue
    small, large = min(r["keys"] for r in mine), max(r["keys"] for r in mine)
    for op in ("GET", "PUT"):
        # The rows alternate large, small, large, ...: each pair is compared
        # within itself, and the table shows the median of the pairs.
        pairs = []
        for rep in sorted({r.get("rep", 1) for r in mine}):
            pick = lambda keys: next((r for r in mine if r["keys"] == keys and r["op"] == op
                                      and r.get("rep", 1) == rep), None)
            if pick(large) and pick(small):
                pairs.append((pick(large), pick(small)))
        if not pairs:
            continue
        a, b = pairs[-1]  # the last pair's index figures
        for field, label in (("p50_ms", "p50 ms"), ("server_cpu_us_per_op", "CPU us/op"),
                             ("ops_per_s", "ops/s")):
            ratios = [x[field] / y[field] for x, y in pairs if x[field] and y[field]]
            each = " / ".join(f"{q:.2f}" for q in ratios)
            digits = 3 if field == "p50_ms" else 1
            table.append(("flat", f"{target} {op} {label}, {large:,} keys vs {small:,} "
                          f"(median of {len(pairs)} pairs: {each})",
                          num(statistics.median(x[field] for x, _ in pairs), digits),
                          num(statistics.median(y[field] for _, y in pairs), digits),
                          f"{target}@{small:,}", f"{statistics.median(ratios):.2f}" if ratios else "-"))
        if target == "kvserver":
            table.append(("flat", f"kvserver index load factor / refusals after {op} run",
                          f"{a['index_load_factor']} / {a['index_full_refusals']}",
                          f"{b['index_load_factor']} / {b['index_full_refusals']}",
                          f"kvserver@{small:,}", "-"))

mem = [r for r in rows if r["section"] == "memory"]
for vsize in sorted({r["value_bytes"] for r in mem}):
    kv = next((r for r in mem if r["value_bytes"] == vsize and r["target"] == "kvserver"), None)
    rd = next((r for r in mem if r["value_bytes"] == vsize and r["target"] == "redis"), None)
    if not kv:
        continue
    rd = rd or {"bytes_per_key": 0.0, "load_seconds": 0.0}  # --targets without redis
    what = f"{kv['keys']:,} keys, 16 B key, {vsize} B value"
    table.append(("memory", f"bytes/key (pool in use + index + heap), {what}", num(kv["bytes_per_key"]),
                  num(rd["bytes_per_key"]), "redis used_memory", ratio(kv["bytes_per_key"], rd["bytes_per_key"])))
    table.append(("memory", f"  kvserver: entries {kv['entry_bytes_per_key']}, index {kv['index_bytes_per_key']},"
                  f" heap {kv['heap_bytes_per_key']}"
                  f" (load factor {kv['index_load_factor']}, refusals {kv['index_full_refusals']})",
                  "", "", "", ""))
    table.append(("memory", f"load time s, {what}", num(kv["load_seconds"]), num(rd["load_seconds"]),
                  "redis", ratio(kv["load_seconds"], rd["load_seconds"])))

# Client instructions per GET against ib_read_lat's per READ (callgrind).
cg = json.load(open(cg_json)) if os.path.exists(cg_json) else None
for key, c in (cg or {}).get("cases", {}).items():
    p = c["ib_read_lat"]
    table.append(("rdma-callgrind", f"{c['label']}: client Ir/op (N={c['n']})", num(c["kvstore_get_ir"], 0),
                  num(p["ib_read_lat_ir"], 0), "ib_read_lat", ratio(c["kvstore_get_ir"], p["ib_read_lat_ir"])))

rdma_text = open(rdma_out).read()
head = ("section", "figure", "kvserver", "peer", "peer is", "kv/peer")
widths = [max(len(str(r[i])) for r in table + [head]) for i in range(6)]
print()
print("Figures against their peers (one run; loopback TCP; CPU = server utime+stime per operation)")
for r in [head] + table:
    print("  ".join(str(c).ljust(w) if i < 2 or i == 4 else str(c).rjust(w)
                    for i, (c, w) in enumerate(zip(r, widths))))
print()
print("rdma:", rdma_text.strip().splitlines()[-1] if "need the Soft-RoCE" in rdma_text else "")
if "need the Soft-RoCE" not in rdma_text:
    print(rdma_text[-4000:])
if json_out:
    json.dump({"quick": quick == "1", "resp": resp, "replication": repl, "flat": flat, "memory": mem,
               "rdma_output": rdma_text[-8000:], "rdma_callgrind": cg,
               "table": [dict(zip(head, r)) for r in table]}, open(json_out, "w"), indent=1)
    print("JSON:", json_out)
PY
