// Copyright 2026 The kvstore Authors.

#include "common/protocol/commit_wire.h"

#include <random>
#include <string>

#include "gtest/gtest.h"

namespace kvstore {
namespace wire {
namespace {

std::string Encode(const CommitRequest& r, absl::string_view key = "") {
  std::string out(reinterpret_cast<const char*>(&r), sizeof(r));
  out.append(key.data(), key.size());
  return out;
}

TEST(CommitWire, PutAndDeleteRoundTrip) {
  CommitRequest put{kCommitMagic, static_cast<uint8_t>(CommitOp::kPut), 0, 3, 7, 9, 128, 64};
  auto p = ParseCommit(Encode(put));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->header.lease_id, 9u);
  CommitRequest del{kCommitMagic, static_cast<uint8_t>(CommitOp::kDelete), 0, 3, 8, 0, 0, 0};
  auto d = ParseCommit(Encode(del, "abc"));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->key, "abc");
}

TEST(CommitWire, RejectsMalformed) {
  CommitRequest del{kCommitMagic, static_cast<uint8_t>(CommitOp::kDelete), 0, 100, 8, 0, 0, 0};
  EXPECT_FALSE(ParseCommit(Encode(del, "short")).ok());  // key_len beyond the message
  CommitRequest bad_op{kCommitMagic, 9, 0, 0, 1, 0, 0, 0};
  EXPECT_FALSE(ParseCommit(Encode(bad_op)).ok());
  CommitRequest bad_magic{1, 1, 0, 0, 1, 0, 0, 0};
  EXPECT_FALSE(ParseCommit(Encode(bad_magic)).ok());
  EXPECT_FALSE(ParseCommit("tiny").ok());
  std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < 10000; ++i) {
    std::string junk(rng() % 80, '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    (void)ParseCommit(junk);  // must not crash
    (void)ParseAck(junk);
  }
}

TEST(CommitWire, AckCarriesStatusAndTruncatesMessage) {
  char buf[kAckBytes];
  size_t n = EncodeAck(42, absl::AbortedError(std::string(1000, 'x')), buf);
  EXPECT_EQ(n, kAckBytes);
  auto a = ParseAck(absl::string_view(buf, n));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->request_id, 42u);
  EXPECT_EQ(a->status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(a->status.message().size(), kAckBytes - sizeof(CommitAck));
  n = EncodeAck(1, absl::OkStatus(), buf);
  EXPECT_TRUE(ParseAck(absl::string_view(buf, n))->status.ok());
}

}  // namespace
}  // namespace wire
}  // namespace kvstore
