#!/usr/bin/env bash
# One-sided GET against perftest on the same Soft-RoCE device, side by side
# in one run inside the qemu VM (tests/rxe/vm-run.sh): 64 B GET p50 at
# concurrency 1 with the client's location cache (hits: one entry READ) and
# without it (two dependent READs: the miss path) against ib_read_lat -s 64,
# and 1 MiB GET throughput at concurrency 1 against ib_read_bw -s 1048576,
# both through Get() (which returns a copy) and zero-copy (GetInto a
# registered buffer, as ib_read_bw reads: nothing copies the bytes).
# A benchmark, not a test: it prints figures and gates nothing. Read the
# RATIOS: under qemu TCG with a software RDMA device the absolute figures are
# far from hardware. tests/bench/perf_report.sh --rdma runs this script.
#
# Usage: tests/bench/rdma_get_bench.sh [--quick] [--rounds N] [--out DIR] [--no-build] [--timeout S]
#   --quick      fewer operations (1000 GETs per latency run, 4 s of 1 MiB GETs)
#   --rounds N   run the whole measurement N times in the one VM boot (default
#                3) and report each round and the MEDIAN ratios: the VM's
#                timing changes between rounds (perftest's own latency moved
#                between 54 and 96 us), and each ratio is taken within a round
#   --out DIR    keep the raw results there (default: a temporary directory,
#                removed after a successful run)
#   --no-build   use the -c opt binaries as they are
#   --timeout S  kill the VM after S seconds (default 600)
# Exit status: 0 when every measurement ran; 1 when a build, the VM or a
# measurement failed; 2 bad usage; 77 skipped (no qemu-system-x86_64).
# Wrap it in the machine's VM lock if it has one (flock /tmp/kv/vm.lock ...).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
QUICK=0
OUT=
BUILD=1
TIMEOUT=600
ROUNDS=3
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
while (($#)); do
    case "$1" in
    --quick) QUICK=1 && shift ;;
    --no-build) BUILD=0 && shift ;;
    --out) OUT=${2:?--out needs a directory} && shift 2 ;;
    --timeout) TIMEOUT=${2:?--timeout needs seconds} && shift 2 ;;
    --rounds) ROUNDS=${2:?--rounds needs a count} && shift 2 ;;
    -h | --help) usage && exit 0 ;;
    *) echo "rdma_get_bench: unknown argument $1 (see --help)" >&2 && exit 2 ;;
    esac
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "rdma_get_bench: --rounds needs a positive count" >&2; exit 2; }
if ! command -v "${KV_VM_QEMU:-qemu-system-x86_64}" >/dev/null; then
    echo "rdma_get_bench: SKIPPED: qemu-system-x86_64 not found (deploy/setup.sh installs it)" >&2
    exit 77
fi
# -c opt, like perftest's own binaries: an unoptimised client measures the
# compiler's -O0 code under emulation, not the protocol. The binaries are
# taken from the opt output tree by name, whatever bazel-bin points at.
if ((BUILD)); then
    echo "==> bazel build -c opt //server:kvserver //client/kvctl"
    bazel build -c opt //server:kvserver //client/kvctl >/tmp/rdma_get_bench.build.$$ 2>&1 ||
        { tail -n 30 /tmp/rdma_get_bench.build.$$ >&2; rm -f /tmp/rdma_get_bench.build.$$; exit 1; }
    rm -f /tmp/rdma_get_bench.build.$$
fi
OPT_BIN=$(bazel info -c opt bazel-bin 2>/dev/null)
KEEP=1
[[ -n $OUT ]] || { OUT=$(mktemp -d /tmp/kvbench-rdma-get.XXXXXX) && KEEP=0; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd -P)
# The guest runs copies, so a concurrent rebuild cannot swap them mid-run;
# one directory per round (the guest half writes its results beside them).
rm -rf "$OUT"/round*
[[ -x $OPT_BIN/server/kvserver && -x $OPT_BIN/client/kvctl/kvctl ]] ||
    { echo "rdma_get_bench: no -c opt build in $OPT_BIN (run without --no-build)" >&2; exit 1; }
for ((i = 1; i <= ROUNDS; i++)); do
    mkdir -p "$OUT/round$i"
    cp "$OPT_BIN/server/kvserver" "$OPT_BIN/client/kvctl/kvctl" "$OUT/round$i/"
done
ENVS=()
((QUICK)) && ENVS+=(--env KV_BENCH_LAT_OPS=1000 --env KV_BENCH_BW_SECS=4 --env KV_BENCH_PERF_N=100)
while IFS= read -r name; do ENVS+=(--env "$name"); done < <(compgen -e | grep '^KV_BENCH_' || true)

echo "==> booting the Soft-RoCE VM and running tests/bench/rdma_get_bench_guest.sh in it $ROUNDS time(s)"
rc=0
# shellcheck disable=SC2016 # expanded by the guest's bash
tests/rxe/vm-run.sh --quiet --timeout "$((TIMEOUT * ROUNDS))" --smp 2 --rw "$OUT" "${ENVS[@]}" \
    -- bash -c 'for d in "$@"; do echo "== round ${d##*round}"; "$0" "$d" || exit; done' \
    "$ROOT/tests/bench/rdma_get_bench_guest.sh" $(for ((i = 1; i <= ROUNDS; i++)); do echo "$OUT/round$i"; done) || rc=$?
if ((rc != 0)); then
    echo "rdma_get_bench: the measurement failed (exit $rc); raw results kept in $OUT" >&2
    exit 1
fi

python3 - "$OUT" "$ROUNDS" <<'PY' || { echo "rdma_get_bench: could not read the results in $OUT" >&2; exit 1; }
import json, os, shlex, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])

def load(d):
    r = {}
    for line in open(os.path.join(d, "results.env")):
        k, _, v = line.rstrip("\n").partition("=")
        r[k] = shlex.split(v)[0] if v.startswith('"') else v
    js = lambda name: json.load(open(os.path.join(d, name + ".json")))
    # perftest ran right before and right after kvstore's runs: the peer
    # figure is the mean of the two (both are kept for the table).
    lats = [r.get(k, "").split() for k in ("perf_lat_a_row", "perf_lat_b_row")]
    bws = [r.get(k, "").split() for k in ("perf_bw_a_row", "perf_bw_b_row")]
    # ib_read_lat: bytes iters t_min t_max t_typical t_avg t_stdev 99% 99.9%
    lat_t = [float(x[4]) for x in lats if len(x) >= 9]
    # ib_read_bw: bytes iters BW_peak BW_average MsgRate (MB/s, 2^20 bytes)
    bw_g = [float(x[3]) * 1048576 / 1e9 for x in bws if len(x) >= 4 and float(x[3]) > 0]
    r["ib_lat"] = statistics.mean(lat_t) if len(lat_t) == 2 else None
    r["ib_lat_pair"] = "/".join(f"{t:.0f}" for t in lat_t) or "n/a"
    r["ib_bw"] = statistics.mean(bw_g) if len(bw_g) == 2 else None
    r["ib_bw_pair"] = "/".join(f"{g:.3f}" for g in bw_g) or "n/a"
    r["ib_bw_n"] = bws[0][1] if len(bws[0]) > 1 else "?"
    r["hit"], r["miss"], r["big"], r["zc"] = js("lat_hit"), js("lat_miss"), js("bw_get"), js("bw_get_zc")
    return r

def ratio(a, b): return a / b if a and b else None
def fmt(x): return "n/a" if x is None else f"{x:.2f}x"

runs = [load(os.path.join(out, f"round{i}")) for i in range(1, rounds + 1)]
r0 = runs[0]
print()
print(f"kvstore one-sided GET vs perftest, {rounds} round(s) in one Soft-RoCE VM boot (qemu TCG, "
      f"{r0['nproc']} vCPUs, kernel {r0['kernel']})")
print("SOFTWARE EMULATION: compare the RATIOS; the absolute figures are not RDMA performance.")
print()
print("perftest runs right before and right after kvstore's runs; its figure is the mean of the two"
      " (shown as before/after)")
print(f"64 B GET p50 (p99), one request outstanding, {r0['lat_ops']} GETs over {r0['lat_keys']} keys (µs);"
      " 1 MiB GET GB/s at concurrency 1, with Get() (copy) and GetInto (zero copy)")
head = ("round", "ib_read_lat", "hit", "hit/ib", "miss", "miss/ib", "ib_read_bw", "1 MiB copy", "/ib_bw",
        "zero-copy", "/ib_bw")
rows, hits, misses, bigs, zcs = [head], [], [], [], []
for i, r in enumerate(runs, 1):
    h, m, b, z = r["hit"]["latency_us"]["get"], r["miss"]["latency_us"]["get"], r["big"], r["zc"]
    hr, mr = ratio(h["p50"], r["ib_lat"]), ratio(m["p50"], r["ib_lat"])
    br, zr = ratio(b["gb_per_sec"], r["ib_bw"]), ratio(z["gb_per_sec"], r["ib_bw"])
    hits.append(hr); misses.append(mr); bigs.append(br); zcs.append(zr)
    rows.append((str(i), f"{r['ib_lat']:.1f} ({r['ib_lat_pair']})" if r["ib_lat"] else "n/a",
                 f"{h['p50']:.1f} ({h['p99']:.0f})", fmt(hr), f"{m['p50']:.1f} ({m['p99']:.0f})", fmt(mr),
                 f"{r['ib_bw']:.3f} ({r['ib_bw_pair']})" if r["ib_bw"] else "n/a", f"{b['gb_per_sec']:.3f}", fmt(br),
                 f"{z['gb_per_sec']:.3f}", fmt(zr)))
w = [max(len(x[i]) for x in rows) for i in range(len(head))]
for x in rows:
    print("  " + "  ".join(x[i].rjust(w[i]) for i in range(len(head))))
med = lambda xs: None if any(x is None for x in xs) else statistics.median(xs)
print()
print(f"median of {rounds}: hit {fmt(med(hits))}, miss {fmt(med(misses))}, 1 MiB {fmt(med(bigs))}, "
      f"1 MiB zero-copy {fmt(med(zcs))} "
      f"(1 MiB: {r0['big']['seconds']:.1f} s per round, ib_read_bw -n {r0['ib_bw_n']})")
print()
print(f"RESULT hit_p50_ratio={fmt(med(hits))} miss_p50_ratio={fmt(med(misses))} "
      f"get_1mib_vs_ib_read_bw={fmt(med(bigs))} get_1mib_zero_copy_vs_ib_read_bw={fmt(med(zcs))}")
PY
((KEEP)) || rm -rf "$OUT"
exit 0
