// Copyright 2026 The kvstore Authors.
//
// Replica dumps as JSON lines, for the convergence check (convergence.h):
// one line per replica of a shard,
//
//   {"shard":"0","replica":"n1","data":{"k1":"v-3","k2":"v-9"}}
//
// "shard" may be a string or a number. Two lines for one (shard, replica)
// are an error, as is a line missing a field or with a non-string value.
// Empty lines are skipped.
//
// Thread safety: pure functions.

#ifndef KVSTORE_TESTS_JEPSEN_REPLICA_DUMPS_IO_H_
#define KVSTORE_TESTS_JEPSEN_REPLICA_DUMPS_IO_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tests/jepsen/convergence.h"

namespace kvstore {
namespace jepsen {

absl::StatusOr<std::vector<ShardDumps>> ParseReplicaDumps(absl::string_view text);
absl::StatusOr<std::vector<ShardDumps>> ReadReplicaDumpsFile(const std::string& path);

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_REPLICA_DUMPS_IO_H_
