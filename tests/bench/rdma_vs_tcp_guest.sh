#!/usr/bin/env bash
# Guest half of tests/bench/rdma_vs_tcp.sh: runs inside the Soft-RoCE qemu VM
# (tests/rxe/vm-run.sh) and records raw measurements; the host half parses
# them and prints the table. Not meant to be run by hand, but it works on any
# machine with an ACTIVE RDMA device named $KV_BENCH_DEV whose IPv4 address is
# $KV_BENCH_IP.
#
# Usage: rdma_vs_tcp_guest.sh OUT_DIR
#
# OUT_DIR must hold kvserver and kvctl (copied there by the host so that a
# concurrent rebuild cannot swap them mid-run) and be writable; results go to
# OUT_DIR/results.env (KEY=VALUE lines) plus one file per command output.
#
# Environment (all optional):
#   KV_BENCH_GETS      GETs in each CPU-measured GET-only run (100000)
#   KV_BENCH_KEYS      keys of the small-value runs (10000)
#   KV_BENCH_CONC      client threads of the CPU runs (4)
#   KV_BENCH_LAT_OPS   GETs of each concurrency-1 latency run, and ib_read_lat -n (2000)
#   KV_BENCH_IDLE_SECS length of the idle baseline of kvserver's CPU time (10)
#   KV_BENCH_BW_SECS   seconds of each 1 MiB GET run (8)
#   KV_BENCH_PERF_SECS ib_read_bw -D seconds; the -n run does 35 x this 1 MiB READs (5)
#   KV_BENCH_BW_CONC   client threads of the 1 MiB GET run (1: more threads only
#                      split the same ~30 MB/s and push READs past the read span)
#   KV_BENCH_BW_KEYS   1 MiB keys (16)
#   KV_BENCH_DEV       RDMA device (rxe0)
#   KV_BENCH_IP        its IPv4 address, for perftest (10.0.2.15)
#
# Steps (each prints a "[guest] ..." progress line):
#   1. kvserver --transport=rdma; preload KEYS 64 B values (a PUT-only bench);
#      GET-only run over RDMA, then the same over TCP, each bracketed by
#      /proc/<kvserver>/stat utime+stime and the server's GET counters; before
#      them, kvserver's CPU time while idle for IDLE_SECS (its timer threads)
#   2. concurrency-1 latency runs, RDMA then TCP, on the same keys
#   3. 1 MiB values: preload, GET-only run over RDMA (and TCP for reference)
#   4. kvserver stopped; ib_read_lat -s 64, ib_read_bw -s 1 MiB -D and -n on
#      the device (server and client in this machine, to KV_BENCH_IP)
# Exit status: 0 when every step ran; 1 when a required step failed (the
# reason is in OUT_DIR/results.env as error=... and on stdout).
set -uo pipefail

OUT=${1:?usage: rdma_vs_tcp_guest.sh OUT_DIR}
GETS=${KV_BENCH_GETS:-100000}
KEYS=${KV_BENCH_KEYS:-10000}
CONC=${KV_BENCH_CONC:-4}
LAT_OPS=${KV_BENCH_LAT_OPS:-2000}
BW_SECS=${KV_BENCH_BW_SECS:-8}
PERF_SECS=${KV_BENCH_PERF_SECS:-5}
BW_CONC=${KV_BENCH_BW_CONC:-1}
IDLE_SECS=${KV_BENCH_IDLE_SECS:-10}
BW_KEYS=${KV_BENCH_BW_KEYS:-16}
DEV=${KV_BENCH_DEV:-rxe0}
IP=${KV_BENCH_IP:-10.0.2.15}
KVSERVER=$OUT/kvserver
KVCTL=$OUT/kvctl
RES=$OUT/results.env
W=$(mktemp -d /tmp/kvbench-guest.XXXXXX)
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

# utime+stime of a process in clock ticks (fields 14 and 15 of /proc/PID/stat;
# cut after the ")" so that a comm with spaces cannot shift them).
cpu_ticks() {
    local s
    s=$(<"/proc/$1/stat") || return 1
    s=${s##*) }
    awk '{print $12 + $13}' <<<"$s"
}
# Per-thread "TID COMM TICKS" of a process, and the difference of two such
# snapshots (threads that used CPU time in between, busiest first).
thread_ticks() {
    awk '{
        comm = $0; sub(/^[^(]*\(/, "", comm); sub(/\)[^)]*$/, "", comm); gsub(/[ \t]/, "_", comm)
        rest = $0; sub(/^.*\) /, "", rest); split(rest, f, " ")
        tid = FILENAME; sub(/\/stat$/, "", tid); sub(/^.*\//, "", tid)
        print tid, comm, f[12] + f[13]
    }' /proc/"$1"/task/*/stat 2>/dev/null | sort -k1,1
}
thread_delta() {
    join "$W/threads0" "$W/threads1" | awk '$5 - $3 > 0 {print $5 - $3, "tid", $1, $2}' | sort -rn
}
# Busy and softirq ticks of the whole machine (all CPUs) from /proc/stat.
sys_ticks() { awk '$1 == "cpu" {print $2+$3+$4+$7+$8, $8; exit}' /proc/stat; }
# GETs the server's CPU answered so far: gRPC Get (RDMA fallbacks) + RESP GET,
# i.e. kvstore_server_requests_total{op="get"} for transports grpc and tcp
# (server.counters keys are series names; JSON escapes their quotes as \").
server_gets() {
    "$KVCTL" --server="127.0.0.1:$CTL" --transport=tcp --json stat >"$W/stat.json" 2>"$W/stat.err" ||
        return 1
    local rpc resp
    rpc=$(grep -o 'kvstore_server_requests_total{op=\\"get\\",transport=\\"grpc\\"}": *[0-9]*' \
        "$W/stat.json" | grep -o '[0-9]*$')
    resp=$(grep -o 'kvstore_server_requests_total{op=\\"get\\",transport=\\"tcp\\"}": *[0-9]*' \
        "$W/stat.json" | grep -o '[0-9]*$')
    echo $((${rpc:-0} + ${resp:-0}))
}

# kvbench NAME TRANSPORT ARGS...: one kvctl bench run, JSON to OUT/NAME.json
kvbench() {
    local name=$1 transport=$2 rc=0
    shift 2
    LAST_GETS=
    timeout 300 "$KVCTL" --server="127.0.0.1:$CTL" --transport="$transport" --json bench "$@" \
        >"$OUT/$name.json" 2>"$OUT/$name.err" || rc=$?
    if ((rc != 0)); then
        tail -n 5 "$OUT/$name.err" | sed 's/^/    | /'
        return "$rc"
    fi
    grep -q "\"transport\": *\"$transport\"" "$OUT/$name.json" ||
        { echo "    | $name ran over $(grep -o '"transport": *"[a-z]*"' "$OUT/$name.json")"; return 1; }
}

# measured NAME TRANSPORT ARGS...: a kvbench run bracketed by the server's CPU
# time, the machine's CPU time and the server's GET counters.
measured() {
    local name=$1 g0 g1 c0 c1 s0 s1 t0 t1
    # The previous run's closing count serves as this one's opening count when
    # nothing ran in between (each kvctl start costs seconds under TCG).
    g0=${LAST_GETS:-}
    [[ -n $g0 ]] || g0=$(server_gets) || die "kvctl stat failed: $(cat "$W/stat.err")"
    read -r -a s0 <<<"$(sys_ticks)"
    thread_ticks "$SERVER_PID" >"$W/threads0"
    c0=$(cpu_ticks "$SERVER_PID") || die "kvserver is gone"
    t0=$(date +%s%N)
    kvbench "$@" || die "kvctl bench ($name) failed"
    t1=$(date +%s%N)
    c1=$(cpu_ticks "$SERVER_PID") || die "kvserver is gone"
    thread_ticks "$SERVER_PID" >"$W/threads1"
    thread_delta >"$OUT/${name}.threads.txt"
    read -r -a s1 <<<"$(sys_ticks)"
    g1=$(server_gets) || die "kvctl stat failed: $(cat "$W/stat.err")"
    LAST_GETS=$g1
    rec "${name}_server_ticks" $((c1 - c0))
    rec "${name}_wall_ns" $((t1 - t0))
    rec "${name}_vm_busy_ticks" $((s1[0] - s0[0]))
    rec "${name}_vm_softirq_ticks" $((s1[1] - s0[1]))
    rec "${name}_server_gets" $((g1 - g0))
    say "  $name: kvserver CPU $((c1 - c0)) ticks, server-answered GETs $((g1 - g0)), wall $(((t1 - t0) / 1000000)) ms"
}

# preload NAME KEYS VALUE_SIZE THREADS: PUT every key once (a PUT-only bench
# whose preload phase does the work) over RDMA. If the RDMA PUTs stall for
# lack of commit credits (a client bug: see the host script's notes), say so,
# record it, and preload over TCP instead: the GET runs only need the keys.
preload() {
    local name=$1 keys=$2 size=$3 threads=$4
    if kvbench "preload_${name}" rdma --timeout=5s --keys="$keys" --value-size="$size" \
        --get-ratio=0 --ops=1 --concurrency="$threads" --seed=1; then
        rec "preload_${name}_transport" rdma
        return 0
    fi
    grep -q 'no commit credit' "$OUT/preload_${name}.err" ||
        die "preload of $keys x $size values over RDMA failed"
    say "  RDMA preload stalled: $(grep -o 'preload.*keys/s' "$OUT/preload_${name}.err" | tail -1); $(tail -1 "$OUT/preload_${name}.err")"
    say "  -> preloading over TCP instead (see the notes under the table)"
    rec "preload_${name}_rdma_error" "\"$(tail -1 "$OUT/preload_${name}.err")\""
    rec "preload_${name}_rdma_progress" "\"$(grep -o 'preload.*keys/s' "$OUT/preload_${name}.err" | tail -1)\""
    kvbench "preload_${name}_tcp" tcp --keys="$keys" --value-size="$size" --get-ratio=0 --ops=1 \
        --concurrency="$threads" --seed=1 || die "preload of $keys x $size values over TCP failed"
    rec "preload_${name}_transport" tcp
}

# --- machine ---------------------------------------------------------------
CLK_TCK=$(getconf CLK_TCK)
rec clk_tck "$CLK_TCK"
rec nproc "$(nproc)"
rec kernel "$(uname -r)"
rec gets "$GETS"
rec keys "$KEYS"
rec conc "$CONC"
rec lat_ops "$LAT_OPS"
rec bw_secs "$BW_SECS"
rec bw_conc "$BW_CONC"
rec bw_keys "$BW_KEYS"
rec perf_secs "$PERF_SECS"
say "$(nproc) vCPUs, kernel $(uname -r), CLK_TCK $CLK_TCK, device $DEV ($IP)"
ibv_devinfo -d "$DEV" 2>/dev/null | grep -q PORT_ACTIVE || die "$DEV has no ACTIVE port"

# --- kvserver --------------------------------------------------------------
say "starting kvserver --transport=rdma --rdma_device=$DEV --pool_size=256M"
"$KVSERVER" --transport=rdma --rdma_device="$DEV" --control_port=0 --resp_port=0 \
    --ready_file="$W/ready" --pool_size=256M >"$W/kvserver.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 600); do
    [[ -s $W/ready ]] && grep -q '^epoch=' "$W/ready" && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
done
grep -q '^epoch=' "$W/ready" 2>/dev/null || die "kvserver did not start: $(tail -n 3 "$W/kvserver.log")"
CTL=$(sed -n 's/^control_port=//p' "$W/ready")
say "kvserver pid $SERVER_PID, control port $CTL: $(grep -o 'kvserver up.*' "$W/kvserver.log" | head -1 | cut -c1-150)"

# --- 1. server CPU per GET -------------------------------------------------
say "1. preloading $KEYS keys x 64 B over RDMA (PUT-only bench)"
preload small "$KEYS" 64 "$CONC"
sleep 1 # let start-up and preload work (lease expiry, cleaner) settle
say "1. kvserver idle baseline: ${IDLE_SECS}s with no client"
thread_ticks "$SERVER_PID" >"$W/threads0"
c0=$(cpu_ticks "$SERVER_PID") || die "kvserver is gone"
t0=$(date +%s%N)
sleep "$IDLE_SECS"
t1=$(date +%s%N)
c1=$(cpu_ticks "$SERVER_PID") || die "kvserver is gone"
thread_ticks "$SERVER_PID" >"$W/threads1"
thread_delta >"$OUT/idle.threads.txt"
rec idle_server_ticks $((c1 - c0))
rec idle_wall_ns $((t1 - t0))
say "  idle: kvserver CPU $((c1 - c0)) ticks in $(((t1 - t0) / 1000000)) ms"
for transport in rdma tcp; do
    say "1. GET-only over $transport: $GETS GETs, 64 B, $CONC threads, --no-preload"
    measured "cpu_$transport" "$transport" --keys="$KEYS" --value-size=64 \
        --get-ratio=1 --ops="$GETS" --concurrency="$CONC" --no-preload --seed=2
done

# --- 2. latency at concurrency 1 -------------------------------------------
for transport in rdma tcp; do
    say "2. latency over $transport: $LAT_OPS GETs, 64 B, 1 thread"
    kvbench "lat_$transport" "$transport" --keys="$KEYS" --value-size=64 --get-ratio=1 \
        --ops="$LAT_OPS" --concurrency=1 --no-preload --seed=3 || die "latency run over $transport failed"
done

# --- 3. 1 MiB GET bandwidth ------------------------------------------------
say "3. preloading $BW_KEYS keys x 1 MiB over RDMA"
preload big "$BW_KEYS" 1M 1
sleep 1
for transport in rdma tcp; do
    say "3. 1 MiB GET-only over $transport: ${BW_SECS}s, $BW_CONC threads"
    measured "bw_$transport" "$transport" --keys="$BW_KEYS" --value-size=1M \
        --get-ratio=1 --duration="${BW_SECS}s" --concurrency="$BW_CONC" --no-preload --seed=5
done

say "stopping kvserver"
kill -TERM "$SERVER_PID"
wait "$SERVER_PID"
rec kvserver_exit $?
SERVER_PID=
cp "$W/kvserver.log" "$OUT/kvserver.log"

# --- 4. perftest on the same device -----------------------------------------
# perf NAME TOOL PORT ARGS...: server and client of TOOL in this machine; the
# client retries while the server is not listening yet ("Couldn't connect").
perf() {
    local name=$1 tool=$2 port=$3 spid rc=0 srv=0
    shift 3
    timeout 120 "$tool" -d "$DEV" -F -p "$port" "$@" >"$OUT/$name.server.txt" 2>&1 &
    spid=$!
    for _ in $(seq 40); do
        rc=0
        PERF_CLIENT_NS=$(date +%s%N)
        timeout 120 "$tool" -d "$DEV" -F -p "$port" "$@" "$IP" >"$OUT/$name.txt" 2>&1 || rc=$?
        PERF_CLIENT_NS=$(($(date +%s%N) - PERF_CLIENT_NS))
        ((rc != 0)) && grep -q "Couldn't connect" "$OUT/$name.txt" && { sleep 0.5; continue; }
        break
    done
    wait "$spid" || srv=$?
    say "  $name: client exit $rc, server exit $srv"
    ((rc == 0 && srv == 0))
}
# A result row of perftest: the first line starting with the message size.
perf_row() { awk -v s="$2" '$1 == s {print; exit}' "$OUT/$1.txt"; }

say "4. ib_read_lat -d $DEV -s 64 -n $LAT_OPS"
perf perf_lat ib_read_lat 18521 -s 64 -n "$LAT_OPS" || die "ib_read_lat failed"
rec perf_lat_row "\"$(perf_row perf_lat 64)\""

say "4. ib_read_bw -d $DEV -s 1048576 -D $PERF_SECS"
perf perf_bw ib_read_bw 18522 -s 1048576 -D "$PERF_SECS" || die "ib_read_bw -D failed"
row=$(perf_row perf_bw 1048576)
rec perf_bw_row "\"$row\""
rec perf_bw_mode "\"-D $PERF_SECS\""
# Under TCG, duration mode's figures are unreliable (0 iterations and 0.00,
# or an average several times below what the same transfer achieves by
# iteration count): always measure a fixed number of iterations (-n) too, and
# time that client with our own clock as a cross-check (a lower bound, since
# it includes connection set-up).
n=$((PERF_SECS * 35))
say "4. ib_read_bw -d $DEV -s 1048576 -n $n"
perf perf_bw_n ib_read_bw 18523 -s 1048576 -n "$n" || die "ib_read_bw -n failed"
rec perf_bw_n_row "\"$(perf_row perf_bw_n 1048576)\""
rec perf_bw_n_mode "\"-n $n\""
rec perf_bw_n_client_ns "$PERF_CLIENT_NS"
say "done"
exit 0
