// Copyright 2026 The kvstore Authors.
//
// Write availability around an outage, measured from a history: how long
// after an instant (e.g. the last etcd member back) writes were accepted
// again, on some shard and on every shard, and the longest stretch without
// an acknowledged write. Only acknowledged writes (PUT or DELETE, outcome
// kOk) count: an unknown write proves nothing was accepted.
//
// "Accepted again after T" is the first acknowledged write *invoked* at or
// after T: a write invoked earlier may have waited through the outage in
// the client's retries, and its completion says when the retry got through,
// not when a fresh write would.
//
// Thread safety: pure functions.

#ifndef KVSTORE_TESTS_JEPSEN_WRITE_AVAILABILITY_H_
#define KVSTORE_TESTS_JEPSEN_WRITE_AVAILABILITY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tests/jepsen/history.h"

namespace kvstore {
namespace jepsen {

struct WriteAvailability {
  // From `since` to the completion of the first acknowledged write invoked
  // at or after it; -1 when there is none.
  double first_write_ms = -1;
  // From `since` until every shard had such a write; -1 when some shard
  // had none (shards_without_write says how many).
  double all_shards_ms = -1;
  int shards_without_write = 0;
  // The longest time between two acknowledged write completions (any key)
  // that ends after `from` (the start of the outage) and starts before
  // `until` (the end of the load); `until` closes a gap writes never ended.
  double longest_gap_ms = 0;
  int64_t gap_start_ns = 0;
  int64_t gap_end_ns = 0;
  // The same per shard: the largest, and its shard.
  double longest_shard_gap_ms = 0;
  int longest_gap_shard = -1;
};

// `shard_of` maps a key to its shard (ids in [0, shards)), -1 for a key of
// no shard (left out of the per-shard figures).
WriteAvailability MeasureWrites(const std::vector<Op>& ops,
                                const std::function<int(const std::string&)>& shard_of, int shards,
                                int64_t from_ns, int64_t since_ns, int64_t until_ns);

// "first write 120 ms, every shard 480 ms, longest gap 9100 ms (shard 2: 9400 ms)".
std::string DescribeAvailability(const WriteAvailability& a);

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_WRITE_AVAILABILITY_H_
