// Copyright 2026 The kvstore Authors.

#include "server/cluster/membership/cluster_options.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kvstore {
namespace server {
namespace {

absl::Status CheckName(const char* flag, const std::string& name) {
  // The name is part of etcd keys: a '/' would move it into another key's
  // space, and whitespace makes the keys unreadable for an operator.
  if (name.empty() || absl::StrContains(name, '/') ||
      std::any_of(name.begin(), name.end(), [](char c) { return absl::ascii_isspace(c); })) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "='", name, "': must be non-empty, without '/' or whitespace"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseEtcdEndpoints(absl::string_view flag) {
  std::vector<std::string> out;
  if (flag.empty()) return out;
  for (absl::string_view part : absl::StrSplit(flag, ',')) {
    absl::string_view ep = absl::StripAsciiWhitespace(part);
    // TLS is --etcd_ca's choice, so a scheme only has to be dropped.
    if (!absl::ConsumePrefix(&ep, "http://")) absl::ConsumePrefix(&ep, "https://");
    const size_t colon = ep.rfind(':');
    int port = 0;
    if (colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(ep.substr(colon + 1), &port) || port < 1 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("--etcd: bad endpoint '", part, "' (want host:port, e.g. 127.0.0.1:2379)"));
    }
    out.emplace_back(ep);
  }
  return out;
}

absl::Status ClusterOptions::Validate() const {
  if (!enabled()) return absl::OkStatus();
  for (const std::string& ep : etcd_endpoints) {
    auto parsed = ParseEtcdEndpoints(ep);
    if (!parsed.ok()) return parsed.status();
  }
  if (etcd_ca_file.empty() && (!etcd_cert_file.empty() || !etcd_key_file.empty())) {
    return absl::InvalidArgumentError(
        "--etcd_cert and --etcd_key need --etcd_ca (the CA of etcd's certificate)");
  }
  if (etcd_cert_file.empty() != etcd_key_file.empty()) {
    return absl::InvalidArgumentError("--etcd_cert and --etcd_key go together");
  }
  if (etcd_user.empty() != etcd_password.empty()) {
    return absl::InvalidArgumentError("--etcd_user and --etcd_password_file go together");
  }
  if (absl::Status s = CheckName("cluster_name", cluster_name); !s.ok()) return s;
  if (!node_id.empty()) {
    if (absl::Status s = CheckName("node_id", node_id); !s.ok()) return s;
  }
  if (advertise_host == "0.0.0.0") {
    return absl::InvalidArgumentError("--advertise_host=0.0.0.0: name a host others can dial");
  }
  if (replicas < 1 || replicas > 3) {
    return absl::InvalidArgumentError(absl::StrCat("--replicas=", replicas, ": must be 1, 2 or 3"));
  }
  if (min_nodes() < replicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cluster_min_nodes=", cluster_min_nodes, " is below --replicas=", replicas,
                     ": the first map could not place every replica"));
  }
  if (min_insync_replicas > replicas) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--min_insync_replicas=", min_insync_replicas, " must be between 1 and --replicas=",
        replicas, " (a shard never has more in-sync replicas than that)"));
  }
  if (member_ttl < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--member_ttl must be at least 1s (etcd counts seconds)");
  }
  // A keepalive goes out every TTL/3; the deadline it sets is TTL - margin
  // ahead, which must leave room for the next one (and one retry).
  if (fence_margin < absl::ZeroDuration() || fence_margin >= member_ttl * 2 / 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--fence_margin=", absl::FormatDuration(fence_margin),
        " must be at least 0 and below 2/3 of --member_ttl=", absl::FormatDuration(member_ttl),
        " (else the node fences between two keepalives)"));
  }
  if (replication_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--replication_timeout must be positive");
  }
  return absl::OkStatus();
}

std::string AdvertiseHost(const ClusterOptions& options, const std::string& listen_address) {
  if (!options.advertise_host.empty()) return options.advertise_host;
  if (listen_address != "0.0.0.0") return listen_address;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "localhost";
  return host;
}

}  // namespace server
}  // namespace kvstore
