// Copyright 2026 The kvstore Authors.
//
// RegisterSearch: does a history of one register have a linearization?
// The search of Wing & Gong as improved by Lowe ("Testing for
// linearizability", 2017) and used by Porcupine: walk the history's call and
// return events in time order; linearize any op whose call comes before the
// first pending return if the register allows it; back up when a return is
// reached with its op not linearized. Every (set of linearized ops, register
// state) reached is remembered, so no configuration is explored twice.
//
// Register semantics: state is a value number, 0 = absent (the start). A
// write sets it (always allowed); a read is allowed only when the state
// equals its value.
//
// An op with complete == kNever (outcome unknown) may be linearized at any
// point after its invocation or never: the search succeeds as soon as every
// op that completed is linearized. Only writes may be of unknown outcome.
// Such a write is only tried right before a read of its value that the
// state cannot explain, and only the earliest usable one of that value: any
// linearization can be rewritten into that form (register_search.cc), so
// this prunes without losing answers.
//
// Cost: each step is O(1) plus, when an op is linearized, a copy of the
// linearized set into the memo (only the words between its leading full
// ones and its trailing empty ones: a few, as ops are mostly linearized in
// call order). The budget bounds the steps and the memo's words; past it
// the answer is kBudgetExceeded, never a verdict.
//
// Thread safety: a pure function.

#ifndef KVSTORE_TESTS_JEPSEN_REGISTER_SEARCH_H_
#define KVSTORE_TESTS_JEPSEN_REGISTER_SEARCH_H_

#include <cstdint>
#include <vector>

namespace kvstore {
namespace jepsen {

struct RegisterOp {
  bool write = false;
  int value = 0;  // written or read; 0 = absent
  int64_t invoke = 0;
  int64_t complete = 0;  // kNever: outcome unknown (writes only)
};

struct SearchBudget {
  uint64_t max_steps = 20'000'000;
  uint64_t max_memo_words = 16'000'000;  // 128 MB of linearized sets
};

enum class SearchResult { kLinearizable, kNotLinearizable, kBudgetExceeded };

struct SearchStats {
  uint64_t steps = 0;
  uint64_t memo_entries = 0;
};

SearchResult SearchRegister(const std::vector<RegisterOp>& ops, const SearchBudget& budget,
                            SearchStats* stats = nullptr);

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_REGISTER_SEARCH_H_
