// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/history_io.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/jepsen/test_ops.h"

namespace kvstore {
namespace jepsen {
namespace {

using ::testing::HasSubstr;

TEST(HistoryIoTest, OpsRoundTrip) {
  Op put = test_ops::Put(1, "k", "v1", 100, 200);
  put.batch = "b7";
  put.workload = "set";
  Op unknown = test_ops::Put(2, "k", "v2", 150, 0, Outcome::kUnknown);
  unknown.error = "DEADLINE_EXCEEDED: timeout";
  Op get = test_ops::Get(3, "k", std::nullopt, 300, 400);
  get.final_read = true;
  get.path = "rdma";
  const std::vector<Op> ops = {put, unknown, get, test_ops::Del(4, "k", 500, 600, Outcome::kFail)};
  std::string text;
  for (const Op& op : ops) text += FormatOpLine(op) + "\n";
  absl::StatusOr<std::vector<Op>> back = ParseHistory(text);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(FormatOpLine((*back)[i]), FormatOpLine(ops[i]));
    EXPECT_EQ((*back)[i].Describe(), ops[i].Describe());
  }
  EXPECT_EQ((*back)[1].complete_ns, kNever);
}

// What tests/cluster's History::DumpJsonLines writes (chaos.sh's history).
TEST(HistoryIoTest, ReadsTheClusterTestsFormat) {
  absl::StatusOr<std::vector<Op>> ops = ParseHistory(
      R"({"id":0,"client":1,"op":"PUT","key":"key3","value":"c1-0-xx","invoke_us":0,"complete_us":812,"outcome":"ok"})"
      "\n"
      R"({"id":1,"client":2,"op":"GET","key":"key3","value":null,"invoke_us":5,"complete_us":9,"outcome":"failed","error":"INVALID_ARGUMENT: x"})"
      "\n"
      R"({"id":2,"client":3,"op":"PUT","key":"key3","value":"c3-0-xx","invoke_us":7,"complete_us":null,"outcome":"unknown"})"
      "\n"
      R"({"id":3,"client":5,"op":"GET","key":"key3","value":"c1-0-xx","invoke_us":900,"complete_us":950,"outcome":"ok","final":true})"
      "\n");
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_EQ(ops->size(), 4u);
  EXPECT_EQ((*ops)[0].complete_ns, 812000);
  EXPECT_EQ((*ops)[1].outcome, Outcome::kFail);
  EXPECT_EQ((*ops)[2].outcome, Outcome::kUnknown);
  EXPECT_EQ((*ops)[2].complete_ns, kNever);
  EXPECT_TRUE((*ops)[3].final_read);
  EXPECT_EQ((*ops)[3].value, "c1-0-xx");
  EXPECT_EQ(Normalize(*ops).size(), 3u);  // the failed GET saw nothing
}

TEST(HistoryIoTest, BadLinesAreErrorsNamingTheLine) {
  EXPECT_THAT(std::string(ParseHistory("\n{").status().message()), HasSubstr("line 2"));
  EXPECT_THAT(std::string(ParseHistory(R"({"op":"PUT","key":"k","invoke_ns":1,"outcome":"ok"})")
                              .status()
                              .message()),
              HasSubstr("without a value"));
  EXPECT_THAT(std::string(ParseHistory(R"({"op":"GET","key":"k","invoke_ns":1,"outcome":"ok"})")
                              .status()
                              .message()),
              HasSubstr("complete time"));
  EXPECT_THAT(std::string(ParseHistory(R"({"op":"CAS","key":"k","invoke_ns":1,"outcome":"ok"})")
                              .status()
                              .message()),
              HasSubstr("unknown op"));
  EXPECT_FALSE(
      ParseHistory(R"({"op":"GET","key":"k","invoke_ns":1,"complete_ns":2,"outcome":"maybe"})")
          .ok());
}

}  // namespace
}  // namespace jepsen
}  // namespace kvstore
