// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/history_generator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kvstore {
namespace jepsen {
namespace {

int64_t Uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

double Unit(std::mt19937_64& rng) { return std::uniform_real_distribution<double>(0, 1)(rng); }

std::vector<double> KeyWeights(const GeneratorOptions& o) {
  std::vector<double> w;
  for (int i = 0; i < o.keys; ++i) w.push_back(1.0 / std::pow(i + 1.0, o.key_skew));
  return w;
}

}  // namespace

std::vector<Op> GenerateLinearizable(const GeneratorOptions& o, std::mt19937_64& rng) {
  std::vector<Op> ops;
  std::vector<int64_t> point;  // linearization point; -1: never takes effect
  std::vector<int64_t> client_free(o.clients, 0);
  std::vector<uint64_t> seq(o.clients, 0);
  const std::vector<double> weights = KeyWeights(o);
  std::discrete_distribution<int> key_of(weights.begin(), weights.end());
  const int64_t lat = std::max<int64_t>(1, o.max_latency);
  for (int i = 0; i < o.ops; ++i) {
    // The client free first goes next, so clients interleave.
    const int c = static_cast<int>(std::min_element(client_free.begin(), client_free.end()) -
                                   client_free.begin());
    Op op;
    op.id = static_cast<uint64_t>(i) + 1;
    op.client = c;
    op.key = absl::StrCat("k", key_of(rng));
    op.invoke_ns = client_free[c] + Uniform(rng, 0, lat);
    int64_t lp = op.invoke_ns + Uniform(rng, 0, lat);
    op.complete_ns = lp + Uniform(rng, 0, lat);
    client_free[c] = op.complete_ns + 1;
    op.outcome = Outcome::kOk;
    const double pick = Unit(rng);
    if (pick < o.delete_fraction) {
      op.kind = OpKind::kDelete;
    } else if (pick < o.write_fraction) {
      op.kind = OpKind::kPut;
      op.value = absl::StrCat("c", c, "-", seq[c]++);
    } else {
      op.kind = OpKind::kGet;
    }
    if (op.is_write()) {
      const double fate = Unit(rng);
      if (fate < o.fail_fraction) {
        op.outcome = Outcome::kFail;
        lp = -1;
      } else if (fate < o.fail_fraction + o.unknown_fraction) {
        op.outcome = Outcome::kUnknown;
        op.complete_ns = kNever;
        // Maybe never; else at any time after the invocation, often late.
        lp = Unit(rng) < 0.3 ? -1 : op.invoke_ns + Uniform(rng, 0, 20 * lat);
      }
    }
    ops.push_back(std::move(op));
    point.push_back(lp);
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (point[i] >= 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return point[a] < point[b]; });
  std::map<std::string, std::optional<std::string>> state;
  for (size_t i : order) {
    Op& op = ops[i];
    if (op.kind == OpKind::kGet) {
      op.value = state[op.key];
    } else {
      state[op.key] = op.kind == OpKind::kPut ? op.value : std::nullopt;
    }
  }
  return ops;
}

const char* MutationName(MutationKind kind) {
  switch (kind) {
    case MutationKind::kPhantom:
      return "phantom";
    case MutationKind::kRefusedValue:
      return "refused-value";
    case MutationKind::kStale:
      return "stale";
    case MutationKind::kFuture:
      return "future";
  }
  return "?";
}

namespace {

// The value `kind` would give read `r`, if any.
std::optional<std::string> Candidate(MutationKind kind, const Op& r, const std::vector<Op>& ops,
                                     std::mt19937_64& rng) {
  std::vector<std::string> values;
  for (const Op& w1 : ops) {
    if (w1.key != r.key || w1.kind != OpKind::kPut) continue;
    if (kind == MutationKind::kRefusedValue && w1.outcome == Outcome::kFail) {
      values.push_back(*w1.value);
    } else if (kind == MutationKind::kFuture && w1.outcome != Outcome::kFail &&
               w1.invoke_ns > r.complete_ns) {
      values.push_back(*w1.value);
    } else if (kind == MutationKind::kStale && w1.outcome == Outcome::kOk) {
      for (const Op& w2 : ops) {
        if (w2.key == r.key && w2.is_write() && w2.outcome == Outcome::kOk &&
            w1.complete_ns < w2.invoke_ns && w2.complete_ns < r.invoke_ns) {
          values.push_back(*w1.value);
          break;
        }
      }
    }
  }
  if (kind == MutationKind::kPhantom) values.push_back("never-written");
  if (values.empty()) return std::nullopt;
  return values[Uniform(rng, 0, static_cast<int64_t>(values.size()) - 1)];
}

}  // namespace

bool Mutate(MutationKind kind, std::vector<Op>& ops, std::mt19937_64& rng, uint64_t* mutated_id) {
  std::vector<size_t> reads;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind == OpKind::kGet && ops[i].outcome == Outcome::kOk) reads.push_back(i);
  }
  std::shuffle(reads.begin(), reads.end(), rng);
  for (size_t i : reads) {
    std::optional<std::string> v = Candidate(kind, ops[i], ops, rng);
    if (!v.has_value()) continue;
    ops[i].value = std::move(v);
    *mutated_id = ops[i].id;
    return true;
  }
  return false;
}

}  // namespace jepsen
}  // namespace kvstore
