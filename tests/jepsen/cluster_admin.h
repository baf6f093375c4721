// Copyright 2026 The kvstore Authors.
//
// ClusterAdmin: the maintenance calls `kvctl cluster` makes (failover,
// add-node, rebalance, remove-node), on the KvCluster service of the
// running nodes in turn until one answers, as kvctl does with its --server
// list: any node forwards them to the controller. Each call has a 10 s
// deadline.
//
// Errors: the last node's (kFailedPrecondition: refused, e.g. remove-node
// would leave a shard without an in-sync replica; kNotFound: no such member
// yet; kUnavailable: no node running).
//
// Thread safety: not thread-safe; the nemesis drives it.

#ifndef KVSTORE_TESTS_JEPSEN_CLUSTER_ADMIN_H_
#define KVSTORE_TESTS_JEPSEN_CLUSTER_ADMIN_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/cluster/cluster_harness.h"

namespace kvstore {
namespace jepsen {

class ClusterAdmin {
 public:
  // `cluster` is not owned and outlives this.
  explicit ClusterAdmin(testing::ClusterHarness* cluster) : cluster_(cluster) {}

  absl::Status Failover(uint32_t shard);
  // The new shard's id.
  absl::StatusOr<uint32_t> AddNode(const std::string& node_id);
  // The number of migrations planned (0: the slots were even).
  absl::StatusOr<int> Rebalance();
  absl::Status RemoveNode(const std::string& node_id);

 private:
  template <typename Call>
  absl::Status OnAnyNode(const char* what, const Call& call);

  testing::ClusterHarness* const cluster_;
};

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_CLUSTER_ADMIN_H_
