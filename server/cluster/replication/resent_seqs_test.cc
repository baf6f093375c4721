// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/resent_seqs.h"

#include <string>

#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace {

TEST(ResentSeqsTest, ACommitNotAboveTheResentSeqOfItsKeyIsDropped) {
  ResentSeqs seqs;
  std::string value;
  auto put = [&](const char* v) {
    return [&value, v] {
      value = v;
      return absl::OkStatus();
    };
  };
  bool dropped = true;
  // Nothing resent yet: every commit is installed.
  ASSERT_TRUE(seqs.InstallFromRdma(0, "k", 5, put("v5"), &dropped).ok());
  EXPECT_FALSE(dropped);
  // Seq 7 went by RDMA, the link failed, it was resent by gRPC.
  ASSERT_TRUE(seqs.InstallResent(0, "k", 7, put("v7")).ok());
  value = "v8";  // the key's next write, by gRPC
  // The failed link's commit of seq 7 (or anything older) is dropped.
  ASSERT_TRUE(seqs.InstallFromRdma(0, "k", 7, put("v7"), &dropped).ok());
  EXPECT_TRUE(dropped);
  ASSERT_TRUE(seqs.InstallFromRdma(0, "k", 6, put("v6"), &dropped).ok());
  EXPECT_TRUE(dropped);
  EXPECT_EQ(value, "v8");
  // Newer commits, other keys and other shards go in.
  ASSERT_TRUE(seqs.InstallFromRdma(0, "k", 9, put("v9"), &dropped).ok());
  EXPECT_FALSE(dropped);
  EXPECT_EQ(value, "v9");
  ASSERT_TRUE(seqs.InstallFromRdma(0, "j", 3, put("j3"), &dropped).ok());
  EXPECT_FALSE(dropped);
  ASSERT_TRUE(seqs.InstallFromRdma(1, "k", 3, put("k3"), &dropped).ok());
  EXPECT_FALSE(dropped);
  // A lower resend keeps the higher record; a failed install records none.
  ASSERT_TRUE(seqs.InstallResent(0, "k", 4, put("v4")).ok());
  ASSERT_TRUE(seqs.InstallFromRdma(0, "k", 6, put("v6"), &dropped).ok());
  EXPECT_TRUE(dropped);
  EXPECT_FALSE(seqs.InstallResent(0, "j", 10, [] { return absl::InternalError("full"); }).ok());
  ASSERT_TRUE(seqs.InstallFromRdma(0, "j", 4, put("j4"), &dropped).ok());
  EXPECT_FALSE(dropped);
  EXPECT_EQ(seqs.size(), 1u);
  // A shard no longer held here is forgotten.
  seqs.Retain([](uint32_t shard) { return shard != 0; });
  EXPECT_EQ(seqs.size(), 0u);
}

}  // namespace
}  // namespace server
}  // namespace kvstore
