// Copyright 2026 The kvstore Authors.
//
// The linearizability checker on random histories (seeded; the seed is
// printed, JEPSEN_TEST_SEED=<n> replays it):
//   - histories of real sequential executions with random overlaps, unknown
//     and failed writes must pass;
//   - the same histories with one read changed so that no linearization can
//     exist must fail, naming the changed read;
//   - on tiny arbitrary histories the search agrees with a brute-force
//     enumeration of every order;
//   - a history of 100,000 ops over 2,000 Zipf-skewed keys gets a verdict
//     for every key within the default budget.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/jepsen/history_generator.h"
#include "tests/jepsen/linearizability.h"
#include "tests/jepsen/register_search.h"

namespace kvstore {
namespace jepsen {
namespace {

uint64_t TestSeed() {
  static const uint64_t seed = [] {
    uint64_t s = 0;
    const char* env = std::getenv("JEPSEN_TEST_SEED");
    if (env == nullptr || !absl::SimpleAtoi(env, &s)) s = std::random_device{}();
    std::printf("linearizability_random_test: seed %llu (JEPSEN_TEST_SEED=%llu replays it)\n",
                static_cast<unsigned long long>(s), static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

std::string Dump(const std::vector<Op>& ops) {
  std::string s;
  for (const Op& op : ops) s += "  " + op.Describe() + "\n";
  return s;
}

TEST(LinearizabilityRandomTest, ExecutionsPassAndMutationsFail) {
  std::mt19937_64 rng(TestSeed());
  const MutationKind kinds[] = {MutationKind::kPhantom, MutationKind::kRefusedValue,
                                MutationKind::kStale, MutationKind::kFuture};
  int mutated[4] = {0, 0, 0, 0};
  for (int round = 0; round < 300; ++round) {
    GeneratorOptions g;
    g.clients = 2 + static_cast<int>(rng() % 6);
    g.keys = 1 + static_cast<int>(rng() % 4);
    g.ops = 10 + static_cast<int>(rng() % 150);
    g.unknown_fraction = 0.1;
    g.fail_fraction = 0.1;
    const std::vector<Op> ops = GenerateLinearizable(g, rng);
    const LinearizabilityReport clean = CheckLinearizable(ops, LinearizabilityOptions());
    ASSERT_TRUE(clean.ok()) << "round " << round << ": a real execution was rejected:\n"
                            << Dump(ops);
    for (int k = 0; k < 4; ++k) {
      std::vector<Op> bad = ops;
      uint64_t read_id = 0;
      if (!Mutate(kinds[k], bad, rng, &read_id)) continue;
      ++mutated[k];
      const LinearizabilityReport r = CheckLinearizable(bad, LinearizabilityOptions());
      ASSERT_EQ(r.violations.size(), 1u) << "round " << round << ", " << MutationName(kinds[k])
                                         << " of read #" << read_id << " was not found:\n"
                                         << Dump(bad);
      const KeyVerdict& v = r.violations[0];
      EXPECT_TRUE(std::any_of(v.explanation.begin(), v.explanation.end(),
                              [&](const Op& op) { return op.id == read_id; }))
          << "round " << round << ": the explanation leaves out the changed read";
      // The explanation fails on its own.
      EXPECT_EQ(CheckKey(v.key, v.explanation, LinearizabilityOptions()).verdict,
                Verdict::kViolation)
          << "round " << round;
    }
  }
  for (int k = 0; k < 4; ++k) {
    EXPECT_GT(mutated[k], 20) << MutationName(kinds[k]) << " was hardly ever applied";
  }
}

// Every order of the ops that respects real time, unknown writes optional.
bool BruteForce(const std::vector<RegisterOp>& ops, std::vector<bool>& done, int state) {
  bool definite_left = false;
  for (size_t i = 0; i < ops.size(); ++i) definite_left |= !done[i] && ops[i].complete != kNever;
  if (!definite_left) return true;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (done[i]) continue;
    bool blocked = false;  // a pending op completed before this one began
    for (size_t j = 0; j < ops.size(); ++j) {
      blocked |= j != i && !done[j] && ops[j].complete < ops[i].invoke;
    }
    if (blocked || (!ops[i].write && ops[i].value != state)) continue;
    done[i] = true;
    const bool ok = BruteForce(ops, done, ops[i].write ? ops[i].value : state);
    done[i] = false;
    if (ok) return true;
  }
  return false;
}

TEST(LinearizabilityRandomTest, SearchAgreesWithBruteForce) {
  std::mt19937_64 rng(TestSeed() + 1);
  int linearizable = 0, not_linearizable = 0;
  for (int round = 0; round < 3000; ++round) {
    std::vector<RegisterOp> ops(1 + rng() % 7);
    for (RegisterOp& op : ops) {
      op.write = rng() % 2 == 0;
      op.value = static_cast<int>(rng() % 3);
      op.invoke = static_cast<int64_t>(rng() % 20);
      op.complete = op.invoke + static_cast<int64_t>(rng() % 10);
      if (op.write && rng() % 5 == 0) op.complete = kNever;
    }
    std::vector<bool> done(ops.size(), false);
    const bool expected = BruteForce(ops, done, 0);
    const SearchResult got = SearchRegister(ops, SearchBudget());
    ASSERT_EQ(got, expected ? SearchResult::kLinearizable : SearchResult::kNotLinearizable)
        << "round " << round;
    (expected ? linearizable : not_linearizable)++;
  }
  EXPECT_GT(linearizable, 300);
  EXPECT_GT(not_linearizable, 300);
}

// The size the compose chaos runs produce: every key gets a verdict within
// the default budget (bounded by steps, not by time), and one injected
// stale read is found on its key alone.
TEST(LinearizabilityRandomTest, HundredThousandOpsOverTwoThousandKeys) {
  std::mt19937_64 rng(TestSeed() + 2);
  GeneratorOptions g;
  g.clients = 16;
  g.keys = 2000;
  g.ops = 100000;
  g.key_skew = 1.0;
  g.write_fraction = 0.35;
  std::vector<Op> ops = GenerateLinearizable(g, rng);
  const LinearizabilityReport clean = CheckLinearizable(ops, LinearizabilityOptions());
  EXPECT_TRUE(clean.violations.empty());
  EXPECT_TRUE(clean.unknown.empty()) << clean.unknown.size() << " keys undecided, first "
                                     << clean.unknown[0].key << ": " << clean.unknown[0].reason;
  EXPECT_GT(clean.keys, 1000u);
  uint64_t read_id = 0;
  ASSERT_TRUE(Mutate(MutationKind::kStale, ops, rng, &read_id));
  const LinearizabilityReport bad = CheckLinearizable(ops, LinearizabilityOptions());
  ASSERT_EQ(bad.violations.size(), 1u)
      << "the stale read #" << read_id << " was not found; " << bad.unknown.size()
      << " keys undecided" << (bad.unknown.empty() ? "" : ": " + bad.unknown[0].reason);
  EXPECT_TRUE(bad.unknown.empty());
  EXPECT_LE(bad.violations[0].explanation.size(), 4u);
}

}  // namespace
}  // namespace jepsen
}  // namespace kvstore
