// Copyright 2026 The kvstore Authors.

#include "server/resp/lookahead.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace resp_internal {
namespace {

std::string Get(const std::string& k) {
  return "*2\r\n$3\r\nGET\r\n$" + std::to_string(k.size()) + "\r\n" + k + "\r\n";
}
std::string Set(const std::string& k, const std::string& v) {
  return "*3\r\n$3\r\nset\r\n$" + std::to_string(k.size()) + "\r\n" + k + "\r\n$" +
         std::to_string(v.size()) + "\r\n" + v + "\r\n";
}

std::vector<std::string> Peek(const std::string& buf, size_t max = 8) {
  absl::string_view keys[8];
  const size_t n = PeekKeys(buf, keys, max);
  return std::vector<std::string>(keys, keys + n);
}

TEST(PeekKeys, FindsPipelinedGetAndSetKeysInOrder) {
  EXPECT_THAT(Peek(Get("a") + Set("bb", "value\r\nwith crlf") + Get("ccc")),
              testing::ElementsAre("a", "bb", "ccc"));
}

TEST(PeekKeys, StopsAtMax) {
  EXPECT_THAT(Peek(Get("a") + Get("b") + Get("c"), 2), testing::ElementsAre("a", "b"));
  EXPECT_THAT(Peek(Get("a"), 0), testing::ElementsAre());
}

TEST(PeekKeys, StopsAtOtherCommands) {
  EXPECT_THAT(Peek(Get("a") + "*1\r\n$4\r\nPING\r\n" + Get("b")), testing::ElementsAre("a"));
  // GET with the wrong arity, SET with options, inline commands.
  EXPECT_THAT(Peek("*3\r\n$3\r\nGET\r\n$1\r\na\r\n$1\r\nb\r\n"), testing::ElementsAre());
  EXPECT_THAT(Peek("*4\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\nb\r\n$2\r\nNX\r\n"),
              testing::ElementsAre());
  EXPECT_THAT(Peek("GET a\r\n"), testing::ElementsAre());
}

TEST(PeekKeys, IncompleteInputEndsThePeek) {
  const std::string full = Get("key1") + Set("key2", std::string(100, 'v')) + Get("key3");
  // Every prefix yields a prefix of the keys and never reads past the end.
  for (size_t len = 0; len <= full.size(); ++len) {
    const std::vector<std::string> keys = Peek(full.substr(0, len));
    const std::vector<std::string> all = {"key1", "key2", "key3"};
    ASSERT_LE(keys.size(), all.size());
    for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(keys[i], all[i]) << len;
  }
  // A SET whose value is still arriving gives its key, then stops.
  EXPECT_THAT(Peek(Get("a") + "*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$5\r\nab"),
              testing::ElementsAre("a", "b"));
}

TEST(PeekKeys, MalformedFramingFindsNothing) {
  EXPECT_THAT(Peek("*2\r\n$3\r\nGET\r\n$5\r\nab\r\n"), testing::ElementsAre());
  EXPECT_THAT(Peek("*2\r\n$x\r\nGET\r\n"), testing::ElementsAre());
  EXPECT_THAT(Peek("*2\r\n$99999999999999999999\r\n"), testing::ElementsAre());
  EXPECT_THAT(Peek("*2\r\n$3\r\nGETxx$1\r\na\r\n"), testing::ElementsAre());
}

// The usual head ("*2\r\n$3\r\nGET\r\n$", "*3\r\n$3\r\nSET\r\n$") is matched
// as two words; the name must still be GET or SET in any case and nothing
// else, exactly as on the field-by-field path that shorter input takes.
TEST(PeekKeys, TheWordCompareOfTheUsualHeadIsExact) {
  const std::string key = "a-key-long-enough";
  for (const char* name : {"GET", "get", "gEt", "GeT"}) {
    const std::string req = std::string("*2\r\n$3\r\n") + name + "\r\n$17\r\n" + key + "\r\n";
    EXPECT_THAT(Peek(req + req), testing::ElementsAre(key, key)) << name;
  }
  for (const char* name : {"SET", "set", "sEt"}) {
    const std::string req =
        std::string("*3\r\n$3\r\n") + name + "\r\n$17\r\n" + key + "\r\n$2\r\nvv\r\n";
    EXPECT_THAT(Peek(req + req), testing::ElementsAre(key, key)) << name;
  }
  // One byte off anywhere in the head, or a name one bit off a letter's
  // case (0x20 lowers only letters), finds nothing.
  const std::string get = "*2\r\n$3\r\nGET\r\n$17\r\n" + key + "\r\n";
  for (size_t i = 0; i < 14; ++i) {
    for (const char delta : {'\x01', '\x20', '\x40'}) {
      std::string bad = get;
      bad[i] = static_cast<char>(bad[i] ^ delta);
      // Only a letter's case may change.
      if (delta == '\x20' && i >= 8 && i < 11) continue;
      EXPECT_THAT(Peek(bad), testing::ElementsAre()) << i << " " << int{delta};
    }
  }
  EXPECT_THAT(Peek("*3\r\n$3\r\nGET\r\n$17\r\n" + key + "\r\n$2\r\nvv\r\n"),
              testing::ElementsAre());
  EXPECT_THAT(Peek("*2\r\n$3\r\nSET\r\n$17\r\n" + key + "\r\n"), testing::ElementsAre());
  // Twelve digits are read; thirteen are refused.
  EXPECT_THAT(Peek("*2\r\n$3\r\nGET\r\n$000000000001\r\na\r\n"), testing::ElementsAre("a"));
  EXPECT_THAT(Peek("*2\r\n$3\r\nGET\r\n$0000000000001\r\na\r\n"), testing::ElementsAre());
}

const resp::RequestLimits kLimits;

layout::KeyHash HashOf(absl::string_view key) { return layout::HashKey(key, 7, 1024); }

std::vector<std::string> KeysOf(const Lookahead::Keys& k) {
  return std::vector<std::string>(k.keys, k.keys + k.count);
}

// As the loop uses it: before each request of a pipeline runs, Peek() the
// input behind it. Every step finds what PeekKeys finds, and from the second
// step on the first key's hash is the one remembered a step earlier.
TEST(Lookahead, WalksAPipelineHashingEachKeyOnce) {
  const std::vector<std::string> reqs = {Get("k0"), Set("k1", "v\r\n1"), Get("k2"), Set("k3", "v3"),
                                         Get("k4")};
  std::string buf;
  for (const std::string& r : reqs) buf += r;
  Lookahead la;
  size_t at = 0;
  for (size_t i = 0; i + 1 < reqs.size(); ++i) {
    at += reqs[i].size();
    const absl::string_view rest = absl::string_view(buf).substr(at);
    const Lookahead::Keys k = la.Peek(rest, kLimits);
    EXPECT_EQ(KeysOf(k), Peek(std::string(rest), 2)) << i;
    if (i == 0) {
      EXPECT_EQ(k.first_hash, nullptr);
    } else {
      ASSERT_NE(k.first_hash, nullptr) << i;
      EXPECT_EQ(k.first_hash->fingerprint, HashOf(k.keys[0]).fingerprint) << i;
      EXPECT_EQ(k.first_hash->bucket[0], HashOf(k.keys[0]).bucket[0]) << i;
    }
    if (k.count == 2) la.Remember(HashOf(k.keys[1]));
  }
}

// Input somewhere else (another connection, or a buffer that moved) is
// peeked afresh: nothing remembered is handed out for it.
TEST(Lookahead, InputElsewhereIsPeekedAfresh) {
  const std::string buf = Get("a") + Get("b") + Get("c");
  Lookahead la;
  Lookahead::Keys k = la.Peek(buf, kLimits);
  la.Remember(HashOf("b"));
  const std::string moved = buf.substr(Get("a").size());  // "b" then "c", at another address
  k = la.Peek(moved, kLimits);
  EXPECT_THAT(KeysOf(k), testing::ElementsAre("b", "c"));
  EXPECT_EQ(k.first_hash, nullptr);
}

// The remembered request is only reused while the input still holds all of
// it: a shorter input at the same address is peeked afresh, and nothing is
// read past its end.
TEST(Lookahead, NeverReadsPastTheInput) {
  const std::string buf = Get("a") + Get("bbbb") + Get("c");
  Lookahead la;
  la.Peek(buf, kLimits);
  la.Remember(HashOf("bbbb"));
  const absl::string_view rest = absl::string_view(buf).substr(Get("a").size());
  const Lookahead::Keys k = la.Peek(rest.substr(0, Get("bbbb").size() - 1), kLimits);
  EXPECT_EQ(k.count, 0u);
  EXPECT_EQ(k.first_hash, nullptr);
}

// A SET whose value is still arriving ends the peek and is not remembered:
// the next call parses it again once more of it is there.
TEST(Lookahead, AnIncompleteSecondRequestIsNotRemembered) {
  const std::string full = Get("a") + Set("b", std::string(50, 'v')) + Get("c");
  const std::string partial = full.substr(0, full.size() - Get("c").size() - 10);
  Lookahead la;
  Lookahead::Keys k = la.Peek(partial, kLimits);
  EXPECT_THAT(KeysOf(k), testing::ElementsAre("a", "b"));
  la.Remember(HashOf("b"));
  k = la.Peek(absl::string_view(full).substr(Get("a").size()), kLimits);
  EXPECT_THAT(KeysOf(k), testing::ElementsAre("b", "c"));
  EXPECT_EQ(k.first_hash, nullptr);
}

// As the loop uses it: each request of a pipeline, when its turn comes, is
// handed over parsed exactly as resp::ParseUsualRequest parses it, with the
// hash remembered for it; nothing is handed over twice.
TEST(Lookahead, HandsEachRequestOverParsedAsTheParserWould) {
  const std::vector<std::string> reqs = {Get("k0"), Set("k1", "v\r\n1"), Get("k2"),
                                         Set("k3", std::string(300, 'v')), Get("k4")};
  std::string buf;
  for (const std::string& r : reqs) buf += r;
  Lookahead la;
  size_t at = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const absl::string_view rest = absl::string_view(buf).substr(at);
    const Lookahead::Ahead* ahead = la.TakeParsed(rest, kLimits);
    if (i == 0) {
      EXPECT_EQ(ahead, nullptr);
    } else {
      ASSERT_NE(ahead, nullptr) << i;
      resp::UsualRequest want;
      ASSERT_TRUE(resp::ParseUsualRequest(rest, kLimits, &want)) << i;
      EXPECT_EQ(ahead->request.is_set, want.is_set) << i;
      EXPECT_EQ(ahead->request.name.data(), want.name.data()) << i;
      EXPECT_EQ(ahead->request.key.data(), want.key.data()) << i;
      EXPECT_EQ(ahead->request.key.size(), want.key.size()) << i;
      EXPECT_EQ(ahead->request.value_len, want.value_len) << i;
      EXPECT_EQ(ahead->request.consumed, want.consumed) << i;
      ASSERT_TRUE(ahead->has_hash) << i;
      EXPECT_TRUE(ahead->hash == HashOf(want.key)) << i;
      EXPECT_EQ(la.TakeParsed(rest, kLimits), nullptr) << i;  // once
    }
    at += reqs[i].size();
    if (at == buf.size()) break;
    const Lookahead::Keys k = la.Peek(absl::string_view(buf).substr(at), kLimits);
    if (k.first_hash == nullptr && k.count >= 1) la.RememberFirst(HashOf(k.keys[0]));
    if (k.count == 2) la.Remember(HashOf(k.keys[1]));
  }
}

// A parse is only handed over under the same limits object, for the same
// place, and not after Forget().
TEST(Lookahead, HandsNothingOverForOtherLimitsPlacesOrAfterForget) {
  const std::string buf = Get("a") + Get("b") + Get("c");
  const absl::string_view rest = absl::string_view(buf).substr(Get("a").size());
  const resp::RequestLimits other;
  Lookahead la;
  la.Peek(rest, kLimits);
  EXPECT_EQ(la.TakeParsed(rest, other), nullptr);
  EXPECT_EQ(la.TakeParsed(rest.substr(1), kLimits), nullptr);
  la.Forget();
  EXPECT_EQ(la.TakeParsed(rest, kLimits), nullptr);
  la.Peek(rest, kLimits);
  EXPECT_NE(la.TakeParsed(rest, kLimits), nullptr);
}

// What the parser's fast path would not decide (a key over the limits, a
// head written differently) is peeked for its key only and left to the
// parser; a request found so still chains to the next Peek() with its key.
TEST(Lookahead, LeavesWhatTheFastPathDoesNotDecideToTheParser) {
  resp::RequestLimits tight;
  tight.max_bulk_bytes = 4;
  const std::string big = Get("a-long-key") + Get("b");
  Lookahead la;
  Lookahead::Keys k = la.Peek(big, tight);
  EXPECT_THAT(KeysOf(k), testing::ElementsAre("a-long-key", "b"));
  EXPECT_EQ(la.TakeParsed(big, tight), nullptr);

  const std::string odd = "*2\r\n$03\r\nget\r\n$3\r\nodd\r\n";
  const std::string buf = Get("a") + odd + Get("c");
  Lookahead lb;
  k = lb.Peek(buf, kLimits);
  EXPECT_THAT(KeysOf(k), testing::ElementsAre("a", "odd"));
  const absl::string_view rest = absl::string_view(buf).substr(Get("a").size());
  k = lb.Peek(rest, kLimits);
  EXPECT_THAT(KeysOf(k), testing::ElementsAre("odd", "c"));
  EXPECT_EQ(lb.TakeParsed(rest, kLimits), nullptr);
}

}  // namespace
}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
