// Copyright 2026 The kvstore Authors.
//
// Random register histories that are linearizable by construction, for
// testing the checkers: clients run ops one after another; each op gets a
// linearization point inside its interval and the ops are applied to real
// registers in that order, so every read returns what a sequential store
// would have. Ops of different clients overlap at random. Values are unique
// ("c<client>-<n>"). A write of unknown outcome takes effect at a random
// point after its invocation (possibly long after, or after later writes of
// the same client) or never; a failed write never takes effect.
//
// Mutations turn such a history into one that is certainly not
// linearizable (see MutationKind); each returns false when the history has
// no place for it.
//
// Thread safety: pure functions.

#ifndef KVSTORE_TESTS_JEPSEN_HISTORY_GENERATOR_H_
#define KVSTORE_TESTS_JEPSEN_HISTORY_GENERATOR_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/jepsen/history.h"

namespace kvstore {
namespace jepsen {

struct GeneratorOptions {
  int clients = 4;
  int keys = 3;
  int ops = 100;
  double write_fraction = 0.4;
  double delete_fraction = 0.05;   // of all ops
  double unknown_fraction = 0.05;  // of writes
  double fail_fraction = 0.05;     // of writes
  // Zipf-like skew of key choice: key i is picked with weight 1/(i+1)^skew.
  double key_skew = 0.0;
  int64_t max_latency = 100;  // an op lasts 1..2*max_latency time units
};

std::vector<Op> GenerateLinearizable(const GeneratorOptions& options, std::mt19937_64& rng);

enum class MutationKind {
  kPhantom,       // a read returns a value never written
  kRefusedValue,  // a read returns the value of a failed write of its key
  kStale,         // a read returns v1 although an acked write followed
                  // v1's acked write and completed before the read began
  kFuture,        // a read returns the value of a write invoked after the
                  // read completed
};
const char* MutationName(MutationKind kind);

// Applies `kind` to one random read of `ops`; on success sets *mutated_id to
// the read's id.
bool Mutate(MutationKind kind, std::vector<Op>& ops, std::mt19937_64& rng, uint64_t* mutated_id);

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_HISTORY_GENERATOR_H_
