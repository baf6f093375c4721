// Copyright 2026 The kvstore Authors.
//
// Where KvStore places the segment runs it hands out: a working set much
// smaller than the pool stays in the pool's low segments instead of
// walking the whole arena; and a writer's reservations in its open segment.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "server/storage/fake_clock.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {
namespace {

using ::kvstore::testing::IsOk;

// An 8 MiB pool of 64 KiB segments (*po), and a store over it without the
// cleaner and expiry threads: the tests run their passes themselves.
KvStoreOptions SmallPool(MemoryPoolOptions* po) {
  po->data_bytes = 8 << 20;
  po->index_bytes = 1 << 20;
  KvStoreOptions so;
  so.segment_bytes = 64 << 10;
  so.cleaner_interval = absl::ZeroDuration();
  so.expiry_interval = absl::ZeroDuration();
  return so;
}

// Sixteen keys overwritten over and over, three laps of an 8 MiB pool of
// 64 KiB segments, with time passing and the cleaner's pass run between
// batches as its thread would. Every emptied segment is free again a grace
// period later, so a few segments are all the load ever needs. Reusing the
// lowest free segment keeps every entry in them; a rotating allocation hint
// (as before) walked all 128 segments, so that every write landed on memory
// untouched for a lap of the pool: cold in the CPU's caches and TLB, and on
// some virtual machines a fault on the host per page (docs/performance.md).
TEST(KvStoreAlloc, ASmallWorkingSetStaysInTheLowSegments) {
  FakeClock clock;
  MemoryPoolOptions po;
  KvStoreOptions so = SmallPool(&po);
  so.grace_period = absl::Milliseconds(2);
  so.clock = &clock;
  std::unique_ptr<MemoryPool> pool = std::move(*MemoryPool::Create(po));
  std::unique_ptr<KvStore> store = std::move(*KvStore::Create(pool.get(), so));
  std::unique_ptr<KvStore::Writer> writer = store->NewWriter();

  const std::string value(1000, 'v');
  constexpr int kKeys = 16;
  constexpr int kWrites = 3 * (8 << 20) / 1024;  // three laps of the pool
  uint64_t highest = 0;
  for (int i = 0; i < kWrites; ++i) {
    const std::string key = absl::StrCat("k", i % kKeys);
    ASSERT_THAT(store->Put(writer.get(), key, value), IsOk()) << i;
    const std::optional<layout::Slot> slot = store->Locate(key);
    ASSERT_TRUE(slot.has_value()) << key;
    highest = std::max(highest, slot->offset);
    if (i % 64 == 63) {  // one segment's worth of writes
      clock.Advance(absl::Milliseconds(3));
      store->RunCleanerOnce();
    }
  }
  const uint64_t highest_segment = highest / so.segment_bytes;
  std::printf("highest segment written: %llu of %u\n",
              static_cast<unsigned long long>(highest_segment),
              static_cast<unsigned>(po.data_bytes / so.segment_bytes));
  // Live data is one segment; add the open one and those in their grace
  // period or just reclaimed. 8 is generous; the old hint reached 127.
  EXPECT_LT(highest_segment, 8u);
  writer.reset();
}

// Writer::ReserveInOpen (the RESP SET's reservation) takes the open
// segment's room exactly as Reserve() would, and nothing when there is none
// (no open segment yet, an entry that does not fit, a shared writer): the
// caller then goes through Reserve().
TEST(KvStoreAlloc, ReserveInOpenTakesTheOpenSegmentsRoomOrNothing) {
  MemoryPoolOptions po;
  const KvStoreOptions so = SmallPool(&po);
  std::unique_ptr<MemoryPool> pool = std::move(*MemoryPool::Create(po));
  std::unique_ptr<KvStore> store = std::move(*KvStore::Create(pool.get(), so));
  std::unique_ptr<KvStore::Writer> writer = store->NewWriter();

  EXPECT_EQ(writer->ReserveInOpen(8, 1000).ptr, nullptr);  // nothing open yet
  absl::StatusOr<Reservation> first = writer->Reserve(8, 1000);
  ASSERT_THAT(first.status(), IsOk());
  Reservation next = writer->ReserveInOpen(8, 1000);
  ASSERT_NE(next.ptr, nullptr);
  EXPECT_EQ(next.offset, first->offset + first->size);
  EXPECT_EQ(next.size, layout::EntryBytes(8, 1000));
  EXPECT_EQ(next.ptr, first->ptr + first->size);
  EXPECT_FALSE(next.dedicated.has_value());
  // Larger than what the open segment has left, or than a segment.
  EXPECT_EQ(writer->ReserveInOpen(8, (64 << 10) - 2 * first->size).ptr, nullptr);
  EXPECT_EQ(writer->ReserveInOpen(8, 64 << 10).ptr, nullptr);
  // Reserve() goes on after what ReserveInOpen() took.
  absl::StatusOr<Reservation> third = writer->Reserve(8, 1000);
  ASSERT_THAT(third.status(), IsOk());
  EXPECT_EQ(third->offset, next.offset + next.size);
  writer->Done(*first);
  writer->Done(next);
  writer->Done(*third);

  std::unique_ptr<KvStore::Writer> shared = store->NewSharedWriter();
  absl::StatusOr<Reservation> s = shared->Reserve(8, 1000);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ(shared->ReserveInOpen(8, 1000).ptr, nullptr);
  shared->Done(*s);
}

}  // namespace
}  // namespace server
}  // namespace kvstore
