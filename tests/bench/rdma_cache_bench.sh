#!/usr/bin/env bash
# Cache hit ratio with keys read over one-sided RDMA, in the Soft-RoCE qemu
# VM (tests/rxe/vm-run.sh), on tests/bench/cache_bench.py's traces (Zipf(0.99)
# and Zipf with a one-time scan mixed in; cache-aside: GET, on a miss SET).
# In one VM boot, each of zipf/scan x allkeys-lru/allkeys-lfu is replayed by
# tests/bench/cache_trace_client.cc against a fresh kvserver --transport=rdma:
#   rdma   the client library over RDMA: GETs are one-sided READs through
#          its location cache, reported to the server (ReportReads) for
#          its eviction policy; a miss's SET is a leased RDMA write;
#   tcp    the same client library over the RESP data port;
#   redis  redis-server (when installed: the guest sees the host's root) with
#          maxmemory = kvserver's pool plus its index, as cache_bench.py.
# Prints a table: trace, transport, policy, hit ratio, keys cached (DBSIZE on
# the server's RESP port at the end), keys evicted, GETs the server CPU
# answered instead (server fallbacks), seconds. The trace is generated in
# C++: the same distributions as cache_bench.py, not its exact key sequence.
# A benchmark, not a test: it gates nothing. Hit ratios do not depend on the
# emulation's speed (one request at a time), only the seconds do.
#
# Usage: tests/bench/rdma_cache_bench.sh [--quick] [--requests N] [--keys N]
#            [--pool SIZE] [--segment-size SIZE] [--value-bytes N] [--seed S] [--no-redis]
#            [--policies P,...]
#            [--out DIR] [--no-build] [--timeout S]
#   --quick      100000 requests over 50000 keys, pool 4M (instead of
#                cache_bench.py's 400000 over 200000, pool 16M): about 35
#                minutes under TCG (2 vCPUs); the full run about four times that
#   --requests N, --keys N, --pool SIZE, --value-bytes N, --seed S
#                override the sizes (after --quick); seed default 1
#   --segment-size SIZE  kvserver --segment_size, and the client's write lease
#                (default: the pool / 64, at least 64K, as docs/operations.md
#                advises for a cache: eviction keeps two segments free and a
#                client holds one lease open)
#   --no-redis   skip the redis-server rows
#   --policies P,...  the maxmemory policies to replay, comma-separated (default
#                allkeys-lru,allkeys-lfu; one halves the run)
#   --out DIR    keep the raw results there (default: a temporary directory,
#                removed after a successful run)
#   --no-build   use the -c opt binaries as they are
#   --timeout S  kill the VM after S seconds (default 14400)
# Exit status: 0 when every replay ran; 1 when a build, the VM or a replay
# failed; 2 bad usage; 77 skipped (no qemu-system-x86_64).
# Wrap it in the machine's VM lock if it has one (flock /tmp/kv/vm.lock ...).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
REQUESTS=400000
KEYS=200000
POOL=16M
SEGMENT=
VALUE_BYTES=200
SEED=1
REDIS=1
POLICIES=allkeys-lru,allkeys-lfu
OUT=
BUILD=1
TIMEOUT=14400
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
bad() { echo "rdma_cache_bench: $* (see --help)" >&2 && exit 2; }
while (($#)); do
    case "$1" in
    --quick) REQUESTS=100000 KEYS=50000 POOL=4M && shift ;;
    --requests) REQUESTS=${2:?--requests needs a count} && shift 2 ;;
    --keys) KEYS=${2:?--keys needs a count} && shift 2 ;;
    --pool) POOL=${2:?--pool needs a size} && shift 2 ;;
    --segment-size) SEGMENT=${2:?--segment-size needs a size} && shift 2 ;;
    --value-bytes) VALUE_BYTES=${2:?--value-bytes needs a count} && shift 2 ;;
    --seed) SEED=${2:?--seed needs a number} && shift 2 ;;
    --no-redis) REDIS=0 && shift ;;
    --policies) POLICIES=${2:?--policies needs a list} && shift 2 ;;
    --no-build) BUILD=0 && shift ;;
    --out) OUT=${2:?--out needs a directory} && shift 2 ;;
    --timeout) TIMEOUT=${2:?--timeout needs seconds} && shift 2 ;;
    -h | --help) usage && exit 0 ;;
    *) bad "unknown argument $1" ;;
    esac
done
for v in REQUESTS KEYS TIMEOUT; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || bad "--${v,,} needs a positive count"
done
[[ $VALUE_BYTES =~ ^[0-9]+$ ]] || bad "--value-bytes needs a count"
[[ $SEED =~ ^[0-9]+$ ]] || bad "--seed needs a non-negative number"
[[ $POOL =~ ^[1-9][0-9]*[KkMmGg]?$ ]] || bad "--pool needs a size such as 4M"
if [[ -z $SEGMENT ]]; then
    n=${POOL%[KkMmGg]}
    case "${POOL: -1}" in K | k) n=$((n << 10)) ;; M | m) n=$((n << 20)) ;; G | g) n=$((n << 30)) ;; esac
    SEGMENT=$((n / 64 / 1024 > 64 ? n / 64 / 1024 : 64))K
fi
[[ $SEGMENT =~ ^[1-9][0-9]*[KkMm]?$ ]] || bad "--segment-size needs a size such as 256K"
if ! command -v "${KV_VM_QEMU:-qemu-system-x86_64}" >/dev/null; then
    echo "rdma_cache_bench: SKIPPED: qemu-system-x86_64 not found (deploy/setup.sh installs it)" >&2
    exit 77
fi
# -c opt: an unoptimised client measures -O0 code under emulation (the hit
# ratios would not change, the minutes would).
if ((BUILD)); then
    echo "==> bazel build -c opt //server:kvserver //tests/bench:cache_trace_client"
    bazel build -c opt //server:kvserver //tests/bench:cache_trace_client \
        >/tmp/rdma_cache_bench.build.$$ 2>&1 ||
        { tail -n 30 /tmp/rdma_cache_bench.build.$$ >&2; rm -f /tmp/rdma_cache_bench.build.$$; exit 1; }
    rm -f /tmp/rdma_cache_bench.build.$$
fi
OPT_BIN=$(bazel info -c opt bazel-bin 2>/dev/null)
KEEP=1
[[ -n $OUT ]] || { OUT=$(mktemp -d /tmp/kvbench-rdma-cache.XXXXXX) && KEEP=0; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd -P)
rm -f "$OUT"/*.json "$OUT"/*.env "$OUT"/*.err "$OUT"/*.log
[[ -x $OPT_BIN/server/kvserver && -x $OPT_BIN/tests/bench/cache_trace_client ]] ||
    { echo "rdma_cache_bench: no -c opt build in $OPT_BIN (run without --no-build)" >&2; exit 1; }
# The guest runs copies, so a concurrent rebuild cannot swap them mid-run.
cp -f "$OPT_BIN/server/kvserver" "$OPT_BIN/tests/bench/cache_trace_client" "$OUT/"

echo "==> booting the Soft-RoCE VM: $REQUESTS requests over $KEYS keys, pool $POOL, segments $SEGMENT, seed $SEED"
rc=0
tests/rxe/vm-run.sh --quiet --timeout "$TIMEOUT" --smp 2 --rw "$OUT" \
    --env KV_BENCH_REQUESTS="$REQUESTS" --env KV_BENCH_KEYS="$KEYS" --env KV_BENCH_POOL="$POOL" \
    --env KV_BENCH_SEGMENT="$SEGMENT" \
    --env KV_BENCH_VALUE_BYTES="$VALUE_BYTES" --env KV_BENCH_SEED="$SEED" --env KV_BENCH_REDIS="$REDIS" \
    --env KV_BENCH_POLICIES="$POLICIES" \
    -- "$ROOT/tests/bench/rdma_cache_bench_guest.sh" "$OUT" || rc=$?
if ((rc != 0)); then
    echo "rdma_cache_bench: the measurement failed (exit $rc); raw results kept in $OUT" >&2
    exit 1
fi

python3 - "$OUT" "$POOL" "$SEGMENT" <<'PY' || { echo "rdma_cache_bench: could not read the results in $OUT" >&2; exit 1; }
import json, os, sys
out, pool, segment = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [("trace", "transport", "policy", "hit ratio", "keys cached", "evicted", "SETs refused", "fallbacks",
         "loc.cache hit/miss/stale", "reports ok/err", "seconds")]
first = None
for trace in ("zipf", "scan"):
    for policy in ("allkeys-lru", "allkeys-lfu"):
        for transport in ("rdma", "tcp", "redis"):
            name = f"{trace}_{transport}_{policy}"
            if not os.path.exists(os.path.join(out, name + ".json")):
                continue
            r = json.load(open(os.path.join(out, name + ".json")))
            env = dict(l.strip().split("=", 1) for l in open(os.path.join(out, name + ".env")) if "=" in l)
            c = r.get("client", {})
            first = first or r
            rdma = transport == "rdma"
            rows.append((trace, transport, policy, f"{r['hit_ratio']:.4f}", env.get("keys_cached", "?"),
                         env.get("evicted", "?") or "?", str(r["set_failures"]),
                         str(c.get("server_fallback_gets", "-")) if rdma else "-",
                         "/".join(str(c.get(k, "?")) for k in
                                  ("location_cache_hits", "location_cache_misses", "location_cache_stale"))
                         if rdma else "-",
                         f"{c.get('read_reports_ok', '?')}/{c.get('read_reports_failed', '?')}" if rdma else "-",
                         f"{r['seconds']:.0f}"))
print()
print(f"cache-aside hit ratio in one Soft-RoCE VM boot: {first['requests']} requests over {first['keys']} keys, "
      f"{first['value_bytes']} B values, seed {first['seed']}, pool {pool}")
print(f"rdma/tcp: kvserver --transport=rdma --segment_size={segment}, the C++ client over RDMA (one-sided "
      f"GETs, write leases of {segment}) or RESP/TCP; redis: redis-server, maxmemory = pool + index")
w = [max(len(x[i]) for x in rows) for i in range(len(rows[0]))]
for x in rows:
    print("  " + "  ".join(x[i].rjust(w[i]) for i in range(len(x))))
PY
((KEEP)) || rm -rf "$OUT"
exit 0
