// Copyright 2026 The kvstore Authors.

#include "common/rdma/initiator/server_layout.h"

#include <string>

#include "gtest/gtest.h"

namespace kvstore {
namespace initiator {
namespace {

// A handshake with an index of 16 buckets and two data regions of 1 MiB.
v1::HandshakeResponse GoodHandshake() {
  v1::HandshakeResponse hs;
  hs.set_epoch(7);
  hs.set_session_id(0x5e55);
  hs.set_data_arena_bytes(2 << 20);
  hs.mutable_limits()->set_max_key_bytes(64);
  hs.mutable_limits()->set_max_value_bytes(1 << 20);
  hs.mutable_index()->set_bucket_count(16);
  hs.mutable_index()->set_layout_version(layout::kLayoutVersion);
  hs.mutable_index()->set_bucket_bytes(layout::kBucketBytes);
  hs.mutable_endpoints()->set_rdma_gid(std::string(16, '\1'));
  auto* index = hs.add_regions();
  index->set_kind(v1::REGION_KIND_INDEX);
  index->set_length(16 * layout::kBucketBytes);
  index->set_addr(0x1000);
  index->set_rkey(5);
  // Listed out of order: FromHandshake sorts them.
  for (uint64_t offset : {uint64_t{1} << 20, uint64_t{0}}) {
    auto* data = hs.add_regions();
    data->set_kind(v1::REGION_KIND_DATA);
    data->set_arena_offset(offset);
    data->set_length(1 << 20);
    data->set_addr(0x100000 + offset);
    data->set_rkey(9);
  }
  return hs;
}

TEST(ServerLayout, ParsesAGoodHandshake) {
  auto l = ServerLayout::FromHandshake(GoodHandshake());
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->epoch, 7u);
  EXPECT_EQ(l->session_id, 0x5e55u);
  EXPECT_EQ(l->index_addr, 0x1000u);
  ASSERT_EQ(l->data.size(), 2u);
  EXPECT_EQ(l->data[0].arena_offset, 0u);
  // Zero timing values are raised to their floors.
  EXPECT_EQ(l->max_read_span, absl::Milliseconds(1));
  EXPECT_EQ(l->lease_ttl, absl::Milliseconds(100));
}

TEST(ServerLayout, RefusesAnotherLayoutOrMissingRegions) {
  v1::HandshakeResponse hs = GoodHandshake();
  hs.mutable_index()->set_layout_version(layout::kLayoutVersion + 1);
  EXPECT_EQ(ServerLayout::FromHandshake(hs).status().code(), absl::StatusCode::kFailedPrecondition);
  hs = GoodHandshake();
  hs.mutable_regions(0)->set_length(layout::kBucketBytes);  // index too small
  EXPECT_EQ(ServerLayout::FromHandshake(hs).status().code(), absl::StatusCode::kUnavailable);
  hs = GoodHandshake();
  hs.mutable_endpoints()->clear_rdma_gid();
  EXPECT_EQ(ServerLayout::FromHandshake(hs).status().code(), absl::StatusCode::kUnavailable);
}

// The reader READs bucket i < bucket_count (at least bucket 0) at
// index_addr + 64 * i: an index region that does not hold them all must be
// refused. Both were accepted: 0 buckets over a 0-byte index, and a count
// whose byte size (count * 64) wrapped around to 64.
TEST(ServerLayout, RefusesAnIndexThatDoesNotHoldEveryBucket) {
  v1::HandshakeResponse hs = GoodHandshake();
  hs.mutable_index()->set_bucket_count(0);
  hs.mutable_regions(0)->set_length(0);
  EXPECT_EQ(ServerLayout::FromHandshake(hs).status().code(), absl::StatusCode::kUnavailable);
  hs = GoodHandshake();
  hs.mutable_index()->set_bucket_count((uint64_t{1} << 58) + 1);
  hs.mutable_regions(0)->set_length(layout::kBucketBytes);
  EXPECT_EQ(ServerLayout::FromHandshake(hs).status().code(), absl::StatusCode::kUnavailable);
}

// The fence region is optional (an older server publishes none); one too
// short to hold the two words is ignored rather than READ past its end.
TEST(ServerLayout, TakesTheFenceRegionWhenThereIsOne) {
  v1::HandshakeResponse hs = GoodHandshake();
  auto none = ServerLayout::FromHandshake(hs);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_fence());
  auto* fence = hs.add_regions();
  fence->set_kind(v1::REGION_KIND_FENCE);
  fence->set_length(64);
  fence->set_addr(0x7000);
  fence->set_rkey(11);
  auto with = ServerLayout::FromHandshake(hs);
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_TRUE(with->has_fence());
  EXPECT_EQ(with->fence_addr, 0x7000u);
  EXPECT_EQ(with->fence_rkey, 11u);
  fence->set_length(8);
  auto short_fence = ServerLayout::FromHandshake(hs);
  ASSERT_TRUE(short_fence.ok()) << short_fence.status();
  EXPECT_FALSE(short_fence->has_fence());
}

TEST(ServerLayout, ResolveAndPlausibleRejectUntrustedRanges) {
  auto l = ServerLayout::FromHandshake(GoodHandshake());
  ASSERT_TRUE(l.ok());
  const DataRegion* r = l->Resolve((1 << 20) + 64, 128);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->arena_offset, uint64_t{1} << 20);
  EXPECT_EQ(l->Resolve((1 << 20) - 64, 128), nullptr);  // straddles two regions
  EXPECT_EQ(l->Resolve(2 << 20, 64), nullptr);          // past the arena
  EXPECT_EQ(l->Resolve(64, ~uint64_t{0}), nullptr);     // would overflow
  EXPECT_TRUE(l->Plausible({1, 0, layout::EntryBytes(3, 10)}, 3));
  EXPECT_FALSE(l->Plausible({1, 0, 0}, 3));                               // smaller than a header
  EXPECT_FALSE(l->Plausible({1, 0, layout::EntryBytes(3, 2 << 20)}, 3));  // over the value limit
  EXPECT_FALSE(l->Plausible({1, (2 << 20) - 64, layout::EntryBytes(3, 100)}, 3));  // past the end
}

}  // namespace
}  // namespace initiator
}  // namespace kvstore
