#!/usr/bin/env bash
# Guest half of tests/bench/rdma_get_callgrind.sh: runs inside the Soft-RoCE
# qemu VM (tests/rxe/vm-run.sh) and leaves callgrind output files, kvctl's
# JSON and perftest's output in OUT_DIR, plus OUT_DIR/results.env
# (KEY=VALUE); the host half reads the files and prints the table. Works on
# any machine with an ACTIVE device $KV_BENCH_DEV whose IPv4 address is
# $KV_BENCH_IP, and with valgrind and perftest installed.
#
# Usage: rdma_get_callgrind_guest.sh OUT_DIR   (OUT_DIR holds kvserver and kvctl)
#
# Environment (optional): KV_CALLGRIND_OPS operations N of the 64 B runs
# (8192: a multiple of the 4096 GETs per read report, so that each GET's
# share of it is exact; each case runs N and 2N); KV_CALLGRIND_BIG_OPS N of
# the 1 MiB runs (50); KV_BENCH_DEV (rxe0); KV_BENCH_IP (10.0.2.15).
#
# Every measured client runs under `valgrind --tool=callgrind
# --separate-threads=yes` twice, with N and 2N operations, so that start-up,
# connection set-up and the exit cancel out of the difference:
#   cg_hit_N / cg_hit_2N    kvctl bench, 64 B GETs with the location cache
#                           (all but the first GET of each key: one READ)
#   cg_miss_*               the same with --rdma-location-cache-entries=0
#                           (every GET: buckets' READ, then entry READ)
#   cg_big_*                1 MiB GETs through Get() (the value is copied into
#                           the returned std::string)
#   cg_bigzc_*              1 MiB GETs through GetInto (--zero-copy)
#   cg_iblat_*, cg_iblatbig_*  ib_read_lat -s 64 / -s 1048576 clients (their
#                           servers run natively)
# kvserver runs natively the whole time; values are loaded over TCP first.
set -uo pipefail

OUT=${1:?usage: rdma_get_callgrind_guest.sh OUT_DIR}
N=${KV_CALLGRIND_OPS:-8192}
NBIG=${KV_CALLGRIND_BIG_OPS:-50}
DEV=${KV_BENCH_DEV:-rxe0}
IP=${KV_BENCH_IP:-10.0.2.15}
KVSERVER=$OUT/kvserver
KVCTL=$OUT/kvctl
RES=$OUT/results.env
# 100 keys: 2N uniform picks leave none untouched, so both runs of a pair
# pay the same 100 first-GET misses and the difference holds only hits.
SMALL_KEYS=100
BIG_KEYS=4
W=$(mktemp -d /tmp/kvbench-cg.XXXXXX)
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
[[ $N =~ ^[1-9][0-9]*$ && $NBIG =~ ^[1-9][0-9]*$ ]] || die "KV_CALLGRIND_OPS/KV_CALLGRIND_BIG_OPS must be positive counts"
for tool in valgrind ib_read_lat ibv_devinfo; do
    command -v "$tool" >/dev/null || die "$tool is not installed (deploy/setup.sh)"
done

# Each process writes one file per thread: NAME.out-01, NAME.out-02, ...
# (the bench's worker is one of them; the host half finds it by its
# functions). No --dump-instr: function-level inclusive costs are enough,
# and the files stay small.
CG=(valgrind --tool=callgrind --separate-threads=yes)

rec nproc "$(nproc)"
rec kernel "$(uname -r)"
rec valgrind "$(valgrind --version)"
rec ops "$N"
rec big_ops "$NBIG"
ibv_devinfo -d "$DEV" 2>/dev/null | grep -q PORT_ACTIVE || die "$DEV has no ACTIVE port"

# --grace_period=60s: the server tells clients half its grace period as the
# longest a one-sided GET may take (max_read_span), and a client redoes a
# slower GET. Under valgrind a 1 MiB GET can outlast the default 250 ms, and
# the redone READs and checksums would be counted as the GET's own. Nothing
# writes during the measured runs, so a long grace period changes nothing
# else.
say "starting kvserver --transport=rdma --rdma_device=$DEV --grace_period=60s"
"$KVSERVER" --transport=rdma --rdma_device="$DEV" --control_port=0 --resp_port=0 \
    --ready_file="$W/ready" --pool_size=256M --grace_period=60s >"$W/kvserver.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 600); do
    grep -q '^epoch=' "$W/ready" 2>/dev/null && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
done
grep -q '^epoch=' "$W/ready" 2>/dev/null || die "kvserver did not start: $(tail -n 3 "$W/kvserver.log")"
CTL=$(sed -n 's/^control_port=//p' "$W/ready")

# load COUNT SIZE: PUT every key once over TCP (not measured).
load() {
    timeout 300 "$KVCTL" --server="127.0.0.1:$CTL" --transport=tcp --json bench --keys="$1" \
        --value-size="$2" --get-ratio=0 --ops=1 --seed=1 --concurrency=1 \
        >"$OUT/load_$2.json" 2>"$OUT/load_$2.err" || die "loading $1 x $2 failed: $(tail -n 3 "$OUT/load_$2.err")"
}

# kvcg NAME OPS KVCTL_ARGS...: one kvctl bench run under callgrind, GETs
# only, one thread. --timeout=120s: under valgrind in TCG a GET can take
# milliseconds and connecting seconds; the default 10 s would be too tight
# for a slow start. The server never drops a slow one-sided reader (its
# idle probe is an RDMA WRITE the client's NIC answers).
kvcg() {
    local name=$1 ops=$2
    shift 2
    local t=$SECONDS
    # shellcheck disable=SC2086 # KVCTL_EXTRA: global kvctl flags, word-split on purpose
    timeout 900 "${CG[@]}" --callgrind-out-file="$OUT/$name.out" \
        "$KVCTL" --server="127.0.0.1:$CTL" --transport=rdma --timeout=120s ${KVCTL_EXTRA:-} --json bench \
        --get-ratio=1 --ops="$ops" --concurrency=1 --no-preload --seed=3 "$@" \
        >"$OUT/$name.json" 2>"$OUT/$name.err" || { tail -n 5 "$OUT/$name.err"; return 1; }
    rec "${name}_seconds" "$((SECONDS - t))"
}

# iblat NAME PORT OPS SIZE: an ib_read_lat server (native) and its client
# under callgrind. The client retries while the server is not listening yet
# (a refused connect ends the valgrind run early; only the last run's files
# are kept).
iblat() {
    local name=$1 port=$2 ops=$3 size=$4 spid rc=0 t=$SECONDS
    timeout 900 ib_read_lat -d "$DEV" -F -p "$port" -s "$size" -n "$ops" >"$OUT/$name.server.txt" 2>&1 &
    spid=$!
    sleep 1
    for _ in $(seq 20); do
        rc=0
        rm -f "$OUT/$name".out*
        timeout 900 "${CG[@]}" --callgrind-out-file="$OUT/$name.out" \
            ib_read_lat -d "$DEV" -F -p "$port" -s "$size" -n "$ops" "$IP" >"$OUT/$name.txt" 2>&1 || rc=$?
        ((rc != 0)) && grep -q "Couldn't connect" "$OUT/$name.txt" && { sleep 1; continue; }
        break
    done
    # A client that never got through leaves its server waiting.
    ((rc == 0)) || kill "$spid" 2>/dev/null
    wait "$spid" || rc=$?
    rec "${name}_seconds" "$((SECONDS - t))"
    ((rc == 0)) || { tail -n 5 "$OUT/$name.txt"; return 1; }
}

say "loading $SMALL_KEYS x 64 B over TCP"
load "$SMALL_KEYS" 64
for n in "$N" "$((2 * N))"; do
    tag=$([[ $n == "$N" ]] && echo N || echo 2N)
    say "kvctl 64 B GETs, location cache on (hits), $n ops, under callgrind"
    kvcg "cg_hit_$tag" "$n" --keys="$SMALL_KEYS" --value-size=64 || die "hit run ($n) failed"
    say "kvctl 64 B GETs, location cache off (two READs each), $n ops, under callgrind"
    KVCTL_EXTRA=--rdma-location-cache-entries=0 kvcg "cg_miss_$tag" "$n" --keys="$SMALL_KEYS" \
        --value-size=64 || die "miss run ($n) failed"
    say "ib_read_lat -s 64 -n $n, client under callgrind"
    iblat "cg_iblat_$tag" "$((18540 + ${#tag}))" "$n" 64 || die "ib_read_lat -s 64 ($n) failed"
done

# The 1 MiB values replace the first BIG_KEYS small ones (kvctl bench names
# keys bench:00000000 upward whatever the size): loaded after the 64 B runs.
say "loading $BIG_KEYS x 1 MiB over TCP"
load "$BIG_KEYS" 1M
for n in "$NBIG" "$((2 * NBIG))"; do
    tag=$([[ $n == "$NBIG" ]] && echo N || echo 2N)
    say "kvctl 1 MiB GETs through Get(), $n ops, under callgrind"
    kvcg "cg_big_$tag" "$n" --keys="$BIG_KEYS" --value-size=1M || die "1 MiB run ($n) failed"
    say "kvctl 1 MiB GETs through GetInto (zero copy), $n ops, under callgrind"
    kvcg "cg_bigzc_$tag" "$n" --keys="$BIG_KEYS" --value-size=1M --zero-copy ||
        die "1 MiB zero-copy run ($n) failed"
    say "ib_read_lat -s 1048576 -n $n, client under callgrind"
    iblat "cg_iblatbig_$tag" "$((18550 + ${#tag}))" "$n" 1048576 || die "ib_read_lat -s 1048576 ($n) failed"
done

say "stopping kvserver"
kill -TERM "$SERVER_PID"
wait "$SERVER_PID"
SERVER_PID=
cp "$W/kvserver.log" "$OUT/kvserver.log"
rm -rf "$W"
say "done"
exit 0
