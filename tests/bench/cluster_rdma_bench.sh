#!/usr/bin/env bash
# cluster_bench's PUT and GET rows over RDMA in the Soft-RoCE qemu VM, twice
# in one go: primaries replicating by RDMA WRITE + replica commit, then by
# gRPC (--replication_rdma=false), so the two tables sit side by side. Nodes
# and clients use RDMA in both runs; only the replication transport changes.
# A benchmark, not a test: nothing is gated on figures.
#
# Usage: tests/bench/cluster_rdma_bench.sh [--only LIST] [--clients N] [--no-build]
#
#   --only LIST   cluster_bench experiments (default put,get)
#   --clients N   client threads of each load (default 4; more writes in
#                 flight make larger replication batches)
#   --no-build    use bazel-bin as it is (must be a -c opt build)
#   -h, --help    this text
#
# Each run boots one VM (tests/rxe/run-rdma-tests.sh) and takes 2-3 minutes
# under TCG. The VM emulates its CPUs and the NIC is Soft-RoCE: read the
# RATIOS between the two tables, never the figures as RDMA performance.
# Exit status: 0 when both runs completed; 1 otherwise; 2 bad usage.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

ONLY=put,get
CLIENTS=4
BUILD=1
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
while (($#)); do
    case "$1" in
    --only)
        (($# >= 2)) || { echo "cluster_rdma_bench: --only needs a list" >&2; exit 2; }
        ONLY=$2
        shift 2
        ;;
    --clients)
        [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "cluster_rdma_bench: --clients needs a positive number" >&2; exit 2; }
        CLIENTS=$2
        shift 2
        ;;
    --no-build) BUILD=0; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "cluster_rdma_bench: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

if ((BUILD)); then
    echo "cluster_rdma_bench: bazel build -c opt //tests/bench:cluster_bench" >&2
    ${BAZEL:-bazel} build -c opt //tests/bench:cluster_bench >&2
fi
BIN=$PWD/bazel-bin/tests/bench/cluster_bench
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
status=0
for mode in rdma grpc; do
    flag=1
    [[ $mode == grpc ]] && flag=0
    echo "cluster_rdma_bench: replication by $mode (one VM boot)" >&2
    if ! KV_BENCH_TRANSPORT=rdma KV_BENCH_ONLY=$ONLY KV_BENCH_CLIENTS=$CLIENTS \
        KV_BENCH_REPLICATION_RDMA=$flag \
        bash tests/rxe/run-rdma-tests.sh --test-timeout 1200 --log-lines 40 \
        --results "$OUT/$mode" "$BIN" >"$OUT/$mode.log" 2>&1; then
        echo "cluster_rdma_bench: the $mode run failed; its output:" >&2
        tail -40 "$OUT/$mode.log" >&2
        status=1
        continue
    fi
    echo "== replication by $mode (nodes and clients on RDMA, Soft-RoCE VM: ratios only)"
    sed -n '/^experiment/,/^(p50/p' "$OUT/$mode.log"
done
exit $status
