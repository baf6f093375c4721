// Copyright 2026 The kvstore Authors.
//
// resp_head.h's readers against the plainest reading of the same bytes.

#include "common/protocol/resp_head.h"

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace resp {
namespace head {
namespace {

// "<prefix><1-12 digits>\r\n" at pos, digit by digit.
bool Reference(absl::string_view buf, size_t pos, char prefix, uint64_t* n, size_t* next) {
  if (pos >= buf.size() || buf[pos] != prefix) return false;
  size_t p = pos + 1;
  uint64_t v = 0;
  while (p < buf.size() && p - pos - 1 < 12 && buf[p] >= '0' && buf[p] <= '9') {
    v = v * 10 + static_cast<uint64_t>(buf[p] - '0');
    ++p;
  }
  if (p == pos + 1 || buf.size() - p < 2 || buf[p] != '\r' || buf[p + 1] != '\n') return false;
  *n = v;
  *next = p + 2;
  return true;
}

void ExpectAsReference(absl::string_view buf) {
  uint64_t want = 0;
  size_t want_next = 0;
  const bool ok = Reference(buf, 0, '$', &want, &want_next);
  uint64_t got = 12345;
  size_t pos = 0;
  ASSERT_EQ(ReadNumberLine(buf, &pos, '$', &got), ok) << absl::CEscape(buf);
  if (ok) {
    EXPECT_EQ(got, want) << absl::CEscape(buf);
    EXPECT_EQ(pos, want_next) << absl::CEscape(buf);
  } else {
    EXPECT_EQ(pos, 0u) << absl::CEscape(buf);
    EXPECT_EQ(got, 12345u) << absl::CEscape(buf);
  }
}

TEST(ReadNumberLine, EveryNumberUpToAMillionWithWhatFollows) {
  // Followed by a value (eight bytes or more behind the prefix: the word
  // path), by nothing (the loop), and with leading zeros.
  for (uint64_t v = 0; v <= 1000000; ++v) {
    const std::string digits = absl::StrCat(v);
    ExpectAsReference(absl::StrCat("$", digits, "\r\nvaluevalue"));
    ExpectAsReference(absl::StrCat("$", digits, "\r\n"));
    if (v % 997 == 0) ExpectAsReference(absl::StrCat("$00", digits, "\r\nvalue"));
    if (HasFailure()) return;
  }
}

TEST(ReadNumberLine, EveryByteAnywhereInTheWord) {
  // Each of the nine bytes after "$" replaced by each byte value, for
  // numbers of every digit count the word path takes and the two after.
  for (const char* digits : {"7", "42", "409", "4096", "65536", "999999", "1234567", "12345678"}) {
    const std::string base = absl::StrCat("$", digits, "\r\n0123456789");
    for (size_t i = 1; i <= 9; ++i) {
      for (int b = 0; b < 256; ++b) {
        std::string s = base;
        s[i] = static_cast<char>(b);
        ExpectAsReference(s);
      }
    }
  }
}

TEST(ReadNumberLine, RandomShortLines) {
  const uint32_t seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  const char alphabet[] = "0123456789\r\n$-+ :/\x80\xb9\xba";
  for (int round = 0; round < 200000; ++round) {
    std::string s = "$";
    const int n = static_cast<int>(rng() % 16);
    for (int i = 0; i < n; ++i) s += alphabet[rng() % (sizeof(alphabet) - 1)];
    ExpectAsReference(s);
    if (HasFailure()) return;
  }
}

TEST(Match, TheUsualHeadsInAnyCaseAndNothingElse) {
  EXPECT_EQ(Match("*2\r\n$3\r\nGET\r\n$3\r\n"), Usual::kGet);
  EXPECT_EQ(Match("*2\r\n$3\r\ngEt\r\n$3\r\n"), Usual::kGet);
  EXPECT_EQ(Match("*3\r\n$3\r\nsEt\r\n$3\r\n"), Usual::kSet);
  EXPECT_EQ(Match("*3\r\n$3\r\nGET\r\n$3\r\n"), Usual::kNone);  // argc of a SET
  EXPECT_EQ(Match("*2\r\n$3\r\nGET\r\n$"), Usual::kNone);       // fewer than 16 bytes
  const std::string get = "*2\r\n$3\r\nGET\r\n$3\r\n";
  for (size_t i = 0; i < 14; ++i) {
    for (int b = 0; b < 256; ++b) {
      std::string s = get;
      s[i] = static_cast<char>(b);
      const bool same_letter = i >= kName && i < kName + 3 && (b | 0x20) == (get[i] | 0x20);
      EXPECT_EQ(Match(s), s == get || same_letter ? Usual::kGet : Usual::kNone) << absl::CEscape(s);
    }
  }
}

}  // namespace
}  // namespace head
}  // namespace resp
}  // namespace kvstore
