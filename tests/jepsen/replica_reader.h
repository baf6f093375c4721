// Copyright 2026 The kvstore Authors.
//
// ReadReplicas: what every in-sync replica of every shard holds for a set of
// keys, for the convergence check (convergence.h) at quiescence. Each
// replica is asked directly over RESP on its own data port, after READONLY
// (a backup then answers reads of its shards from its own index), one
// pipelined GET per key of that shard — the replica's copy, not the
// primary's answer.
//
// Errors: kUnavailable naming the node when one cannot be reached or its
// connection breaks; kInternal for a reply that is neither a value, a null
// nor an error (an error reply for a key is an error of the dump too: at
// quiescence a replica must answer every key of its shards).
//
// Thread safety: a free function; blocking.

#ifndef KVSTORE_TESTS_JEPSEN_REPLICA_READER_H_
#define KVSTORE_TESTS_JEPSEN_REPLICA_READER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/kv_cluster.pb.h"
#include "tests/jepsen/convergence.h"

namespace kvstore {
namespace jepsen {

// `resp_addresses`: node id -> its RESP "host:port".
absl::StatusOr<std::vector<ShardDumps>> ReadReplicas(
    const v1::ClusterMap& map, const std::map<std::string, std::string>& resp_addresses,
    const std::vector<std::string>& keys);

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_REPLICA_READER_H_
