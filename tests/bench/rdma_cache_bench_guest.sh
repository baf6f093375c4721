#!/usr/bin/env bash
# Guest half of tests/bench/rdma_cache_bench.sh: runs inside the Soft-RoCE
# qemu VM (tests/rxe/vm-run.sh) and leaves one result per replay in OUT_DIR:
# NAME.json (cache_trace_client's JSON line) and NAME.env (keys cached and
# evicted, from the server's RESP port); the host half prints the table.
# Works on any machine with an ACTIVE device $KV_BENCH_DEV.
#
# Usage: rdma_cache_bench_guest.sh OUT_DIR
#   (OUT_DIR holds kvserver and cache_trace_client)
#
# Environment (optional): KV_BENCH_REQUESTS (400000), KV_BENCH_KEYS
# (200000), KV_BENCH_VALUE_BYTES (200), KV_BENCH_SEED (1), KV_BENCH_POOL
# (kvserver --pool_size, 16M as cache_bench.py), KV_BENCH_SEGMENT
# (kvserver --segment_size and the client's --lease_bytes, 256K), KV_BENCH_DEV (rxe0),
# KV_BENCH_REDIS (1: also replay against redis-server when it exists);
# KV_BENCH_POLICIES (the maxmemory policies, comma-separated: allkeys-lru,allkeys-lfu).
#
# Every replay gets a fresh server, as in cache_bench.py: kvserver
# --transport=rdma --segment_size=$KV_BENCH_SEGMENT with allkeys-lru / allkeys-lfu, replayed
# over RDMA (one-sided GETs) and over TCP (the same client library on the
# RESP data port); then redis-server with maxmemory = the pool plus
# kvserver's index (64 B per bucket, one bucket per KiB), replayed over RESP.
# NAME is TRACE_TRANSPORT_POLICY (transport rdma, tcp or redis).
set -uo pipefail

OUT=${1:?usage: rdma_cache_bench_guest.sh OUT_DIR}
REQUESTS=${KV_BENCH_REQUESTS:-400000}
KEYS=${KV_BENCH_KEYS:-200000}
VALUE_BYTES=${KV_BENCH_VALUE_BYTES:-200}
SEED=${KV_BENCH_SEED:-1}
POOL=${KV_BENCH_POOL:-16M}
SEGMENT=${KV_BENCH_SEGMENT:-256K}
DEV=${KV_BENCH_DEV:-rxe0}
REDIS=${KV_BENCH_REDIS:-1}
POLICIES=${KV_BENCH_POLICIES:-allkeys-lru,allkeys-lfu}
KVSERVER=$OUT/kvserver
CLIENT=$OUT/cache_trace_client
W=$(mktemp -d /tmp/kvbench-cache.XXXXXX)
T0=$(date +%s%N)
say() { printf '[guest %6.1fs] %s\n' "$((($(date +%s%N) - T0) / 1000000))e-3" "$*"; }
SERVER_PID=
die() {
    say "FAILED: $*"
    [[ -n $SERVER_PID ]] && kill "$SERVER_PID" 2>/dev/null
    exit 1
}

# Pool bytes from a K/M/G size, for redis-server's maxmemory.
pool_bytes() {
    local n=${1%[KkMmGg]}
    case "${1: -1}" in
    K | k) echo $((n << 10)) ;; M | m) echo $((n << 20)) ;; G | g) echo $((n << 30)) ;; *) echo "$1" ;;
    esac
}
BYTES=$(pool_bytes "$POOL")
LEASE=$(pool_bytes "$SEGMENT")
BUCKETS=$((BYTES / 1024 > 1024 ? BYTES / 1024 : 1024))

# start_kvserver POLICY NAME: a fresh kvserver; sets SERVER_PID, CTL, RESP.
start_kvserver() {
    local ready=$W/$2.ready
    "$KVSERVER" --transport=rdma --rdma_device="$DEV" --control_port=0 --resp_port=0 \
        --ready_file="$ready" --pool_size="$POOL" --segment_size="$SEGMENT" --index_buckets="$BUCKETS" \
        --maxmemory_policy="$1" >"$OUT/$2.server.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 600); do
        grep -q '^epoch=' "$ready" 2>/dev/null && break
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    grep -q '^epoch=' "$ready" 2>/dev/null || die "kvserver did not start: $(tail -n 3 "$OUT/$2.server.log")"
    CTL=$(sed -n 's/^control_port=//p' "$ready")
    RESP=$(sed -n 's/^resp_port=//p' "$ready")
}

# start_redis POLICY NAME: a fresh redis-server; sets SERVER_PID, RESP.
start_redis() {
    RESP=$((20000 + RANDOM % 20000))
    redis-server --port "$RESP" --bind 127.0.0.1 --save "" --appendonly no \
        --maxmemory "$((BYTES + BUCKETS * 64))" --maxmemory-policy "$1" --dir "$W" \
        >"$OUT/$2.server.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 600); do
        [[ $(redis-cli -p "$RESP" ping 2>/dev/null) == PONG ]] && return
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    die "redis-server did not start: $(tail -n 3 "$OUT/$2.server.log")"
}

# replay NAME TRACE ARGS...: the client's JSON to NAME.json, then what the
# server holds to NAME.env, then the server stopped.
replay() {
    local name=$1 trace=$2
    shift 2
    timeout 3600 "$CLIENT" --trace="$trace" --seed="$SEED" --requests="$REQUESTS" --keys="$KEYS" \
        --value_bytes="$VALUE_BYTES" "$@" >"$OUT/$name.json" 2>"$OUT/$name.err" ||
        die "$name: $(tail -n 3 "$OUT/$name.err")"
    {
        echo "keys_cached=$(redis-cli -p "$RESP" dbsize)"
        echo "evicted=$(redis-cli -p "$RESP" info | tr -d '\r' | sed -n 's/^evicted_keys://p')"
    } >"$OUT/$name.env"
    say "$name: $(cat "$OUT/$name.json")"
    kill -TERM "$SERVER_PID"
    wait "$SERVER_PID"
    SERVER_PID=
}

ibv_devinfo -d "$DEV" 2>/dev/null | grep -q PORT_ACTIVE || die "$DEV has no ACTIVE port"
say "$REQUESTS requests over $KEYS keys, $VALUE_BYTES B values, seed $SEED, pool $POOL, segments $SEGMENT ($(nproc) vCPUs)"
for trace in zipf scan; do
    for policy in ${POLICIES//,/ }; do
        for transport in rdma tcp; do
            name=${trace}_${transport}_$policy
            start_kvserver "$policy" "$name"
            replay "$name" "$trace" --server="127.0.0.1:$CTL" --transport="$transport" \
                --rdma_device="$DEV" --lease_bytes="$LEASE"
        done
        if ((REDIS)) && command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
            name=${trace}_redis_$policy
            start_redis "$policy" "$name"
            replay "$name" "$trace" --resp="127.0.0.1:$RESP"
        fi
    done
done
rm -rf "$W"
say "done"
exit 0
