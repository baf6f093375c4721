// Copyright 2026 The kvstore Authors.
//
// ReadMapHistory: every version of a cluster's map key that etcd still
// keeps (it keeps old revisions until a compaction), oldest first, read
// with etcd's own Range call at each earlier mod_revision, for the
// map-history checker (map_history.h).
//
// Errors: kUnavailable when no endpoint answers; kDataLoss when a version
// is not a ClusterMap. A compacted past is not an error: the versions
// before the compaction are missing and `*truncated` says so.
//
// Thread safety: a free function; blocks on network calls (5 s each).

#ifndef KVSTORE_TESTS_JEPSEN_MAP_HISTORY_READER_H_
#define KVSTORE_TESTS_JEPSEN_MAP_HISTORY_READER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/jepsen/map_history.h"

namespace kvstore {
namespace jepsen {

// `endpoints`: "host:port,..." (the first that answers is used);
// `cluster_name`: --cluster_name of the kvservers.
absl::StatusOr<std::vector<MapRevision>> ReadMapHistory(const std::string& endpoints,
                                                        const std::string& cluster_name,
                                                        bool* truncated);

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_MAP_HISTORY_READER_H_
