#!/usr/bin/env bash
# What replication costs, kvstore cluster against Redis Cluster, measured side
# by side in one run with the same third-party client (redis-benchmark
# --cluster). Prints a table; a benchmark, not a test (nothing is gated).
#
#   tests/bench/replication_vs_redis.sh [--quick] [--json FILE] [--requests N]
#                     [--seconds S] [--only kvstore|redis] [--replicas 1,2,3]
#                     [--pool SIZE] [--logs DIR] [--kvserver BIN --kvctl BIN]
#                     [--callgrind DIR] [--repeat N]
#
# For each replication factor R of --replicas (default 1,2,3):
#   kvstore: a local etcd (started once, for the whole run) and a fresh
#     cluster of three kvservers (--etcd, --replicas=R, --cluster_min_nodes=3,
#     --transport=tcp, --pool_size=3G or --pool, cluster name bench-rR-PID), ready once
#     every node's map (kvctl --json cluster status) has all 16384 slots, every
#     shard R in-sync replicas and none syncing, and every node's CLUSTER INFO
#     says cluster_state:ok.
#   redis: a fresh Redis Cluster of 3 primaries and 3 x (R-1) replicas
#     (redis-server --cluster-enabled yes, --save '' --appendonly no;
#     redis-cli --cluster create --cluster-replicas R-1), ready once every node
#     says cluster_state:ok, every replica master_link_status:up and every
#     primary connected_slaves:R-1.
# Everything binds 127.0.0.1 with ports picked here.
#
# Why a 3 GiB pool: redis-benchmark --cluster puts one hash tag per primary
# in its keys, so -r 100000 writes 300,000 keys, 1.26 GB of 4 KiB entries;
# at R=3 every node holds them all. A 1 GiB pool cannot (backups refuse
# writes for want of space and are dropped), and at R=2 (0.84 GB a node) it
# is 80 % full, where the cleaner's copying, not replication, is what is
# measured. Redis keeps the same data in memory it allocates as it goes.
#
# Rows, for each system and R (redis-benchmark --cluster, SET only, 4 KiB
# values, 32 connections, random keys from a 100,000 key space, -r fixed;
# redis-benchmark 7.0 has no seed option): unpipelined, then pipeline 16.
# Each row has ops/s, and the servers' CPU time per SET: utime+stime from
# /proc/<pid>/stat of every server process of that cluster (not etcd),
# summed, over the run, divided by the SETs; etcd's own CPU per SET is a
# separate column; "batch" is the mean number of writes per replication
# stream message (kvstore, from the nodes' /metrics). "ratio" is the CPU per SET over that system's R=1 row
# with the same pipeline. "cs/SET" is the servers' context switches per SET
# (voluntary + involuntary, every thread summed; the JSON has both): each is
# a thread put to sleep and woken again, which costs CPU time, on a VM a
# few microseconds, that no instruction count shows.
#
# Stall probe: a third run of the unpipelined load, sized to outlast the
# probe, during which /usr/bin/python3 (redis-py, python3-redis) sends one
# PING a millisecond to the RESP port of the node redis-benchmark was
# pointed at (a kvserver; a Redis primary) and times each with
# time.perf_counter. It starts once that node's CPU time shows the load
# running and stops after a fixed time; the load is then stopped (its
# redis-benchmark still running when the probe ended is checked and shown as
# "overlap"). PING p50/p99 go on the unpipelined row.
#
# Row size: one system's rate falls ~10x from R=1 to R=2 (kvstore), so by
# default each row's SET count is sized to last about --seconds (15; 3 with
# --quick) from an unmeasured run of the same load just before it (30,000
# SETs, 100,000 pipelined; it also warms the connections up; rows come out
# at 0.5-0.9 of --seconds, since that run still undercounts the rate a
# little), between 20,000 and 3,000,000 SETs (the count is in the table).
# --requests N fixes it instead: N SETs unpipelined, 3 N with -P 16, no
# sizing run. --quick is a smoke run (~3 minutes, probe
# 3 s instead of 10 s). --only runs one system. --logs DIR keeps the servers' and
# redis-benchmark's logs (otherwise removed with the temporary directory).
# --kvserver/--kvctl run given binaries instead of building this checkout's.
# --repeat N runs each row N times on the same cluster, one after the other,
# and reports the run with the median CPU per SET (its ops/s, latency and
# batch too); every run's CPU per SET is in the "CPU runs" column. On these
# shared hosts a row's CPU per SET moves 10-20 % between runs, and a ratio
# between two rows twice that: the median of 3 is the figure to compare.
#
# --callgrind DIR: instructions instead of time, for comparing builds on a
# busy machine (CPU time per SET moves ±20 % between runs here; instruction
# counts repeat to within a few tenths of a percent). kvstore only, no PING
# probe; every kvserver runs under valgrind --tool=callgrind
# --separate-threads=yes (dumps in DIR; --member_ttl=20s, since valgrind runs
# a node's threads one at a time; a 512M pool unless --pool), and each row
# also gets the user-space instructions per SET of its RESP loops and of its
# backups' replication connections, every node summed
# (tests/bench/callgrind_threads.py), with their ratio to R=1. Use --requests
# (e.g. 30000: a few minutes); the kernel's share is not in these counts.
set -euo pipefail
cd "$(dirname "$0")/../.."

QUICK=0
JSON_OUT=""
ONLY=""
REPLICAS=1,2,3
REQUESTS=""
POOL=3G
POOL_SET=0
LOGS=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --json) JSON_OUT="$2"; shift ;;
    --only) ONLY="$2"; shift ;;
    --replicas) REPLICAS="$2"; shift ;;
    --requests) REQUESTS="$2"; shift ;;
    --seconds) ROW_S="$2"; shift ;;
    --pool) POOL="$2"; POOL_SET=1; shift ;;
    --logs) LOGS="$2"; shift ;;
    --kvserver) KVSERVER_BIN="$2"; shift ;;
    --kvctl) KVCTL_BIN="$2"; shift ;;
    --callgrind) CALLGRIND="$2"; shift ;;
    --repeat) REPEAT="$2"; shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[[ -z $ONLY || $ONLY == kvstore || $ONLY == redis ]] || { echo "--only takes kvstore or redis" >&2; exit 2; }
[[ $REPLICAS =~ ^[123](,[123])*$ ]] || { echo "--replicas takes a list of 1, 2, 3 (e.g. 1,2,3)" >&2; exit 2; }
[[ -z $REQUESTS || $REQUESTS =~ ^[1-9][0-9]*$ ]] || { echo "--requests takes a positive number" >&2; exit 2; }
[[ -z ${ROW_S:-} || $ROW_S =~ ^[1-9][0-9]*$ ]] || { echo "--seconds takes a positive number" >&2; exit 2; }
REPEAT=${REPEAT:-1}
[[ $REPEAT =~ ^[1-9][0-9]*$ ]] || { echo "--repeat takes a positive number" >&2; exit 2; }
IFS=, read -r -a RS <<<"$REPLICAS"
CALLGRIND=${CALLGRIND:-}
READY_S=120
if [[ -n $CALLGRIND ]]; then
  [[ $ONLY != redis ]] || { echo "--callgrind measures kvstore only" >&2; exit 2; }
  [[ $REPEAT == 1 ]] || { echo "--callgrind counts instructions, which repeat: no --repeat" >&2; exit 2; }
  ONLY=kvstore
  for tool in valgrind callgrind_control; do
    command -v "$tool" >/dev/null || { echo "missing $tool (valgrind): run deploy/setup.sh" >&2; exit 1; }
  done
  mkdir -p "$CALLGRIND"
  CALLGRIND=$(cd "$CALLGRIND" && pwd)
  rm -f "$CALLGRIND"/r[123]-n[123].out* "$CALLGRIND/instructions.csv"
  [[ $POOL_SET == 1 ]] || POOL=512M
  READY_S=400  # a node under valgrind prefaults its pool slowly
fi
SYSTEMS=()
[[ $ONLY != redis ]] && SYSTEMS+=(kvstore)
[[ $ONLY != kvstore ]] && SYSTEMS+=(redis)

for tool in redis-server redis-cli redis-benchmark python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool: run deploy/setup.sh" >&2; exit 1; }
done
/usr/bin/python3 -c 'import redis' 2>/dev/null ||
  { echo "/usr/bin/python3 has no redis module (python3-redis): run deploy/setup.sh" >&2; exit 1; }

if [[ $ONLY != redis ]]; then
  command -v etcd >/dev/null || { echo "missing etcd (etcd-server): run deploy/setup.sh" >&2; exit 1; }
  if [[ -n ${KVSERVER_BIN:-} || -n ${KVCTL_BIN:-} ]]; then
    [[ -x ${KVSERVER_BIN:-} && -x ${KVCTL_BIN:-} ]] || { echo "--kvserver and --kvctl need executables" >&2; exit 2; }
  else
    command -v bazel >/dev/null || { echo "missing bazel: run deploy/setup.sh (or give --kvserver/--kvctl)" >&2; exit 1; }
    echo "==> building kvserver and kvctl"
    bazel build -c opt //server:kvserver //client/kvctl 2>&1 | tail -1
    BIN=$(bazel info -c opt bazel-bin 2>/dev/null)
    KVSERVER_BIN=$BIN/server/kvserver
    KVCTL_BIN=$BIN/client/kvctl/kvctl
  fi
fi

if [[ $QUICK == 1 ]]; then PROBE_S=3; ROW_S=${ROW_S:-3}; else PROBE_S=10; ROW_S=${ROW_S:-15}; fi
# The probe's load: far more SETs than the probe's seconds can see; it is
# stopped as soon as the probe is done.
NLOAD=100000000
KEYSPACE=100000

WORK=$(mktemp -d /tmp/kvrepl.XXXXXX)
SERVER_PIDS=()   # the servers of the cluster under test (kvservers or redis-servers)
ETCD_PID=""
LOAD_PID=""
# stop_pids PID...: SIGTERM, up to 10 s for each to exit, then SIGKILL; reaped.
stop_pids() {
  local p i
  for p in "$@"; do kill "$p" 2>/dev/null || true; done
  for p in "$@"; do
    for ((i = 0; i < 100; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
}
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  [[ -n $LOAD_PID ]] && stop_pids "$LOAD_PID"
  ((${#SERVER_PIDS[@]})) && stop_pids "${SERVER_PIDS[@]}"
  [[ -n $ETCD_PID ]] && stop_pids "$ETCD_PID"
  if [[ -n $LOGS ]]; then
    mkdir -p "$LOGS" && find "$WORK" -name '*.log' -o -name '*.err' | while read -r f; do
      cp "$f" "$LOGS/$(echo "${f#"$WORK"/}" | tr / _)"
    done
    echo "logs in $LOGS"
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() { echo "replication_vs_redis: $*" >&2; exit 1; }
# free_ports N: N distinct free TCP ports on 127.0.0.1, one a line.
free_ports() {
  python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print("\n".join(str(s.getsockname()[1]) for s in socks))
PY
}

TCK=$(getconf CLK_TCK)
# user_sys PID...: utime and stime, in clock ticks, summed over the
# processes. The command name (field 2) may hold spaces, so count fields
# after its closing ")": utime and stime are fields 14 and 15.
user_sys() {
  local p
  for p in "$@"; do sed 's/.*) //' "/proc/$p/stat"; done | awk '{u += $12; s += $13} END {print u + 0, s + 0}'
}
# ctx_switches PID...: voluntary and involuntary context switches, summed
# over every thread of the processes (/proc/PID/task/*/status). A thread
# that exits during a row takes its count with it; the servers' threads
# live as long as the cluster.
ctx_switches() {
  local p
  for p in "$@"; do cat "/proc/$p/task/"*/status 2>/dev/null; done |
    awk '$1 == "voluntary_ctxt_switches:" {v += $2} $1 == "nonvoluntary_ctxt_switches:" {n += $2}
         END {print v + 0, n + 0}'
}
# per_op COUNT OPS: COUNT per operation, 3 decimals; "-" without operations.
per_op() { awk -v c="$1" -v n="$2" 'BEGIN {if (n > 0) printf "%.3f", c / n; else print "-"}'; }
# us_per_op TICKS OPS: CPU microseconds per operation, "-" without operations.
us_per_op() { awk -v t="$1" -v n="$2" -v h="$TCK" 'BEGIN {if (n > 0) printf "%.2f", t * 1e6 / h / n; else print "-"}'; }
# alive NAME: fail, with the end of the logs, when a server process died.
alive() {
  local p
  for p in "${SERVER_PIDS[@]}" ${ETCD_PID:+"$ETCD_PID"}; do
    kill -0 "$p" 2>/dev/null && continue
    tail -n 5 "$WORK"/*/*.log "$WORK"/*.log >&2 2>/dev/null || true
    die "$1: server process $p exited"
  done
}

# --- etcd -----------------------------------------------------------------------
start_etcd() {
  local ports client peer
  mapfile -t ports < <(free_ports 2)
  client=http://127.0.0.1:${ports[0]}
  peer=http://127.0.0.1:${ports[1]}
  ETCD_ENDPOINT=127.0.0.1:${ports[0]}
  etcd --name=bench --data-dir="$WORK/etcd-data" --listen-client-urls="$client" \
    --advertise-client-urls="$client" --listen-peer-urls="$peer" \
    --initial-advertise-peer-urls="$peer" --initial-cluster="bench=$peer" \
    --logger=zap --log-outputs=stderr --log-level=warn 2>"$WORK/etcd.log" &
  ETCD_PID=$!
  local i
  for ((i = 0; i < 300; i++)); do
    python3 -c 'import sys, urllib.request; sys.exit(0 if b"true" in urllib.request.urlopen(sys.argv[1] + "/health", timeout=1).read() else 1)' \
      "$client" 2>/dev/null && return 0
    kill -0 "$ETCD_PID" 2>/dev/null || { cat "$WORK/etcd.log" >&2; die "etcd exited"; }
    sleep 0.1
  done
  cat "$WORK/etcd.log" >&2
  die "etcd did not report healthy within 30 s"
}

# --- kvstore cluster --------------------------------------------------------------
# kv_ready R: every node's map has all slots, every shard R in-sync replicas
# and nothing syncing (kvctl --json cluster status), the same epoch on all,
# and every node's CLUSTER INFO says cluster_state:ok.
kv_ready() {
  local r=$1 i out epochs=""
  for i in 0 1 2; do
    out=$("$KVCTL_BIN" --server="127.0.0.1:${KV_CTL[i]}" --transport=tcp --timeout=3s --json \
      cluster status 2>>"$WORK/kv-r$r/kvctl.err") || return 1
    epochs+=$(python3 -c '
import json, sys
m = json.loads(sys.stdin.read())
r = int(sys.argv[1])
slots = sum(e - s + 1 for sh in m["shards"] for s, e in sh["slots"])
ok = (m["replication_factor"] == r and slots == 16384 and m["shards"] and
      all(sh["up"] and len(sh["backups"]) + 1 == r and not sh["syncing"] for sh in m["shards"])
      and not m.get("migrations"))
print(m["epoch"] if ok else "no")' "$r" <<<"$out") || return 1
    epochs+=" "
    redis-cli -h 127.0.0.1 -p "${KV_RESP[i]}" cluster info 2>/dev/null | tr -d '\r' |
      grep -qx 'cluster_state:ok' || return 1
  done
  [[ $epochs != *no* ]] && [[ $(tr ' ' '\n' <<<"$epochs" | sort -u | grep -c .) == 1 ]]
}

start_kvstore() {
  local r=$1 i t0=$SECONDS
  local dir=$WORK/kv-r$r
  mkdir -p "$dir"
  (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/secret")
  SERVER_PIDS=()
  local pre=() ttl=()
  for i in 1 2 3; do
    if [[ -n $CALLGRIND ]]; then
      pre=(valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$CALLGRIND/r$r-n$i.out")
      ttl=(--member_ttl=20s)
    fi
    "${pre[@]}" "$KVSERVER_BIN" "${ttl[@]}" --etcd="$ETCD_ENDPOINT" --cluster_name="bench-r$r-$$" --node_id="n$i" \
      --cluster_secret_file="$dir/secret" --replicas="$r" --cluster_min_nodes=3 \
      --listen=127.0.0.1 --advertise_host=127.0.0.1 --control_port=0 --resp_port=0 \
      --transport=tcp --pool_size="$POOL" --metrics_port=0 --ready_file="$dir/n$i.ready" \
      2>"$dir/n$i.log" &
    SERVER_PIDS+=("$!")
  done
  KV_CTL=() KV_RESP=() KV_METRICS=()
  for i in 1 2 3; do
    # Each node prefaults its pool before it writes the ready file.
    while [[ ! -f $dir/n$i.ready ]]; do
      ((SECONDS - t0 < READY_S)) || { tail -n 20 "$dir/n$i.log" >&2; die "kvserver n$i not ready within $READY_S s"; }
      kill -0 "${SERVER_PIDS[i - 1]}" 2>/dev/null || { tail -n 20 "$dir/n$i.log" >&2; die "kvserver n$i exited"; }
      sleep 0.1
    done
    KV_CTL+=("$(sed -n 's/^control_port=//p' "$dir/n$i.ready")")
    KV_RESP+=("$(sed -n 's/^resp_port=//p' "$dir/n$i.ready")")
    KV_METRICS+=("$(sed -n 's/^metrics_port=//p' "$dir/n$i.ready")")
  done
  until kv_ready "$r"; do
    if ((SECONDS - t0 >= READY_S)); then
      "$KVCTL_BIN" --server="127.0.0.1:${KV_CTL[0]}" --transport=tcp --timeout=3s cluster status >&2 || true
      tail -n 10 "$dir"/n*.log >&2
      die "kvstore R=$r: shards not all in sync within $READY_S s"
    fi
    alive "kvstore R=$r start"
    sleep 0.5
  done
  ENTRY_PORT=${KV_RESP[0]}
  ENTRY_PID=${SERVER_PIDS[0]}
  echo "    3 kvservers (resp ports ${KV_RESP[*]}), every shard $r in-sync replica(s), after $((SECONDS - t0)) s"
  "$KVCTL_BIN" --server="127.0.0.1:${KV_CTL[0]}" --transport=tcp --timeout=3s cluster status | sed 's/^/    /'
}

# --- Redis Cluster ----------------------------------------------------------------
redis_ready() {
  local r=$1 p masters slaves
  for p in "${REDIS_PORTS[@]}"; do
    redis-cli -h 127.0.0.1 -p "$p" cluster info 2>/dev/null | tr -d '\r' | grep -qx 'cluster_state:ok' || return 1
    case $(redis-cli -h 127.0.0.1 -p "$p" role 2>/dev/null | head -n 1) in
      master) redis-cli -h 127.0.0.1 -p "$p" info replication | tr -d '\r' |
        grep -qx "connected_slaves:$((r - 1))" || return 1 ;;
      slave) redis-cli -h 127.0.0.1 -p "$p" info replication | tr -d '\r' |
        grep -qx 'master_link_status:up' || return 1 ;;
      *) return 1 ;;
    esac
    # Every node must know every role: redis-benchmark reads CLUSTER NODES.
    masters=$(redis-cli -h 127.0.0.1 -p "$p" cluster nodes | awk '$3 ~ /master/ && NF > 8' | wc -l)
    slaves=$(redis-cli -h 127.0.0.1 -p "$p" cluster nodes | awk '$3 ~ /slave/' | wc -l)
    [[ $masters == 3 && $slaves == $((3 * (r - 1))) ]] || return 1
  done
}

start_redis() {
  local r=$1 i p ports t0=$SECONDS addrs=()
  local dir=$WORK/redis-r$r n=$((3 * r))
  mkdir -p "$dir"
  mapfile -t ports < <(free_ports $((2 * n)))
  SERVER_PIDS=() REDIS_PORTS=()
  for ((i = 0; i < n; i++)); do
    p=${ports[i]}
    mkdir -p "$dir/$p"
    redis-server --port "$p" --cluster-port "${ports[n + i]}" --bind 127.0.0.1 --protected-mode no \
      --cluster-enabled yes --cluster-config-file "$dir/$p/nodes.conf" --dir "$dir/$p" \
      --save '' --appendonly no --daemonize no --logfile "$dir/$p/redis.log" &
    SERVER_PIDS+=("$!")
    REDIS_PORTS+=("$p")
    addrs+=("127.0.0.1:$p")
  done
  for p in "${REDIS_PORTS[@]}"; do
    until redis-cli -h 127.0.0.1 -p "$p" ping >/dev/null 2>&1; do
      ((SECONDS - t0 < 30)) || die "redis-server on $p did not answer within 30 s"
      alive "redis R=$r start"
      sleep 0.1
    done
  done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas $((r - 1)) --cluster-yes \
    >"$dir/create.log" 2>&1 || { cat "$dir/create.log" >&2; die "redis-cli --cluster create failed"; }
  until redis_ready "$r"; do
    ((SECONDS - t0 < 120)) || die "redis R=$r: cluster not ok / replicas not attached within 120 s"
    alive "redis R=$r start"
    sleep 0.5
  done
  ENTRY_PORT="" ENTRY_PID=""
  for ((i = 0; i < n; i++)); do
    if [[ $(redis-cli -h 127.0.0.1 -p "${REDIS_PORTS[i]}" role | head -n 1) == master ]]; then
      ENTRY_PORT=${REDIS_PORTS[i]} ENTRY_PID=${SERVER_PIDS[i]}
      break
    fi
  done
  echo "    $n redis-servers (3 primaries, $((n - 3)) replicas), cluster_state:ok, replicas linked, after $((SECONDS - t0)) s"
}

# --- measurements -------------------------------------------------------------------
RESULTS="$WORK/results.csv"
echo "system,R,pipeline,requests,ops_per_s,p50_ms,p99_ms,cpu_us_per_set,user_us_per_set,sys_us_per_set,etcd_us_per_set,server_processes,bench_stderr_lines,writes_per_batch,vol_cs_per_set,invol_cs_per_set,ping_p50_us,ping_p99_us,ping_max_us,pings,probe_overlap,cpu_us_per_set_runs" >"$RESULTS"
NOTES="$WORK/notes.txt"
: >"$NOTES"

# size PIPELINE: SETs for a row of about ROW_S seconds, from an unmeasured
# run of the same load (or --requests). That run is long enough (a few
# tenths of a second at kvstore's R=1 rates) for its rate to be close to
# the load's: with 3,000 and 8,000 SETs, redis-benchmark's start
# (connections to every node, the slot map) was most of it, its rate came
# out 5-10x too low, and rows meant to last 10 s lasted 1.5-3 s.
size() {
  local pipe=$1 cal=30000 rps
  [[ $pipe == 1 ]] || cal=100000
  if [[ -n $REQUESTS ]]; then
    if [[ $pipe == 1 ]]; then echo "$REQUESTS"; else echo $((3 * REQUESTS)); fi
    return 0
  fi
  rps=$(redis-benchmark --cluster -h 127.0.0.1 -p "$ENTRY_PORT" -t set -d 4096 -c 32 -n "$cal" \
    -r "$KEYSPACE" -P "$pipe" --csv 2>/dev/null | tr -d '"\r' | awk -F, '$1 == "SET" {print $2}') || true
  awk -v rps="${rps:-0}" -v s="$ROW_S" 'BEGIN {
    n = int(rps * s / 1000) * 1000; if (n < 20000) n = 20000; if (n > 3000000) n = 3000000; print n }'
}

# "writes batches": the replication streams' counters summed over the
# kvstore nodes (replication_stream.h), for the mean batch size.
stream_counters() {
  local p w=0 b=0 m v
  for p in "${KV_METRICS[@]}"; do
    m=$(curl -s "http://127.0.0.1:$p/metrics" || true)
    v=$(awk '$1 == "kvstore_replication_stream_writes_total" {printf "%d", $2}' <<<"$m")
    w=$((w + ${v:-0}))
    v=$(awk '$1 == "kvstore_replication_stream_batches_total" {printf "%d", $2}' <<<"$m")
    b=$((b + ${v:-0}))
  done
  echo "$w $b"
}

# bench SYSTEM R PIPELINE: one measured redis-benchmark run; sets ROW to the
# CSV fields up to the context switches per SET.
bench() {
  local sys=$1 r=$2 pipe=$3 n u0 s0 u1 s1 e0=0 e1=0 line rc=0 err w0=0 b0=0 w1=0 b1=0 v0 i0 v1 i1
  err=$WORK/$sys-r$r-P$pipe.err
  n=$(size "$pipe")
  [[ $sys == kvstore ]] && read -r w0 b0 <<<"$(stream_counters)"
  read -r u0 s0 <<<"$(user_sys "${SERVER_PIDS[@]}")"
  read -r v0 i0 <<<"$(ctx_switches "${SERVER_PIDS[@]}")"
  [[ -n $ETCD_PID && $sys == kvstore ]] && e0=$(user_sys "$ETCD_PID" | awk '{print $1 + $2}')
  # --callgrind: counters from zero for this row, dumped after it.
  [[ -n $CALLGRIND ]] && for p in "${SERVER_PIDS[@]}"; do callgrind_control -z "$p" >/dev/null; done
  line=$(redis-benchmark --cluster -h 127.0.0.1 -p "$ENTRY_PORT" -t set -d 4096 -c 32 -n "$n" \
    -r "$KEYSPACE" -P "$pipe" --csv 2>"$err") || rc=$?
  if [[ -n $CALLGRIND ]]; then
    for p in "${SERVER_PIDS[@]}"; do callgrind_control --dump="r$r-P$pipe" "$p" >/dev/null; done
    # Each node's dumps are numbered in order: the P1 row's are .1-*, P16's .2-*.
    /usr/bin/python3 tests/bench/callgrind_threads.py add "$CALLGRIND/instructions.csv" "$r" "$pipe" "$n" \
      "$CALLGRIND/r$r-n"[123].out."$([[ $pipe == 1 ]] && echo 1 || echo 2)"-*
  fi
  read -r u1 s1 <<<"$(user_sys "${SERVER_PIDS[@]}")"
  read -r v1 i1 <<<"$(ctx_switches "${SERVER_PIDS[@]}")"
  [[ $sys == kvstore ]] && read -r w1 b1 <<<"$(stream_counters)"
  [[ -n $ETCD_PID && $sys == kvstore ]] && e1=$(user_sys "$ETCD_PID" | awk '{print $1 + $2}')
  alive "$sys R=$r P$pipe"
  # --csv: "SET","rps","avg","min","p50","p95","p99","max"
  line=$(tr -d '"\r' <<<"$line" | awk -F, '$1 == "SET" {printf "%s,%s,%s", $2, $5, $7}')
  [[ -n $line ]] || line="0,-,-"
  [[ $rc == 0 ]] || echo "$sys R=$r P$pipe: redis-benchmark exited $rc" >>"$NOTES"
  local errs
  errs=$(tr '\r' '\n' <"$err" | grep -c . || true)
  if ((errs)); then
    { echo "$sys R=$r P$pipe: $errs line(s) on redis-benchmark's stderr, first ones:"
      tr '\r' '\n' <"$err" | grep . | sort | uniq -c | sort -rn | head -n 5 | sed 's/^/    /'; } >>"$NOTES"
  fi
  local etcd=-
  [[ $sys == kvstore ]] && etcd=$(us_per_op $((e1 - e0)) "$n")
  local batch=-
  ((b1 > b0)) && batch=$(awk -v w=$((w1 - w0)) -v b=$((b1 - b0)) 'BEGIN {printf "%.1f", w / b}')
  ROW="$sys,$r,$pipe,$n,$line,$(us_per_op $((u1 + s1 - u0 - s0)) "$n"),$(us_per_op $((u1 - u0)) "$n"),$(us_per_op $((s1 - s0)) "$n"),$etcd,${#SERVER_PIDS[@]},$errs,$batch,$(per_op $((v1 - v0)) "$n"),$(per_op $((i1 - i0)) "$n")"
  echo "    P$pipe: $n SETs, $(cut -d, -f5 <<<"$ROW") SET/s, $(cut -d, -f8 <<<"$ROW") us CPU per SET, $batch writes per stream batch"
}

# bench_repeated SYSTEM R PIPELINE: bench() --repeat times; ROW is the run
# with the median CPU per SET (the lower middle one of an even count), RUNS
# every run's CPU per SET in order, "/"-separated.
bench_repeated() {
  local rows=() i
  for ((i = 0; i < REPEAT; i++)); do
    bench "$@"
    rows+=("$ROW")
  done
  RUNS=$(printf '%s\n' "${rows[@]}" | cut -d, -f8 | paste -sd/)
  ROW=$(printf '%s\n' "${rows[@]}" | sort -t, -k8,8g | sed -n "$(((REPEAT + 1) / 2))p")
}

# probe SYSTEM R: PING latency on ENTRY_PORT while an unpipelined SET load
# runs; sets PROBE to "p50,p99,max,count,overlap".
probe() {
  local sys=$1 r=$2 c0 t0=$SECONDS out overlap=no
  c0=$(user_sys "$ENTRY_PID" | awk '{print $1 + $2}')
  redis-benchmark --cluster -h 127.0.0.1 -p "$ENTRY_PORT" -t set -d 4096 -c 32 -n "$NLOAD" \
    -r "$KEYSPACE" --csv >/dev/null 2>"$WORK/$sys-r$r-probe-load.err" &
  LOAD_PID=$!
  # The load is on once the node has spent 0.3 s of CPU since it started.
  while (($(user_sys "$ENTRY_PID" | awk '{print $1 + $2}') - c0 < 3 * TCK / 10)); do
    kill -0 "$LOAD_PID" 2>/dev/null || die "$sys R=$r: the probe's load exited at once ($(head -c 300 "$WORK/$sys-r$r-probe-load.err"))"
    ((SECONDS - t0 < 60)) || die "$sys R=$r: the probe's load did not start within 60 s"
    sleep 0.05
  done
  out=$(/usr/bin/python3 - "$ENTRY_PORT" "$PROBE_S" <<'PY'
import sys, time
import redis
port, secs = int(sys.argv[1]), float(sys.argv[2])
r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=30)
r.execute_command("PING")
lat = []
end = time.perf_counter() + secs
while time.perf_counter() < end:
    t = time.perf_counter()
    r.execute_command("PING")
    lat.append((time.perf_counter() - t) * 1e6)
    time.sleep(0.001)  # one PING a millisecond: a probe, not a load
lat.sort()
q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))]
print(f"{q(0.50):.0f},{q(0.99):.0f},{lat[-1]:.0f},{len(lat)}")
PY
  ) || out="-,-,-,0"
  kill -0 "$LOAD_PID" 2>/dev/null && overlap=yes
  stop_pids "$LOAD_PID"
  LOAD_PID=""
  alive "$sys R=$r probe"
  PROBE="$out,$overlap"
  echo "    PING under load: p50 $(cut -d, -f1 <<<"$out") us, p99 $(cut -d, -f2 <<<"$out") us ($(cut -d, -f4 <<<"$out") pings, load running throughout: $overlap)"
}

# The servers' warnings and errors (glog W/E lines) go into the notes.
kv_log_notes() {
  local r=$1 f n
  for f in "$WORK/kv-r$r"/n*.log; do
    n=$(grep -c '^[EWF][0-9]' "$f" || true)
    ((n)) || continue
    { echo "kvstore R=$r $(basename "$f" .log): $n warning/error line(s), first ones:"
      # awk, not grep | head: under pipefail head's early exit would kill grep (SIGPIPE).
      awk '/^[EWF][0-9]/ && n++ < 5 {print "    " substr($0, 1, 240)}' "$f"; } >>"$NOTES"
  done
}

REDIS_VERSION=$(redis-server --version | awk '{sub(/^v=/, "", $3); print $3}')
echo "==> machine: $(nproc) cores, $(uname -r); redis $REDIS_VERSION$(
  [[ $ONLY != redis ]] && echo "; etcd $(etcd --version | awk '/etcd Version/ {print $3}')")"
if [[ -n $REQUESTS ]]; then rows="$REQUESTS SETs unpipelined, $((3 * REQUESTS)) with -P 16"; else rows="rows of ~${ROW_S} s"; fi
echo "    SET 4 KiB values, 32 connections, -r $KEYSPACE: $rows; PING probe ${PROBE_S} s"
[[ $ONLY != redis ]] && { echo "    kvserver: $KVSERVER_BIN"; start_etcd; }

for r in "${RS[@]}"; do
  for sys in "${SYSTEMS[@]}"; do
    if [[ $sys == kvstore ]]; then
      echo "==> kvstore, R=$r"
      start_kvstore "$r"
    else
      # Redis R=r: 3 primaries with r-1 replicas each.
      echo "==> redis, R=$r"
      start_redis "$r"
    fi
    bench_repeated "$sys" "$r" 1; ROW1=$ROW RUNS1=$RUNS
    bench_repeated "$sys" "$r" 16; ROW16=$ROW RUNS16=$RUNS
    if [[ -n $CALLGRIND ]]; then PROBE="-,-,-,0,-"; else probe "$sys" "$r"; fi
    echo "$ROW1,$PROBE,$RUNS1" >>"$RESULTS"
    echo "$ROW16,-,-,-,-,-,$RUNS16" >>"$RESULTS"
    [[ $sys == kvstore ]] && kv_log_notes "$r"
    stop_pids "${SERVER_PIDS[@]}"
    SERVER_PIDS=()
  done
done

echo
echo "Results (SET, 4 KiB values, 32 connections; CPU: all server processes of the cluster, us per SET;"
echo "ratio: CPU per SET over the same system's R=1 row with the same pipeline; PING under the unpipelined load)"
python3 - "$RESULTS" "${JSON_OUT:-}" "$(nproc)" "$(uname -r)" "$REDIS_VERSION" <<'PY'
import csv, json, sys
path, out, cores, kernel, redis_version = sys.argv[1:6]
rows = list(csv.DictReader(open(path)))
base = {(r["system"], r["pipeline"]): r["cpu_us_per_set"] for r in rows if r["R"] == "1"}
for r in rows:
    b = base.get((r["system"], r["pipeline"]), "-")
    try:
        r["cpu_ratio_to_r1"] = f"{float(r['cpu_us_per_set']) / float(b):.2f}"
    except ValueError:
        r["cpu_ratio_to_r1"] = "-"
    try:
        r["cs_per_set"] = f"{float(r['vol_cs_per_set']) + float(r['invol_cs_per_set']):.3f}"
    except ValueError:
        r["cs_per_set"] = "-"
head = ["system", "R", "pipeline", "SETs", "ops/s", "CPU us/SET", "ratio", "user", "sys", "etcd us/SET",
        "procs", "batch", "cs/SET", "p99 ms", "PING p50 us", "PING p99 us", "PING max us", "pings", "overlap", "errs",
        "CPU runs"]
keys = ["system", "R", "pipeline", "requests", "ops_per_s", "cpu_us_per_set", "cpu_ratio_to_r1", "user_us_per_set",
        "sys_us_per_set", "etcd_us_per_set", "server_processes", "writes_per_batch", "cs_per_set", "p99_ms", "ping_p50_us", "ping_p99_us",
        "ping_max_us", "pings", "probe_overlap", "bench_stderr_lines", "cpu_us_per_set_runs"]
table = [head] + [[r[k] for k in keys] for r in rows]
width = [max(len(line[i]) for line in table) for i in range(len(head))]
for line in table:
    print("  ".join(v.rjust(w) if i > 0 else v.ljust(w) for i, (v, w) in enumerate(zip(line, width))))
if out:
    def num(v):
        try:
            return int(v)
        except ValueError:
            try:
                return float(v)
            except ValueError:
                return None if v == "-" else v
    rows = [{k: v if k == "system" else num(v) for k, v in r.items()} for r in rows]
    doc = {"machine": {"cores": int(cores), "kernel": kernel, "redis": redis_version},
           "workload": "redis-benchmark --cluster -t set -d 4096 -c 32 -r 100000", "rows": rows}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"JSON: {out}")
PY
if [[ -n $CALLGRIND ]]; then
  echo
  echo "User-space instructions per SET (callgrind; write path: RESP loops + backups' replication"
  echo "connections, every node summed; ratio: over R=1 with the same pipeline; dumps in $CALLGRIND)"
  /usr/bin/python3 tests/bench/callgrind_threads.py table "$CALLGRIND/instructions.csv" \
    "$([[ -n $JSON_OUT ]] && echo "${JSON_OUT%.json}.instructions.json")"
fi
if [[ -s $NOTES ]]; then
  echo
  echo "Notes:"
  cat "$NOTES"
fi
exit 0
