#!/usr/bin/env bash
# One-sided GET against perftest on the same Soft-RoCE device, side by side
# in one run inside the qemu VM (tests/rxe/vm-run.sh): 64 B GET p50 at
# concurrency 1 with the client's location cache (hits: one entry READ) and
# without it (two dependent READs: the miss path) against ib_read_lat -s 64,
# and 1 MiB GET throughput at concurrency 1 against ib_read_bw -s 1048576.
# A benchmark, not a test: it prints figures and gates nothing. Read the
# RATIOS: under qemu TCG with a software RDMA device the absolute figures are
# far from hardware. tests/bench/perf_report.sh --rdma runs this script.
#
# Usage: tests/bench/rdma_get_bench.sh [--quick] [--out DIR] [--no-build] [--timeout S]
#   --quick      fewer operations (1000 GETs per latency run, 4 s of 1 MiB GETs)
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
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
while (($#)); do
    case "$1" in
    --quick) QUICK=1 && shift ;;
    --no-build) BUILD=0 && shift ;;
    --out) OUT=${2:?--out needs a directory} && shift 2 ;;
    --timeout) TIMEOUT=${2:?--timeout needs seconds} && shift 2 ;;
    -h | --help) usage && exit 0 ;;
    *) echo "rdma_get_bench: unknown argument $1 (see --help)" >&2 && exit 2 ;;
    esac
done
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
# The guest runs copies, so a concurrent rebuild cannot swap them mid-run.
rm -f "$OUT"/kvserver "$OUT"/kvctl "$OUT"/*.json "$OUT"/*.txt "$OUT"/results.env
[[ -x $OPT_BIN/server/kvserver && -x $OPT_BIN/client/kvctl/kvctl ]] ||
    { echo "rdma_get_bench: no -c opt build in $OPT_BIN (run without --no-build)" >&2; exit 1; }
cp "$OPT_BIN/server/kvserver" "$OPT_BIN/client/kvctl/kvctl" "$OUT/"
ENVS=()
((QUICK)) && ENVS+=(--env KV_BENCH_LAT_OPS=1000 --env KV_BENCH_BW_SECS=4 --env KV_BENCH_PERF_N=100)
while IFS= read -r name; do ENVS+=(--env "$name"); done < <(compgen -e | grep '^KV_BENCH_' || true)

echo "==> booting the Soft-RoCE VM and running tests/bench/rdma_get_bench_guest.sh in it"
rc=0
tests/rxe/vm-run.sh --quiet --timeout "$TIMEOUT" --smp 2 --rw "$OUT" "${ENVS[@]}" \
    -- "$ROOT/tests/bench/rdma_get_bench_guest.sh" "$OUT" || rc=$?
if ((rc != 0)); then
    echo "rdma_get_bench: the measurement failed (exit $rc); raw results kept in $OUT" >&2
    exit 1
fi

python3 - "$OUT" <<'PY' || { echo "rdma_get_bench: could not read the results in $OUT" >&2; exit 1; }
import json, os, shlex, sys
out = sys.argv[1]
r = {}
for line in open(os.path.join(out, "results.env")):
    k, _, v = line.rstrip("\n").partition("=")
    r[k] = shlex.split(v)[0] if v.startswith('"') else v
def js(name):
    with open(os.path.join(out, name + ".json")) as f:
        return json.load(f)
def ratio(a, b): return "n/a" if not a or not b else f"{a / b:.2f}x"
lat = r.get("perf_lat_row", "").split()  # bytes iters t_min t_max t_typical t_avg t_stdev 99% 99.9%
ib_lat = float(lat[4]) if len(lat) >= 9 else None
bw = r.get("perf_bw_row", "").split()    # bytes iters BW_peak BW_average MsgRate
ib_bw = float(bw[3]) * 1048576 / 1e9 if len(bw) >= 4 and float(bw[3]) > 0 else None
hit, miss, big = js("lat_hit"), js("lat_miss"), js("bw_get")
print()
print(f"kvstore one-sided GET vs perftest, one run in the Soft-RoCE VM (qemu TCG, {r['nproc']} vCPUs, "
      f"kernel {r['kernel']})")
print("SOFTWARE EMULATION: compare the RATIOS; the absolute figures are not RDMA performance.")
print()
print(f"64 B GET, one request outstanding, {r['lat_ops']} GETs over {r['lat_keys']} keys (µs)")
rows = [("", "p50", "p99", "p50 / ib_read_lat")]
rows.append((f"ib_read_lat -s 64 (t_typical, 99%)", f"{ib_lat:.1f}" if ib_lat else "n/a",
             lat[7] if len(lat) >= 9 else "n/a", "1.00x"))
for name, j in (("GET, location cache on (hits)", hit), ("GET, cache off (2 READs: the miss path)", miss)):
    g = j["latency_us"]["get"]
    rows.append((name, f"{g['p50']:.1f}", f"{g['p99']:.1f}", ratio(g["p50"], ib_lat)))
w = [max(len(x[i]) for x in rows) for i in range(4)]
for x in rows:
    print("  " + x[0].ljust(w[0]) + "".join("  " + x[i].rjust(w[i]) for i in range(1, 4)))
print()
print(f"1 MiB GET, concurrency 1, {big['seconds']:.1f} s (GB/s = 1e9 B/s)")
print(f"  ib_read_bw -s 1048576 -n {bw[1] if len(bw) > 1 else '?'}: {ib_bw:.3f} GB/s" if ib_bw else
      "  ib_read_bw: n/a")
print(f"  kvctl bench GET 1 MiB: {big['gb_per_sec']:.3f} GB/s, {big['gets']} GETs, "
      f"p50 {big['latency_us']['get']['p50'] / 1e3:.1f} ms  ->  {ratio(big['gb_per_sec'], ib_bw)} of ib_read_bw")
print()
print(f"RESULT hit_p50_ratio={ratio(hit['latency_us']['get']['p50'], ib_lat)} "
      f"miss_p50_ratio={ratio(miss['latency_us']['get']['p50'], ib_lat)} "
      f"get_1mib_vs_ib_read_bw={ratio(big['gb_per_sec'], ib_bw)}")
PY
((KEEP)) || rm -rf "$OUT"
exit 0
