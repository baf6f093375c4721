// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/firewall.h"

#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace jepsen {

using testing::ProcessResult;
using testing::RunProcess;
namespace {

constexpr char kTable[] = "inet kvjepsen";

// Runs `nft -f -` with `script` inside `netns` ("" = this namespace).
absl::Status RunNft(const std::string& netns, const std::string& script) {
  std::vector<std::string> argv;
  if (!netns.empty()) argv = {"/usr/sbin/ip", "netns", "exec", netns};
  argv.insert(argv.end(), {"/usr/sbin/nft", "-f", "-"});
  ProcessResult r = RunProcess(argv, script, 10);
  if (r.exit_code != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("`", absl::StrJoin(argv, " "), "` with \"", script, "\" failed: ", r.err));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FirewallAvailable() {
  if (access("/usr/sbin/nft", X_OK) != 0) {
    return absl::FailedPreconditionError("nft not found: install nftables (deploy/setup.sh)");
  }
  if (geteuid() != 0) return absl::FailedPreconditionError("partitions need root");
  return absl::OkStatus();
}

Firewall::~Firewall() { (void)Clear(); }

absl::Status Firewall::Nft(const std::string& script) { return RunNft(netns_, script); }

absl::Status Firewall::EnsureTable() {
  if (table_) return absl::OkStatus();
  // Priority -10: before any filter of the host's own that might accept.
  absl::Status s = Nft(absl::StrCat(
      "add table ", kTable, "\n",  //
      "add chain ", kTable, " input { type filter hook input priority -10; policy accept; }\n",
      "add chain ", kTable, " output { type filter hook output priority -10; policy accept; }\n"));
  if (s.ok()) table_ = true;
  return s;
}

absl::Status Firewall::Drop(const std::string& peer_ip, Direction direction) {
  if (absl::Status s = EnsureTable(); !s.ok()) return s;
  std::string script;
  if (direction != Direction::kIn && rules_.insert({peer_ip, true}).second) {
    absl::StrAppend(&script, "add rule ", kTable, " output ip daddr ", peer_ip, " drop\n");
  }
  if (direction != Direction::kOut && rules_.insert({peer_ip, false}).second) {
    absl::StrAppend(&script, "add rule ", kTable, " input ip saddr ", peer_ip, " drop\n");
  }
  return script.empty() ? absl::OkStatus() : Nft(script);
}

absl::Status Firewall::Clear() {
  if (!table_) return absl::OkStatus();
  absl::Status s = Nft(absl::StrCat("delete table ", kTable, "\n"));
  if (s.ok()) {
    table_ = false;
    rules_.clear();
  }
  return s;
}

std::string Firewall::Describe() const {
  std::vector<std::string> parts;
  for (const auto& [peer, out] : rules_) parts.push_back(absl::StrCat(out ? "out:" : "in:", peer));
  return absl::StrJoin(parts, " ");
}

}  // namespace jepsen
}  // namespace kvstore
