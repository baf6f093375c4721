// Copyright 2026 The kvstore Authors.
//
// CompareReplicas: the replica-convergence check of a live cluster at
// quiescence. Reads every key the history wrote from every in-sync replica
// of its shard (replica_reader.h) and compares the copies (convergence.h).
//
// A node that registered again after its lease lapsed is still named by the
// map's old entry for up to a TTL while it serves nothing, so the read is
// asked again, with a fresh map, until every in-sync replica answers or
// `timeout` passes (then: not checked, which a run reports as undecided).
//
// Thread safety: drives the harness; call from the thread that owns it.

#ifndef KVSTORE_TESTS_JEPSEN_REPLICA_CHECK_H_
#define KVSTORE_TESTS_JEPSEN_REPLICA_CHECK_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tests/cluster/cluster_harness.h"
#include "tests/jepsen/history.h"

namespace kvstore {
namespace jepsen {

struct ReplicaCheck {
  bool checked = false;   // every in-sync replica answered
  bool diverged = false;  // some pair of in-sync replicas differed
  std::string text;       // the report line(s)
};

ReplicaCheck CompareReplicas(testing::ClusterHarness& c, const std::vector<Op>& ops,
                             absl::Duration timeout);

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_REPLICA_CHECK_H_
