#!/usr/bin/env bash
# Guest half of tests/bench/rdma_get_bench.sh: runs inside the Soft-RoCE qemu
# VM (tests/rxe/vm-run.sh) and records raw figures in OUT_DIR/results.env
# (KEY=VALUE) plus kvctl's JSON and perftest's output; the host half prints
# the table. Works on any machine with an ACTIVE device $KV_BENCH_DEV whose
# IPv4 address is $KV_BENCH_IP.
#
# Usage: rdma_get_bench_guest.sh OUT_DIR   (OUT_DIR holds kvserver and kvctl)
#
# Environment (optional): KV_BENCH_LAT_OPS GETs per latency run and
# ib_read_lat -n (3000); KV_BENCH_LAT_KEYS keys of the 64 B runs (100, so
# that all but the first GET of each key hit the cache); KV_BENCH_BW_SECS
# seconds of the 1 MiB run (8); KV_BENCH_BW_KEYS 1 MiB keys (16);
# KV_BENCH_PERF_N ib_read_bw -n iterations (200); KV_BENCH_DEV (rxe0);
# KV_BENCH_IP (10.0.2.15).
#
# Steps: kvserver --transport=rdma; 64 B keys preloaded over TCP; GET
# latency at concurrency 1 with the location cache (hits) and with
# --rdma_location_cache_entries=0 (every GET two READs: the miss path); 1 MiB
# keys preloaded over TCP and GET for BW_SECS at concurrency 1, once with
# Get() (the value copied into a std::string) and once with --zero-copy
# (GetInto a registered buffer: the NIC writes the value there).
# ib_read_lat -s 64 runs right before the hit run and right after the miss
# run, ib_read_bw -s 1048576 right before and after the 1 MiB runs.
set -uo pipefail

OUT=${1:?usage: rdma_get_bench_guest.sh OUT_DIR}
LAT_OPS=${KV_BENCH_LAT_OPS:-3000}
LAT_KEYS=${KV_BENCH_LAT_KEYS:-100}
BW_SECS=${KV_BENCH_BW_SECS:-8}
BW_KEYS=${KV_BENCH_BW_KEYS:-16}
PERF_N=${KV_BENCH_PERF_N:-200}
DEV=${KV_BENCH_DEV:-rxe0}
IP=${KV_BENCH_IP:-10.0.2.15}
KVSERVER=$OUT/kvserver
KVCTL=$OUT/kvctl
RES=$OUT/results.env
W=$(mktemp -d /tmp/kvbench-get.XXXXXX)
: >"$RES"
T0=$(date +%s%N)
say() { printf '[guest %6.1fs] %s\n' "$((($(date +%s%N) - T0) / 1000000))e-3" "$*"; }
rec() { echo "$1=$2" >>"$RES"; }
SERVER_PID=
die() {
    say "FAILED: $*"
    rec error "\"$*\""
    [[ -n $SERVER_PID ]] && kill "$SERVER_PID" 2>/dev/null
    [[ -f $W/kvserver.log ]] && cp "$W/kvserver.log" "$OUT/kvserver.log"
    exit 1
}
# kvbench NAME TRANSPORT ARGS...: one kvctl bench run, JSON to OUT/NAME.json.
kvbench() {
    local name=$1 transport=$2
    shift 2
    # shellcheck disable=SC2086 # KVCTL_EXTRA: global kvctl flags, word-split on purpose
    timeout 300 "$KVCTL" --server="127.0.0.1:$CTL" --transport="$transport" ${KVCTL_EXTRA:-} --json bench "$@" \
        >"$OUT/$name.json" 2>"$OUT/$name.err" || { tail -n 5 "$OUT/$name.err"; return 1; }
}

rec nproc "$(nproc)"
rec kernel "$(uname -r)"
rec lat_ops "$LAT_OPS"
rec lat_keys "$LAT_KEYS"
ibv_devinfo -d "$DEV" 2>/dev/null | grep -q PORT_ACTIVE || die "$DEV has no ACTIVE port"

say "starting kvserver --transport=rdma --rdma_device=$DEV"
"$KVSERVER" --transport=rdma --rdma_device="$DEV" --control_port=0 --resp_port=0 \
    --ready_file="$W/ready" --pool_size=256M >"$W/kvserver.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 600); do
    grep -q '^epoch=' "$W/ready" 2>/dev/null && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
done
grep -q '^epoch=' "$W/ready" 2>/dev/null || die "kvserver did not start: $(tail -n 3 "$W/kvserver.log")"
CTL=$(sed -n 's/^control_port=//p' "$W/ready")

# perf NAME TOOL PORT ARGS...: server and client of TOOL here; the client
# retries while the server is not listening yet.
perf() {
    local name=$1 tool=$2 port=$3 spid rc=0
    shift 3
    timeout 120 "$tool" -d "$DEV" -F -p "$port" "$@" >"$OUT/$name.server.txt" 2>&1 &
    spid=$!
    for _ in $(seq 40); do
        rc=0
        timeout 120 "$tool" -d "$DEV" -F -p "$port" "$@" "$IP" >"$OUT/$name.txt" 2>&1 || rc=$?
        ((rc != 0)) && grep -q "Couldn't connect" "$OUT/$name.txt" && { sleep 0.5; continue; }
        break
    done
    wait "$spid"
    ((rc == 0))
}
perf_row() { awk -v s="$2" '$1 == s {print; exit}' "$OUT/$1.txt"; }
# lat_peer NAME PORT / bw_peer NAME PORT: perftest's figure, recorded as NAME_row.
lat_peer() {
    say "ib_read_lat -s 64 -n $LAT_OPS ($1)"
    perf "$1" ib_read_lat "$2" -s 64 -n "$LAT_OPS" || die "ib_read_lat failed"
    rec "$1_row" "\"$(perf_row "$1" 64)\""
}
bw_peer() {
    say "ib_read_bw -s 1048576 -n $PERF_N ($1)"
    perf "$1" ib_read_bw "$2" -s 1048576 -n "$PERF_N" || die "ib_read_bw failed"
    rec "$1_row" "\"$(perf_row "$1" 1048576)\""
}

# kvctl bench names its keys bench:00000000 upward whatever the value size,
# so the 1 MiB values overwrite the first BW_KEYS small ones: they are
# loaded only after the latency runs (loaded first, they made 16 % of the
# "64 B" GETs 1 MiB GETs and the p99 ~50 ms).
say "preloading $LAT_KEYS x 64 B (over TCP: only the GETs are measured)"
kvbench preload_small tcp --keys="$LAT_KEYS" --value-size=64 --get-ratio=0 --ops=1 --seed=1 ||
    die "preload of 64 B values failed"

# perftest runs right before and right after kvstore's runs (kvserver
# stays up: its poller sleeps on the completion channel while no commit
# arrives), and the host half compares with the mean of the two: the VM's
# speed drifts within a round, so the peer is measured when kvstore is.
lat_peer perf_lat_a 18531
say "64 B GET latency, cache on (hits): $LAT_OPS GETs over $LAT_KEYS keys, 1 thread"
kvbench lat_hit rdma --keys="$LAT_KEYS" --value-size=64 --get-ratio=1 --ops="$LAT_OPS" \
    --concurrency=1 --no-preload --seed=3 || die "hit latency run failed"
say "64 B GET latency, cache off (two READs every GET)"
KVCTL_EXTRA=--rdma_location_cache_entries=0 kvbench lat_miss rdma --keys="$LAT_KEYS" --value-size=64 \
    --get-ratio=1 --ops="$LAT_OPS" --concurrency=1 --no-preload --seed=3 || die "miss latency run failed"
lat_peer perf_lat_b 18532
say "preloading $BW_KEYS x 1 MiB over TCP (the same key names: they replace the first 64 B ones)"
kvbench preload_big tcp --keys="$BW_KEYS" --value-size=1M --get-ratio=0 --ops=1 --seed=1 ||
    die "preload of 1 MiB values failed"
bw_peer perf_bw_a 18533
say "1 MiB GET throughput: ${BW_SECS}s, 1 thread"
kvbench bw_get rdma --keys="$BW_KEYS" --value-size=1M --get-ratio=1 --duration="${BW_SECS}s" \
    --concurrency=1 --no-preload --seed=5 || die "1 MiB run failed"
say "1 MiB GET throughput, zero copy (GetInto a registered buffer): ${BW_SECS}s, 1 thread"
kvbench bw_get_zc rdma --keys="$BW_KEYS" --value-size=1M --get-ratio=1 --duration="${BW_SECS}s" \
    --concurrency=1 --no-preload --seed=5 --zero-copy || die "1 MiB zero-copy run failed"
bw_peer perf_bw_b 18534
say "stopping kvserver"
kill -TERM "$SERVER_PID"
wait "$SERVER_PID"
SERVER_PID=
cp "$W/kvserver.log" "$OUT/kvserver.log"

say "done"
exit 0
