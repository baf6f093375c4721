// Copyright 2026 The kvstore Authors.
//
// Firewall: the partitions of the fault suite, as nftables rules inside one
// network namespace (tests/cluster/netns.h makes the namespaces). Each rule
// silently drops packets — no ICMP, no RST — so a cut looks like a dead or
// half-open link, the way a real partition does (a refused connection would
// be noticed at once and prove nothing about timeouts).
//
// Rules are per peer address and per direction, so a cut can be partial
// (this node and etcd only, this node and one peer), one-way (this node's
// packets to a peer vanish, the peer's still arrive), or total. Everything
// lives in one table of our own ("kvjepsen"), so Clear() removes exactly
// what this class added and nothing of the host's.
//
// Errors: kFailedPrecondition naming the command when `nft` is missing or
// the kernel refuses (callers skip the test then: deploy/setup.sh installs
// nftables).
//
// Thread safety: not thread-safe; one thread (the nemesis) drives it.

#ifndef KVSTORE_TESTS_JEPSEN_FIREWALL_H_
#define KVSTORE_TESTS_JEPSEN_FIREWALL_H_

#include <set>
#include <string>
#include <utility>

#include "absl/status/status.h"

namespace kvstore {
namespace jepsen {

enum class Direction {
  kOut,   // packets from this namespace to the peer are dropped
  kIn,    // packets from the peer into this namespace are dropped
  kBoth,  // both
};

class Firewall {
 public:
  // `netns`: the namespace the rules go into (must exist).
  explicit Firewall(std::string netns) : netns_(std::move(netns)) {}
  Firewall(const Firewall&) = delete;
  Firewall& operator=(const Firewall&) = delete;
  ~Firewall();  // Clear(), best effort

  // Drops packets to and/or from `peer_ip` (IPv4). Idempotent.
  absl::Status Drop(const std::string& peer_ip, Direction direction);
  // Removes every rule this firewall added.
  absl::Status Clear();
  // What is cut now, for the nemesis's log: "" or e.g. "out:10.1.2.3 in:10.1.2.4".
  std::string Describe() const;
  const std::string& netns() const { return netns_; }

 private:
  absl::Status EnsureTable();
  absl::Status Nft(const std::string& script);

  const std::string netns_;
  bool table_ = false;
  std::set<std::pair<std::string, bool>> rules_;  // (peer, out?)
};

// Whether `nft` can make rules here (root, nftables installed).
absl::Status FirewallAvailable();

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_FIREWALL_H_
