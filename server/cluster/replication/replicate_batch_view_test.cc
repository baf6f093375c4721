// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/replicate_batch_view.h"

#include <cstdint>
#include <iostream>
#include <random>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace {

std::string RandomBytes(std::mt19937_64& rng, size_t max) {
  std::string s(rng() % (max + 1), '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

uint64_t RandomVarintValue(std::mt19937_64& rng) {
  // Small, mid-sized and full-width values: every varint length shows up.
  switch (rng() % 3) {
    case 0:
      return rng() % 128;
    case 1:
      return rng() % (uint64_t{1} << 35);
    default:
      return rng();
  }
}

v1::ReplicateBatch RandomBatch(std::mt19937_64& rng) {
  v1::ReplicateBatch batch;
  const int n = static_cast<int>(rng() % 6);
  for (int i = 0; i < n; ++i) {
    v1::ReplicateRequest* w = batch.add_writes();
    // Fields left at zero are not on the wire: both readers must see them
    // as zero.
    if (rng() % 4 != 0) w->set_shard_id(static_cast<uint32_t>(RandomVarintValue(rng)));
    if (rng() % 4 != 0) w->set_shard_epoch(RandomVarintValue(rng));
    if (rng() % 4 != 0) w->set_seq(RandomVarintValue(rng));
    w->set_op(static_cast<v1::ReplicaOp>(rng() % 3));
    // Keys and node ids on both sides of the encoder's inline buffers
    // (128 bytes).
    if (rng() % 4 != 0) w->set_key(RandomBytes(rng, rng() % 3 == 0 ? 300 : 40));
    if (rng() % 4 != 0) w->set_entry(RandomBytes(rng, 5000));
    if (rng() % 4 != 0) {
      w->set_primary_node_id(absl::StrCat("node-", rng() % 100,
                                          std::string(rng() % 3 == 0 ? 100 + rng() % 60 : 0, 'n')));
    }
    if (rng() % 4 != 0) w->set_primary_incarnation(RandomVarintValue(rng));
    w->set_resent_after_rdma(rng() % 2 == 0);
  }
  // Negative time left is sent as it is (a ten-byte varint).
  const int t = static_cast<int>(rng() % 7);
  for (int i = 0; i < t; ++i) {
    batch.add_timeout_micros(static_cast<int64_t>(RandomVarintValue(rng)) * (rng() % 2 ? 1 : -1));
  }
  return batch;
}

void ExpectSame(const v1::ReplicateBatch& want, const ReplicateBatchView& got) {
  ASSERT_EQ(got.writes.size(), static_cast<size_t>(want.writes_size()));
  for (int i = 0; i < want.writes_size(); ++i) {
    const v1::ReplicateRequest& w = want.writes(i);
    const ReplicateWrite& g = got.writes[i];
    EXPECT_EQ(g.commit.shard_id, w.shard_id()) << i;
    EXPECT_EQ(g.commit.shard_epoch, w.shard_epoch()) << i;
    EXPECT_EQ(g.commit.seq, w.seq()) << i;
    EXPECT_EQ(g.op, w.op()) << i;
    EXPECT_EQ(g.commit.is_delete, w.op() == v1::REPLICA_OP_DELETE) << i;
    EXPECT_EQ(g.commit.key, w.key()) << i;
    EXPECT_EQ(g.commit.entry, w.entry()) << i;
    EXPECT_EQ(g.commit.primary_node_id, w.primary_node_id()) << i;
    EXPECT_EQ(g.commit.primary_incarnation, w.primary_incarnation()) << i;
    EXPECT_EQ(g.resent_after_rdma, w.resent_after_rdma()) << i;
  }
  EXPECT_THAT(got.timeout_micros, testing::ElementsAreArray(want.timeout_micros()));
}

TEST(ReplicateBatchView, ReadsWhatProtobufWritesWithoutCopying) {
  const uint64_t seed = std::random_device{}();
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  ReplicateBatchView view;  // reused, as the socket handler reuses it
  for (int round = 0; round < 500; ++round) {
    const v1::ReplicateBatch batch = RandomBatch(rng);
    const std::string wire = batch.SerializeAsString();
    ASSERT_TRUE(ParseReplicateBatch(wire, &view).ok()) << "round " << round;
    ExpectSame(batch, view);
    for (const ReplicateWrite& w : view.writes) {
      if (w.commit.entry.empty()) continue;
      // The entry is a view into the frame, not a copy.
      EXPECT_GE(w.commit.entry.data(), wire.data());
      EXPECT_LE(w.commit.entry.data() + w.commit.entry.size(), wire.data() + wire.size());
    }
  }
}

TEST(ReplicateBatchView, AppendedWritesAreTheBytesProtobufWrites) {
  // The primary's encoder against protobuf's serializer: byte for byte,
  // so a backup of any version reads the frame as it read protobuf's.
  const uint64_t seed = std::random_device{}();
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  std::string wire;  // reused, as a stream reuses its frame buffer
  for (int round = 0; round < 500; ++round) {
    v1::ReplicateBatch batch = RandomBatch(rng);
    if (round % 7 == 0 && batch.writes_size() > 0) {
      batch.mutable_writes(0)->set_op(static_cast<v1::ReplicaOp>(-3));  // unknown, negative
    }
    // The stream sends one time per write; the encoder takes any number.
    wire.clear();
    for (const v1::ReplicateRequest& req : batch.writes()) AppendReplicateWrite(ViewOf(req), &wire);
    AppendTimeouts(
        std::vector<int64_t>(batch.timeout_micros().begin(), batch.timeout_micros().end()), &wire);
    ASSERT_EQ(wire, batch.SerializeAsString()) << "round " << round;
  }
}

TEST(ReplicateBatchView, AViewOfAParsedMessageIsTheSameAndCopiesBack) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 50; ++round) {
    const v1::ReplicateBatch batch = RandomBatch(rng);
    ReplicateBatchView view;
    ViewOf(batch, &view);
    ExpectSame(batch, view);
    v1::ReplicateBatch copied;
    for (const ReplicateWrite& w : view.writes) *copied.add_writes() = RequestOf(w);
    copied.mutable_timeout_micros()->Add(view.timeout_micros.begin(), view.timeout_micros.end());
    EXPECT_EQ(copied.SerializeAsString(), batch.SerializeAsString());
  }
}

TEST(ReplicateBatchView, EveryCutShortBatchIsRefusedWhereProtobufRefusesIt) {
  // A frame cut anywhere: where protobuf still parses the prefix (it ends
  // between fields), the view must hold the same; elsewhere it is refused.
  std::mt19937_64 rng(11);
  v1::ReplicateBatch batch;
  while (batch.writes_size() < 2 || batch.timeout_micros_size() < 2) batch = RandomBatch(rng);
  const std::string wire = batch.SerializeAsString();
  ReplicateBatchView view;
  int refused = 0;
  for (size_t cut = 0; cut < wire.size(); ++cut) {
    const std::string prefix = wire.substr(0, cut);
    v1::ReplicateBatch parsed;
    const bool pb = parsed.ParseFromString(prefix);
    const absl::Status s = ParseReplicateBatch(prefix, &view);
    ASSERT_EQ(s.ok(), pb) << "cut at " << cut << ": " << s;
    if (pb) {
      ExpectSame(parsed, view);
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
}

TEST(ReplicateBatchView, UnknownFieldsAreSkippedAndRepeatsTakeTheLastValue) {
  v1::ReplicateRequest first;
  first.set_seq(5);
  first.set_key("old");
  v1::ReplicateRequest second;
  second.set_seq(9);
  second.set_key("new");
  second.set_entry("entry-bytes");
  // One write's bytes twice over (protobuf merges: the later fields win),
  // then unknown fields of each wire type, inside the write and around it.
  std::string write = first.SerializeAsString() + second.SerializeAsString();
  write += std::string("\x50\x01", 2);                    // field 10, varint
  write += std::string("\x59", 1) + std::string(8, 'x');  // field 11, fixed64
  write += std::string("\x62\x03", 2) + "abc";            // field 12, bytes
  write += std::string("\x6d", 1) + std::string(4, 'y');  // field 13, fixed32
  std::string wire;
  wire += std::string("\x0a", 1) + static_cast<char>(write.size()) + write;  // writes[0]
  wire += std::string("\x10\x2a", 2);          // timeout_micros, unpacked: 42
  wire += std::string("\x12\x02\x07\x08", 4);  // timeout_micros, packed: 7, 8
  wire += std::string("\x7a\x02zz", 4);        // field 15, bytes: unknown
  v1::ReplicateBatch expected;
  ASSERT_TRUE(expected.ParseFromString(wire));
  ReplicateBatchView view;
  ASSERT_TRUE(ParseReplicateBatch(wire, &view).ok());
  ExpectSame(expected, view);
  EXPECT_EQ(view.writes[0].commit.key, "new");
  EXPECT_EQ(view.writes[0].commit.seq, 9u);
  EXPECT_THAT(view.timeout_micros, testing::ElementsAre(42, 7, 8));
}

// Varints of every length, with more bytes behind them and at the very end
// of the batch (where a reader must stop at the end, not at ten bytes), read
// as protobuf writes them.
TEST(ReplicateBatchView, VarintsOfEveryLengthReadTheSameNearTheEndAndFarFromIt) {
  for (int bits = 0; bits <= 64; ++bits) {
    for (const uint64_t value : {bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1,
                                 bits == 0 ? 0 : uint64_t{1} << (bits - 1)}) {
      for (const bool far : {false, true}) {
        v1::ReplicateBatch batch;
        v1::ReplicateRequest* w = batch.add_writes();
        w->set_seq(value);
        w->set_primary_incarnation(value);
        if (far) w->set_entry(std::string(32, 'e'));          // field 6 follows seq (3)
        const std::string bytes = batch.SerializeAsString();  // the view points into it
        ReplicateBatchView view;
        ASSERT_TRUE(ParseReplicateBatch(bytes, &view).ok()) << bits;
        ExpectSame(batch, view);
      }
    }
  }
}

TEST(ReplicateBatchView, MalformedBytesAreRefused) {
  ReplicateBatchView view;
  const std::string cases[] = {
      std::string("\x0a\x05"
                  "ab",
                  4),                          // a write longer than the frame
      std::string("\x0a\x02\x2a\x05", 4),      // key (field 5) longer than the write
      std::string("\x10", 1),                  // a tag with no value
      std::string(11, '\xff'),                 // a varint over ten bytes
      std::string("\x00\x01", 2),              // field number zero
      std::string("\x0b\x0c", 2),              // a group: not in this message
      std::string("\x0a\x03\x1e\x01\x02", 5),  // wire type 6 inside a write
  };
  for (const std::string& bytes : cases) {
    const absl::Status s = ParseReplicateBatch(bytes, &view);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << absl::CEscape(bytes);
  }
}

TEST(ReplicateBatchView, RandomBytesNeverDisagreeWithProtobuf) {
  // Garbage: whenever both readers take it, they read the same. (Run under
  // ASan in CI, this is also the check that no read leaves the bytes.)
  const uint64_t seed = std::random_device{}();
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  ReplicateBatchView view;
  int both = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string bytes = RandomBytes(rng, 24);
    if (round % 2 == 0) {
      // A valid batch with a few bytes flipped reaches deeper.
      bytes = RandomBatch(rng).SerializeAsString();
      for (int k = 0; k < 3 && !bytes.empty(); ++k) bytes[rng() % bytes.size()] = rng();
    }
    v1::ReplicateBatch parsed;
    const bool pb = parsed.ParseFromString(bytes);
    if (ParseReplicateBatch(bytes, &view).ok() && pb) {
      ++both;
      ExpectSame(parsed, view);
    }
  }
  EXPECT_GT(both, 0);
}

}  // namespace
}  // namespace server
}  // namespace kvstore
