// Copyright 2026 The kvstore Authors.

#include "server/net/descriptor_budget.h"

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace kvstore {
namespace server {
namespace net {

namespace {

constexpr int kMinPerPort = 8;
constexpr int kMaxAutoGrpc = 1024;

}  // namespace

absl::StatusOr<DescriptorLimit> RaiseDescriptorLimit() {
  rlimit lim;
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) {
    return absl::InternalError(absl::StrCat("getrlimit(RLIMIT_NOFILE): ", std::strerror(errno)));
  }
  DescriptorLimit out;
  out.soft_before = lim.rlim_cur;
  out.hard = lim.rlim_max;
  // An unlimited hard limit still stops at fs.nr_open.
  uint64_t target = lim.rlim_max;
  std::ifstream nr_open("/proc/sys/fs/nr_open");
  uint64_t kernel_max = 0;
  if (nr_open >> kernel_max && kernel_max > 0) target = std::min<uint64_t>(target, kernel_max);
  out.soft = lim.rlim_cur;
  if (target > lim.rlim_cur) {
    lim.rlim_cur = target;
    if (setrlimit(RLIMIT_NOFILE, &lim) == 0) out.soft = target;
  }
  return out;
}

int OpenDescriptors() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int n = 0;
  while (readdir(d) != nullptr) ++n;
  closedir(d);
  // ".", ".." and the directory's own descriptor.
  return n - 3;
}

uint64_t ReservedDescriptors(uint64_t limit) {
  // 64, or an eighth of a large limit: peers and etcd grow with the cluster.
  return std::max<uint64_t>(64, limit / 8);
}

absl::StatusOr<ConnectionCaps> PlanConnectionCaps(uint64_t limit, uint64_t in_use, int grpc,
                                                  int resp) {
  const uint64_t reserve = ReservedDescriptors(limit);
  const uint64_t left = limit > in_use + reserve ? limit - in_use - reserve : 0;
  if (left < 2 * kMinPerPort) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the descriptor limit (RLIMIT_NOFILE) is ", limit, ": with ", in_use, " open and ", reserve,
        " reserved it leaves fewer than ", kMinPerPort,
        " connections each for the control and RESP ports; raise it (ulimit -n, LimitNOFILE=)"));
  }
  ConnectionCaps caps;
  if (grpc == 0) {
    caps.grpc = static_cast<int>(std::clamp<uint64_t>(left / 4, kMinPerPort, kMaxAutoGrpc));
  } else if (static_cast<uint64_t>(grpc) + kMinPerPort > left) {
    return absl::InvalidArgumentError(
        absl::StrCat("--grpc_max_connections=", grpc, " does not fit the descriptor limit ", limit,
                     " (", in_use, " open, ", reserve, " reserved, at least ", kMinPerPort,
                     " for RESP clients): lower it or raise the limit"));
  } else {
    caps.grpc = grpc;
  }
  const uint64_t resp_room = left - static_cast<uint64_t>(caps.grpc);
  caps.resp = resp;
  if (static_cast<uint64_t>(resp) > resp_room) {
    caps.resp = static_cast<int>(resp_room);
    caps.adjusted = absl::StrCat("--resp_max_clients lowered from ", resp, " to ", caps.resp,
                                 " to fit the descriptor limit ", limit, " (", in_use, " open, ",
                                 reserve, " reserved, ", caps.grpc, " gRPC connections)");
  }
  return caps;
}

}  // namespace net
}  // namespace server
}  // namespace kvstore
