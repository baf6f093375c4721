// Copyright 2026 The kvstore Authors.
//
// The array parser's fast path for the usual GET and SET (resp_head.h) must
// decide every input exactly as the field-by-field path does: same kind,
// same bytes consumed, same arguments, same value length, same error text.
// These tests feed both paths the usual requests and every damaged form of
// them nearby (cut short anywhere, one byte changed anywhere, tight limits).

#include "common/protocol/resp_array.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/protocol/resp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace resp {
namespace {

using Kind = ParsedRequest::Kind;

// Both paths over `buf`; any difference fails with the input named.
void ExpectSameParse(absl::string_view buf, const RequestLimits& limits) {
  ParsedRequest fast;
  ParsedRequest slow;
  internal::ParseArray(buf, limits, &fast);
  internal::ParseFieldByField(buf, limits, &slow);
  const std::string what =
      absl::StrCat("input \"", absl::CEscape(buf), "\" max_args ", limits.max_args, " max_bulk ",
                   limits.max_bulk_bytes, " max_buffered ", limits.max_buffered_bytes);
  ASSERT_EQ(static_cast<int>(fast.kind), static_cast<int>(slow.kind)) << what;
  EXPECT_EQ(fast.consumed, slow.consumed) << what;
  EXPECT_EQ(fast.value_len, slow.value_len) << what;
  EXPECT_EQ(fast.error, slow.error) << what;
  EXPECT_EQ(std::vector<absl::string_view>(fast.args.begin(), fast.args.end()),
            std::vector<absl::string_view>(slow.args.begin(), slow.args.end()))
      << what;
  // ParseUsualRequest(), when it decides, decides the same (the loop's
  // look-ahead parses with it ahead of a request's turn).
  UsualRequest usual;
  if (ParseUsualRequest(buf, limits, &usual)) {
    ParsedRequest filled;
    FillParsed(usual, &filled);
    ASSERT_EQ(static_cast<int>(filled.kind), static_cast<int>(slow.kind)) << what;
    EXPECT_EQ(filled.consumed, slow.consumed) << what;
    EXPECT_EQ(filled.value_len, slow.value_len) << what;
    EXPECT_EQ(std::vector<absl::string_view>(filled.args.begin(), filled.args.end()),
              std::vector<absl::string_view>(slow.args.begin(), slow.args.end()))
        << what;
  }
  // Views into the input, never copies: the loop consumes by offset.
  for (absl::string_view a : fast.args) {
    EXPECT_TRUE(a.empty() ||
                (a.data() >= buf.data() && a.data() + a.size() <= buf.data() + buf.size()))
        << what;
  }
}

std::vector<std::string> UsualRequests() {
  std::vector<std::string> out;
  for (const char* name : {"GET", "get", "gEt", "SET", "set", "SeT"}) {
    for (const std::string key : {std::string(), std::string("k"), std::string("key:000123"),
                                  std::string(300, 'x'), std::string("a\r\nb")}) {
      if (name[0] == 'G' || name[0] == 'g') {
        out.push_back(absl::StrCat("*2\r\n$3\r\n", name, "\r\n$", key.size(), "\r\n", key,
                                   "\r\n*1\r\n$4\r\nPING\r\n"));
        continue;
      }
      for (const std::string len : {"0", "4096", "999999999999", "1000000000000", "00012"}) {
        out.push_back(absl::StrCat("*3\r\n$3\r\n", name, "\r\n$", key.size(), "\r\n", key, "\r\n$",
                                   len, "\r\nvalue"));
      }
    }
  }
  return out;
}

std::vector<RequestLimits> Limits(size_t key_len) {
  std::vector<RequestLimits> out(1);
  for (uint64_t args : {1, 2, 3}) {
    out.emplace_back();
    out.back().max_args = args;
  }
  for (uint64_t bulk : {uint64_t{0}, uint64_t{2}, uint64_t{3}, key_len - 1, key_len}) {
    out.emplace_back();
    out.back().max_bulk_bytes = bulk;
  }
  for (uint64_t buffered : {key_len + 2, key_len + 3}) {
    out.emplace_back();
    out.back().max_buffered_bytes = buffered;
  }
  return out;
}

TEST(ParseArray, TheUsualRequestsParseAsFieldByField) {
  for (const std::string& req : UsualRequests()) {
    for (const RequestLimits& limits : Limits(req.size() > 300 ? 300 : 10)) {
      ExpectSameParse(req, limits);
    }
  }
}

TEST(ParseArray, TheUsualRequestsCutShortParseAsFieldByField) {
  for (const std::string& req : UsualRequests()) {
    for (size_t n = 0; n <= req.size(); ++n)
      ExpectSameParse(absl::string_view(req).substr(0, n), {});
  }
}

TEST(ParseArray, OneByteChangedAnywhereParsesAsFieldByField) {
  // The bytes that matter to either path: digits, signs, framing, the
  // letters' other cases and their neighbours under 0x20.
  const std::string alphabet = "0129-+*$\r\n GgEeTtSs\x07\x27\x34\x45\x65\x13\x73\xff";
  for (const std::string& req : UsualRequests()) {
    const size_t span = std::min<size_t>(req.size(), 40);  // the head and the key's line
    for (size_t i = 0; i < span; ++i) {
      for (char c : alphabet) {
        std::string damaged = req;
        damaged[i] = c;
        ExpectSameParse(damaged, {});
      }
    }
  }
}

TEST(ParseArray, RandomBytesBehindAUsualHeadParseAsFieldByField) {
  const uint32_t seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  const std::string pieces[] = {"*2\r\n$3\r\nGET\r\n",
                                "*3\r\n$3\r\nset\r\n",
                                "$",
                                "1",
                                "0",
                                "9",
                                "\r\n",
                                "-",
                                "k",
                                "\r",
                                "\n",
                                "$12\r\n"};
  for (int round = 0; round < 20000; ++round) {
    std::string buf = pieces[rng() % 2];
    const int n = static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) buf += pieces[2 + rng() % 10];
    ExpectSameParse(buf, {});
    if (HasFailure()) return;
  }
}

TEST(ParseArray, TheFastPathGivesTheUsualAnswers) {
  ParsedRequest get;
  internal::ParseArray("*2\r\n$3\r\ngEt\r\n$3\r\nabc\r\n", {}, &get);
  EXPECT_EQ(get.kind, Kind::kCommand);
  EXPECT_EQ(get.consumed, 22u);
  EXPECT_THAT(get.args, ::testing::ElementsAre("gEt", "abc"));
  ParsedRequest set;
  internal::ParseArray("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4096\r\n", {}, &set);
  EXPECT_EQ(set.kind, Kind::kSetValue);
  EXPECT_EQ(set.consumed, 27u);
  EXPECT_EQ(set.value_len, 4096u);
  EXPECT_THAT(set.args, ::testing::ElementsAre("SET", "k"));
}

}  // namespace
}  // namespace resp
}  // namespace kvstore
