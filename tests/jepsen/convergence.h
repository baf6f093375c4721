// Copyright 2026 The kvstore Authors.
//
// Replica convergence: at quiescence (the load stopped, faults healed, every
// shard in sync) every in-sync replica of a shard must hold the same keys
// with the same values. Any difference is a defect even if no read saw it
// yet: the next failover would make one of the versions the truth.
//
// Input: per shard, one dump per replica (key -> value). A key missing from
// some dumps and present in others is a difference too.
//
// Thread safety: a pure function.

#ifndef KVSTORE_TESTS_JEPSEN_CONVERGENCE_H_
#define KVSTORE_TESTS_JEPSEN_CONVERGENCE_H_

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kvstore {
namespace jepsen {

using ReplicaDump = std::map<std::string, std::string>;  // key -> value

struct ShardDumps {
  std::string shard;
  std::map<std::string, ReplicaDump> replicas;  // replica name -> its dump
};

struct KeyDifference {
  std::string shard;
  std::string key;
  // Every replica's value of the key; nullopt = absent there.
  std::map<std::string, std::optional<std::string>> values;
};

struct ConvergenceReport {
  size_t shards = 0;
  size_t replicas = 0;
  size_t keys = 0;  // keys compared, summed over shards
  std::vector<KeyDifference> differences;
  bool ok() const { return differences.empty(); }
};

ConvergenceReport CheckConvergence(const std::vector<ShardDumps>& shards);

// "shard 0 key k7: n1=v-3 n2=(absent)".
std::string DescribeDifference(const KeyDifference& d);

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_CONVERGENCE_H_
