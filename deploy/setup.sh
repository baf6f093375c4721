#!/usr/bin/env bash
# Installs every Debian 12 package kvstore needs to build, run and test.
# Idempotent: packages already present are skipped, so running it twice is cheap.
#
#   deploy/setup.sh            build + run + test packages
#   deploy/setup.sh --runtime  only what `kvserver`/`kvctl` need to run
set -euo pipefail

BUILD_PKGS=(
  bazel-bootstrap g++
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgoogle-glog-dev libxxhash-dev nlohmann-json3-dev
  libibverbs-dev librdmacm-dev libgtest-dev libgmock-dev
  libcpp-httplib-dev                # HTTP client of the /metrics endpoint's test (server/metrics)
  libssl-dev                        # TLS on the RESP port and its client (common/tls)
  libjemalloc-dev                   # kvserver's allocator (server/BUILD.bazel)
  golang-etcd-server-dev            # etcd's v3 API .proto files (third_party/etcd)
  golang-github-gogo-protobuf-dev   # gogoproto/gogo.proto, imported by them
  golang-github-gogo-googleapis-dev # google/api/annotations.proto, imported by them
)
RUN_PKGS=(
  rdma-core ibverbs-providers ibverbs-utils iproute2
  libcpp-httplib0.11                # shared library behind libcpp-httplib-dev
  libssl3 openssl                   # TLS at run time; deploy/make-certs.sh uses the CLI
  libjemalloc2                      # kvserver's allocator at run time
)
TEST_PKGS=(
  redis-server redis-tools          # real third-party RESP clients and the peer we measure against
  python3-redis                     # redis-py's RedisCluster: a cluster-aware client (server/resp)
  perftest rdmacm-utils             # ib_read_bw / ib_read_lat reference figures
  valgrind                          # callgrind: client instructions per GET (tests/bench/rdma_get_callgrind.sh)
  qemu-system-x86 busybox-static    # Soft-RoCE VM harness (tests/rxe)
  python3                           # benchmark scripts (tests/bench): JSON, free ports
  prometheus                        # promtool checks the /metrics output (server/metrics)
  clang-format                      # deploy/check-tree.sh: the tree matches .clang-format
  clang-14 libclang-rt-14-dev       # tests/fuzz/run.sh: libFuzzer and the sanitizer runtimes
  llvm-14                           # llvm-symbolizer: readable sanitizer stack traces
  gdb                               # the compose VM test's diagnosis: where kvserver's threads wait
  etcd-server etcd-client           # throw-away etcd for the cluster tests (tests/cluster)
  docker.io docker-compose          # the compose cluster (deploy/cluster.sh, deploy/compose); its
                                    # images also take busybox-static, redis-tools, etcd-server,
                                    # prometheus from above
  curl                              # the compose test reads /metrics and Prometheus's API
  nftables                          # partial, one-way and silent partitions (tests/jepsen)
  stress-ng                         # tests/jepsen --load and the loaded-machine check of the suite
  libfaketime                       # wall-clock steps of one process (tests/jepsen nemesis)
)

want=("${BUILD_PKGS[@]}" "${RUN_PKGS[@]}")
if [[ "${1:-}" != "--runtime" ]]; then
  want+=("${TEST_PKGS[@]}")
fi

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#want[@]} packages already installed"
else
  echo "setup: installing ${#missing[@]} package(s): ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # redis-server's postinst would start a system-wide instance; tests start their own.
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "setup: done"
fi

# Installing prometheus enables a prometheus.service (started only where
# systemd runs); tests use only /usr/bin/promtool from it.
# Installing redis-server starts a daemon on 6379 via policy-rc.d-less Debian
# images; we never rely on it, and leave it alone if it runs.
