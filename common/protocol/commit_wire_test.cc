// Copyright 2026 The kvstore Authors.

#include "common/protocol/commit_wire.h"

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/cluster/refusal.h"
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
  // Kept alive: the parsed key is a view into the message.
  const std::string del_bytes = Encode(del, "abc");
  auto d = ParseCommit(del_bytes);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->key, "abc");
}

TEST(CommitWire, EncodedPutRoundTrips) {
  PutCommit put;
  put.request_id = 0x1234567890;
  put.key_len = 5;
  put.lease_id = 77;
  put.offset = 4096;
  put.size = 192;
  char buf[sizeof(CommitRequest)];
  ASSERT_EQ(EncodePutCommit(put, buf), sizeof(CommitRequest));
  auto p = ParseCommit(absl::string_view(buf, sizeof(buf)));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->header.magic, kCommitMagic);
  EXPECT_EQ(p->header.op, static_cast<uint8_t>(CommitOp::kPut));
  EXPECT_EQ(p->header.reserved, 0);
  EXPECT_EQ(p->header.key_len, 5);
  EXPECT_EQ(p->header.request_id, put.request_id);
  EXPECT_EQ(p->header.lease_id, 77u);
  EXPECT_EQ(p->header.offset, 4096u);
  EXPECT_EQ(p->header.size, 192u);
  EXPECT_TRUE(p->key.empty());
}

TEST(CommitWire, EncodedDeleteRoundTrips) {
  const std::string key = "user:42";
  std::string buf(CommitBytes(key.size()), '\xff');
  const size_t n = EncodeDeleteCommit(9, key, buf.data());
  ASSERT_EQ(n, sizeof(CommitRequest) + key.size());
  auto d = ParseCommit(absl::string_view(buf.data(), n));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->header.op, static_cast<uint8_t>(CommitOp::kDelete));
  EXPECT_EQ(d->header.request_id, 9u);
  EXPECT_EQ(d->header.lease_id, 0u);
  EXPECT_EQ(d->header.offset, 0u);
  EXPECT_EQ(d->header.size, 0u);
  EXPECT_EQ(d->key, key);
}

TEST(CommitWire, EncodedReplicaPutRoundTrips) {
  PutCommit put;
  put.request_id = 5;
  put.key_len = 3;
  put.lease_id = 11;
  put.offset = 8192;
  put.size = 96;
  ReplicaCommit tag;
  tag.shard_id = 7;
  tag.shard_epoch = 42;
  tag.seq = 1000;
  tag.primary_node_id = "node-a";
  tag.primary_incarnation = 99;
  std::string buf(CommitBytes(0), '\xff');
  const size_t n = EncodeReplicaPutCommit(put, tag, buf.data());
  ASSERT_EQ(n, sizeof(CommitRequest) + sizeof(ReplicaTag) + 6);
  auto p = ParseCommit(absl::string_view(buf.data(), n));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->header.op, static_cast<uint8_t>(CommitOp::kReplicaPut));
  EXPECT_EQ(p->header.lease_id, 11u);
  EXPECT_EQ(p->header.offset, 8192u);
  EXPECT_EQ(p->header.size, 96u);
  EXPECT_EQ(p->tag.shard_id, 7u);
  EXPECT_EQ(p->tag.shard_epoch, 42u);
  EXPECT_EQ(p->tag.seq, 1000u);
  EXPECT_EQ(p->tag.primary_incarnation, 99u);
  EXPECT_EQ(p->tag.reserved, 0);
  EXPECT_EQ(p->primary_node_id, "node-a");
  EXPECT_TRUE(p->key.empty());
}

TEST(CommitWire, EncodedReplicaDeleteRoundTrips) {
  ReplicaCommit tag;
  tag.shard_id = 1;
  tag.shard_epoch = 2;
  tag.seq = 3;
  tag.primary_node_id = "n1";
  const std::string key = "user:42";
  std::string buf(CommitBytes(key.size()), '\xff');
  const size_t n = EncodeReplicaDeleteCommit(8, key, tag, buf.data());
  auto d = ParseCommit(absl::string_view(buf.data(), n));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->header.op, static_cast<uint8_t>(CommitOp::kReplicaDelete));
  EXPECT_EQ(d->header.request_id, 8u);
  EXPECT_EQ(d->primary_node_id, "n1");
  EXPECT_EQ(d->tag.seq, 3u);
  EXPECT_EQ(d->key, key);
}

// Every prefix of a valid replica commit is refused (tag, node id or key cut
// short), as is a node id that is empty or over the limit.
TEST(CommitWire, RejectsTruncatedReplicaCommits) {
  ReplicaCommit tag;
  tag.primary_node_id = "node-b";
  std::string buf(CommitBytes(3), '\0');
  const size_t n = EncodeReplicaDeleteCommit(1, "abc", tag, buf.data());
  ASSERT_TRUE(ParseCommit(absl::string_view(buf.data(), n)).ok());
  for (size_t len = 0; len < n; ++len) {
    EXPECT_FALSE(ParseCommit(absl::string_view(buf.data(), len)).ok()) << len;
  }
  ReplicaTag raw{};
  std::memcpy(&raw, buf.data() + sizeof(CommitRequest), sizeof(raw));
  for (uint16_t bad : {uint16_t{0}, static_cast<uint16_t>(kMaxReplicaNodeIdBytes + 1)}) {
    std::string copy(buf.data(), n);
    copy.resize(n + kMaxReplicaNodeIdBytes + 8, 'x');
    raw.node_len = bad;
    std::memcpy(copy.data() + sizeof(CommitRequest), &raw, sizeof(raw));
    EXPECT_FALSE(ParseCommit(copy).ok()) << bad;
  }
}

std::vector<ReplicaBatchWrite> SomeBatch(size_t n) {
  std::vector<ReplicaBatchWrite> writes(n);
  for (size_t i = 0; i < n; ++i) {
    writes[i].lease_id = 100 + i;
    writes[i].offset = 4096 * i;
    writes[i].size = 4160 + i;
    writes[i].shard_id = static_cast<uint32_t>(i % 3);
    writes[i].reserved = 77;  // not sent: the encoder zeroes it
    writes[i].shard_epoch = 5 + i;
    writes[i].seq = 1000 + i;
  }
  return writes;
}

TEST(CommitWire, EncodedReplicaBatchRoundTrips) {
  const std::vector<ReplicaBatchWrite> writes = SomeBatch(7);
  std::string buf(ReplicaBatchBytes(writes.size(), 6), '\0');
  const size_t n = EncodeReplicaPutBatch(9, writes, "node-b", 42, buf.data());
  ASSERT_EQ(n, buf.size());
  absl::StatusOr<ParsedCommit> p = ParseCommit(buf);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->header.op, static_cast<uint8_t>(CommitOp::kReplicaPutBatch));
  EXPECT_EQ(p->header.request_id, 9u);
  EXPECT_EQ(p->primary_node_id, "node-b");
  EXPECT_EQ(p->tag.primary_incarnation, 42u);
  ASSERT_EQ(p->batch_count, 7);
  for (size_t i = 0; i < writes.size(); ++i) {
    const ReplicaBatchWrite w = BatchWrite(*p, i);
    EXPECT_EQ(w.lease_id, writes[i].lease_id);
    EXPECT_EQ(w.offset, writes[i].offset);
    EXPECT_EQ(w.size, writes[i].size);
    EXPECT_EQ(w.shard_id, writes[i].shard_id);
    EXPECT_EQ(w.reserved, 0u);
    EXPECT_EQ(w.shard_epoch, writes[i].shard_epoch);
    EXPECT_EQ(w.seq, writes[i].seq);
  }
}

TEST(CommitWire, RejectsTruncatedAndOversizedReplicaBatches) {
  const std::vector<ReplicaBatchWrite> writes = SomeBatch(3);
  std::string buf(ReplicaBatchBytes(writes.size(), 6), '\0');
  const size_t n = EncodeReplicaPutBatch(1, writes, "node-b", 1, buf.data());
  for (size_t len = 0; len < n; ++len) {
    EXPECT_FALSE(ParseCommit(absl::string_view(buf.data(), len)).ok()) << len;
  }
  const size_t header_at = sizeof(CommitRequest);
  ReplicaBatchHeader raw{};
  std::memcpy(&raw, buf.data() + header_at, sizeof(raw));
  // A count of 0, one record more than was sent, and more than the most.
  for (uint16_t count : {uint16_t{0}, uint16_t{4}, static_cast<uint16_t>(kMaxReplicaBatch + 1)}) {
    std::string copy = buf;
    if (count > kMaxReplicaBatch) copy.resize(ReplicaBatchBytes(count, 6), 'x');
    ReplicaBatchHeader h = raw;
    h.count = count;
    std::memcpy(copy.data() + header_at, &h, sizeof(h));
    EXPECT_FALSE(ParseCommit(copy).ok()) << count;
  }
  for (uint16_t bad : {uint16_t{0}, static_cast<uint16_t>(kMaxReplicaNodeIdBytes + 1)}) {
    std::string copy = buf;
    copy.resize(n + kMaxReplicaNodeIdBytes + 8, 'x');
    ReplicaBatchHeader h = raw;
    h.node_len = bad;
    std::memcpy(copy.data() + header_at, &h, sizeof(h));
    EXPECT_FALSE(ParseCommit(copy).ok()) << bad;
  }
}

TEST(CommitWire, ReplicaBatchCapacityFitsTheReceiveBuffer) {
  // The default key limit's receive buffer (RdmaService rounds it to 64).
  const size_t commit_bytes = (CommitBytes(1024) + 63) / 64 * 64;
  const size_t n = ReplicaBatchCapacity(commit_bytes, 2);
  EXPECT_GE(n, 20u);
  EXPECT_LE(ReplicaBatchBytes(n, 2), commit_bytes);
  EXPECT_GT(ReplicaBatchBytes(n + 1, 2), commit_bytes);
  EXPECT_EQ(ReplicaBatchCapacity(ReplicaBatchBytes(0, 8), 8), 0u);
  EXPECT_EQ(ReplicaBatchCapacity(1 << 20, 8), kMaxReplicaBatch);
}

TEST(CommitWire, AckCarriesTheBatchCount) {
  char buf[kAckBytes];
  const size_t n = EncodeAck(5, absl::FailedPreconditionError("stale"), buf, 3);
  absl::StatusOr<ParsedAck> a = ParseAck(absl::string_view(buf, n));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->batch_applied, 3);
  EXPECT_EQ(a->status.code(), absl::StatusCode::kFailedPrecondition);
  const size_t m = EncodeAck(6, absl::OkStatus(), buf);
  a = ParseAck(absl::string_view(buf, m));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->batch_applied, 0);
}

TEST(CommitWire, RejectsMalformed) {
  CommitRequest del{kCommitMagic, static_cast<uint8_t>(CommitOp::kDelete), 0, 100, 8, 0, 0, 0};
  EXPECT_FALSE(ParseCommit(Encode(del, "short")).ok());  // key_len beyond the message
  CommitRequest bad_op{kCommitMagic, 9, 0, 0, 1, 0, 0, 0};
  EXPECT_FALSE(ParseCommit(Encode(bad_op)).ok());
  CommitRequest bad_magic{1, 1, 0, 0, 1, 0, 0, 0};
  EXPECT_FALSE(ParseCommit(Encode(bad_magic)).ok());
  EXPECT_FALSE(ParseCommit("tiny").ok());
  const uint32_t seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  for (int i = 0; i < 10000; ++i) {
    std::string junk(rng() % 240, '\0');
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

// EncodeAck copied the message of an OK status from a null pointer (0 bytes,
// but undefined behaviour; UBSan in --config=asan stopped here).
TEST(CommitWire, AckOfOkStatusHasNoMessage) {
  char buf[kAckBytes];
  const size_t n = EncodeAck(3, absl::OkStatus(), buf);
  EXPECT_EQ(n, sizeof(CommitAck));
  auto a = ParseAck(absl::string_view(buf, n));
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->status.ok());
  EXPECT_EQ(a->request_id, 3u);
}

// The backup's or primary's refusal of a commit reaches the RDMA client
// typed, as it would over gRPC: the client classifies by it.
TEST(CommitWire, AckCarriesARefusal) {
  using cluster::Refusal;
  char buf[kAckBytes];
  for (const Refusal& r :
       {Refusal::Moved(12, "n2", "10.0.0.2:6379"), Refusal::MapBehind("shard 1 epoch 3"),
        Refusal::ClusterDown(4, "cannot drop failed backup n2").WithUnknownEffect()}) {
    const absl::Status s = cluster::ToStatus(r);
    const size_t n = EncodeAck(5, s, buf);
    auto a = ParseAck(absl::string_view(buf, n));
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->status.code(), s.code());
    EXPECT_EQ(a->status.message(), s.message());
    EXPECT_EQ(cluster::FromStatus(a->status), r);
  }
  // A long message is cut, a long detail dropped: the refusal still fits.
  const Refusal wordy = Refusal::StaleShardEpoch(std::string(1000, 'd'));
  const size_t n = EncodeAck(6, cluster::ToStatus(wordy), buf);
  EXPECT_LE(n, kAckBytes);
  auto a = ParseAck(absl::string_view(buf, n));
  ASSERT_TRUE(a.ok()) << a.status();
  Refusal expected = wordy;
  expected.detail.clear();
  EXPECT_EQ(cluster::FromStatus(a->status), expected);
  EXPECT_EQ(a->status.code(), absl::StatusCode::kFailedPrecondition);
  // A refusal length past the bytes received is the ack's fault.
  CommitAck bad{};
  bad.magic = kAckMagic;
  bad.code = 14;
  bad.refusal_len = 10;
  EXPECT_EQ(
      ParseAck(absl::string_view(reinterpret_cast<const char*>(&bad), sizeof(bad))).status().code(),
      absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace wire
}  // namespace kvstore
