// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/register_search.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/jepsen/history.h"

namespace kvstore {
namespace jepsen {
namespace {

RegisterOp W(int v, int64_t invoke, int64_t complete) { return {true, v, invoke, complete}; }
RegisterOp R(int v, int64_t invoke, int64_t complete) { return {false, v, invoke, complete}; }

SearchResult Search(const std::vector<RegisterOp>& ops) {
  return SearchRegister(ops, SearchBudget());
}

TEST(RegisterSearchTest, TheRegisterStartsAbsent) {
  EXPECT_EQ(Search({}), SearchResult::kLinearizable);
  EXPECT_EQ(Search({R(0, 0, 1)}), SearchResult::kLinearizable);
  EXPECT_EQ(Search({R(1, 0, 1)}), SearchResult::kNotLinearizable);
}

TEST(RegisterSearchTest, RealTimeOrderBinds) {
  EXPECT_EQ(Search({W(1, 0, 1), R(1, 2, 3)}), SearchResult::kLinearizable);
  EXPECT_EQ(Search({W(1, 0, 1), R(0, 2, 3)}), SearchResult::kNotLinearizable);
  // Overlapping: the read may come first.
  EXPECT_EQ(Search({W(1, 0, 5), R(0, 2, 3)}), SearchResult::kLinearizable);
  // Equal instants count as overlapping.
  EXPECT_EQ(Search({W(1, 0, 2), R(0, 2, 3)}), SearchResult::kLinearizable);
}

TEST(RegisterSearchTest, AnUnknownWriteIsOptionalButNotEarly) {
  EXPECT_EQ(Search({W(1, 0, kNever), R(0, 5, 6)}), SearchResult::kLinearizable);
  EXPECT_EQ(Search({W(1, 0, kNever), R(1, 5, 6)}), SearchResult::kLinearizable);
  EXPECT_EQ(Search({R(1, 0, 1), W(1, 2, kNever)}), SearchResult::kNotLinearizable);
  // Once: seen, overwritten, not seen again.
  EXPECT_EQ(Search({W(1, 0, kNever), R(1, 1, 2), W(2, 3, 4), R(1, 5, 6)}),
            SearchResult::kNotLinearizable);
}

TEST(RegisterSearchTest, TheBudgetGivesNoVerdict) {
  SearchBudget tiny;
  tiny.max_steps = 1;
  SearchStats stats;
  EXPECT_EQ(SearchRegister({W(1, 0, 1), R(1, 2, 3), W(2, 4, 5)}, tiny, &stats),
            SearchResult::kBudgetExceeded);
  EXPECT_EQ(stats.steps, 2u);
}

}  // namespace
}  // namespace jepsen
}  // namespace kvstore
