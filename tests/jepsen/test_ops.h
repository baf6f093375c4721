// Copyright 2026 The kvstore Authors.
//
// Short constructors of history ops for hand-written test histories:
//   Put(1, "k", "v1", 0, 10)            an acknowledged PUT over [0, 10]
//   Put(2, "k", "v2", 5, kNever, Outcome::kUnknown)
//   Get(3, "k", "v1", 11, 12)           a GET that returned v1
//   Get(4, "k", std::nullopt, 13, 14)   a GET that found the key absent
//   Del(5, "k", 15, 16)
// The client is the op id unless given.
//
// Thread safety: pure functions.

#ifndef KVSTORE_TESTS_JEPSEN_TEST_OPS_H_
#define KVSTORE_TESTS_JEPSEN_TEST_OPS_H_

#include <optional>
#include <string>

#include "tests/jepsen/history.h"

namespace kvstore {
namespace jepsen {
namespace test_ops {

inline Op Make(uint64_t id, OpKind kind, std::string key, std::optional<std::string> value,
               int64_t invoke, int64_t complete, Outcome outcome) {
  Op op;
  op.id = id;
  op.client = static_cast<int>(id);
  op.kind = kind;
  op.key = std::move(key);
  op.value = std::move(value);
  op.invoke_ns = invoke;
  op.complete_ns = outcome == Outcome::kUnknown ? kNever : complete;
  op.outcome = outcome;
  return op;
}

inline Op Put(uint64_t id, std::string key, std::string value, int64_t invoke, int64_t complete,
              Outcome outcome = Outcome::kOk) {
  return Make(id, OpKind::kPut, std::move(key), std::move(value), invoke, complete, outcome);
}

inline Op Del(uint64_t id, std::string key, int64_t invoke, int64_t complete,
              Outcome outcome = Outcome::kOk) {
  return Make(id, OpKind::kDelete, std::move(key), std::nullopt, invoke, complete, outcome);
}

inline Op Get(uint64_t id, std::string key, std::optional<std::string> value, int64_t invoke,
              int64_t complete) {
  return Make(id, OpKind::kGet, std::move(key), std::move(value), invoke, complete, Outcome::kOk);
}

}  // namespace test_ops
}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_TEST_OPS_H_
