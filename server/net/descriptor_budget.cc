// Copyright 2026 The kvstore Authors.

#include "server/net/descriptor_budget.h"

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kvstore {
namespace server {
namespace net {

namespace {

constexpr int kMinPerPort = 8;
constexpr int kMaxAutoGrpc = 1024;
constexpr uint64_t kUnbounded = ~uint64_t{0};

// Descriptors `cap` unauthenticated RESP connections may hold: each of the
// `threads` loops keeps ceil(cap / threads) of them.
uint64_t UnauthenticatedHeld(int cap, int threads) {
  return static_cast<uint64_t>(threads) * ((static_cast<uint64_t>(cap) + threads - 1) / threads);
}

// The largest cap whose connections fit in `room` descriptors.
int UnauthenticatedFitting(uint64_t room, int threads) {
  return static_cast<int>(std::min<uint64_t>(room / threads * threads, INT32_MAX));
}

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

absl::StatusOr<ConnectionCaps> PlanConnectionCaps(uint64_t limit, uint64_t in_use,
                                                  const ConnectionRequest& request) {
  const uint64_t reserve = ReservedDescriptors(limit);
  const int threads = std::max(1, request.resp_threads);
  const uint64_t resp_cost = request.resp_tls ? 3 : 1;  // descriptors per RESP client
  const uint64_t metrics = static_cast<uint64_t>(std::max(0, request.metrics));
  const bool auth = request.resp_auth;
  // The least each port with a flag may be lowered to.
  const uint64_t min_resp = kMinPerPort * resp_cost;
  const uint64_t min_unauth = auth ? UnauthenticatedHeld(kMinPerPort, threads) : 0;
  const uint64_t min_total = metrics + kMinPerPort + min_resp + min_unauth;
  const uint64_t left = limit > in_use + reserve ? limit - in_use - reserve : 0;
  if (left < min_total) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the descriptor limit (RLIMIT_NOFILE) is ", limit, ": with ", in_use, " open and ", reserve,
        " reserved it leaves ", left, " for connections, fewer than the ", min_total,
        " the ports need at least (", metrics, " for the metrics port, ", kMinPerPort,
        " for the control port, ", kMinPerPort, " RESP clients",
        request.resp_tls ? " at 3 descriptors each with --resp_tls_port" : "",
        auth ? absl::StrCat(", ", min_unauth, " unauthenticated RESP connections") : "",
        "); raise it (ulimit -n, LimitNOFILE=)"));
  }
  const uint64_t ports = left - metrics;  // for the ports with a flag
  const uint64_t min_resp_side = min_resp + min_unauth;
  ConnectionCaps caps;
  caps.metrics = static_cast<int>(metrics);
  if (request.grpc == 0) {
    caps.grpc = static_cast<int>(std::clamp<uint64_t>(
        std::min<uint64_t>(ports / 4, ports - min_resp_side), kMinPerPort, kMaxAutoGrpc));
  } else if (static_cast<uint64_t>(request.grpc) + min_resp_side > ports) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--grpc_max_connections=", request.grpc, " does not fit the descriptor limit ", limit, " (",
        in_use, " open, ", reserve, " reserved, ", metrics, " for the metrics port, at least ",
        min_resp_side, " for the RESP port): lower it or raise the limit"));
  } else {
    caps.grpc = request.grpc;
  }

  // RESP clients and unauthenticated RESP connections share the rest; when
  // both do not fit, a side asking for at most half keeps what it asked and
  // the other takes the rest, else they split it.
  const uint64_t room = ports - static_cast<uint64_t>(caps.grpc);
  const uint64_t want_resp = static_cast<uint64_t>(std::max(0, request.resp)) * resp_cost;
  const uint64_t want_unauth = !auth ? 0
                               : request.resp_unauthenticated > 0
                                   ? UnauthenticatedHeld(request.resp_unauthenticated, threads)
                                   : kUnbounded;
  caps.resp = request.resp;
  caps.resp_unauthenticated = request.resp_unauthenticated;
  if (want_unauth > room || want_resp > room - want_unauth) {
    uint64_t unauth_room = 0;
    if (!auth) {
      unauth_room = 0;
    } else if (want_resp <= room / 2) {
      unauth_room = room - want_resp;
    } else if (want_unauth <= room / 2) {
      unauth_room = want_unauth;
    } else {
      unauth_room = room / 2;
    }
    if (auth) {
      unauth_room = std::clamp(unauth_room, std::min(want_unauth, min_unauth),
                               room - std::min(want_resp, min_resp));
      const int fitting = UnauthenticatedFitting(unauth_room, threads);
      if (want_unauth > unauth_room) caps.resp_unauthenticated = fitting;
    }
    const uint64_t unauth_held = auth ? UnauthenticatedHeld(caps.resp_unauthenticated, threads) : 0;
    if (want_resp > room - unauth_held) {
      caps.resp = static_cast<int>((room - unauth_held) / resp_cost);
    }
    const std::string why = absl::StrCat(
        " to fit the descriptor limit ", limit, " (", in_use, " open, ", reserve, " reserved, ",
        caps.grpc, " control-port connections, ", metrics, " metrics-port connections",
        request.resp_tls ? ", 3 descriptors per RESP client with --resp_tls_port" : "", ")");
    std::vector<std::string> lowered;
    if (caps.resp != request.resp) {
      lowered.push_back(
          absl::StrCat("--resp_max_clients lowered from ", request.resp, " to ", caps.resp));
    }
    if (auth && caps.resp_unauthenticated != request.resp_unauthenticated) {
      lowered.push_back(
          absl::StrCat("--resp_max_unauthenticated_clients ",
                       request.resp_unauthenticated > 0
                           ? absl::StrCat("lowered from ", request.resp_unauthenticated)
                           : std::string("0 (no cap) replaced"),
                       " to ", caps.resp_unauthenticated));
    }
    if (!lowered.empty()) caps.adjusted = absl::StrCat(absl::StrJoin(lowered, ", "), why);
  }
  caps.total = static_cast<uint64_t>(caps.grpc) + static_cast<uint64_t>(caps.resp) * resp_cost +
               (auth ? UnauthenticatedHeld(caps.resp_unauthenticated, threads) : 0) + metrics;
  return caps;
}

}  // namespace net
}  // namespace server
}  // namespace kvstore
