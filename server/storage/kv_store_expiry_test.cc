// Copyright 2026 The kvstore Authors.
//
// KvStore's expiry times and read-modify-write updates: expired keys read
// as absent at once and are deleted by the expiry cycle (only where the
// write hook lets this node write), expiry survives the cleaner moving an
// entry, and Update() is atomic with respect to every other writer.

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/metrics/testing.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/storage/fake_clock.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {
namespace {

using ::kvstore::metrics::testing::Value;
using ::kvstore::testing::IsOk;
using ::kvstore::testing::StatusIs;

// Lets every write through, but MayWrite() says what the test sets: a
// node that leads the key or a backup.
class LeadHook : public WriteHook {
 public:
  absl::Status Write(absl::string_view, absl::string_view entry,
                     absl::FunctionRef<absl::Status()> publish) override {
    (entry.empty() ? deletes : puts).fetch_add(1);
    return publish();
  }
  bool MayWrite(absl::string_view) override { return leads.load(); }
  std::atomic<bool> leads{true};
  std::atomic<int> puts{0}, deletes{0};
};

struct Fixture {
  explicit Fixture(WriteHook* hook = nullptr, uint64_t segment_bytes = 1 << 20) {
    MemoryPoolOptions po;
    po.data_bytes = 16 << 20;
    po.index_bytes = 1 << 20;
    pool = std::move(*MemoryPool::Create(po));
    KvStoreOptions so;
    so.segment_bytes = segment_bytes;
    so.grace_period = absl::Milliseconds(2);
    so.cleaner_interval = absl::ZeroDuration();
    so.expiry_interval = absl::ZeroDuration();  // the test runs ExpireDue()
    so.clock = &clock;
    so.write_hook = hook;
    so.compact_when_free_below = 1.0;
    store = std::move(*KvStore::Create(pool.get(), so));
    writer = store->NewWriter();
  }
  ~Fixture() { writer.reset(); }
  uint64_t InMs(int64_t ms) const { return static_cast<uint64_t>(store->NowMs() + ms); }

  FakeClock clock;
  std::unique_ptr<MemoryPool> pool;
  std::unique_ptr<KvStore> store;
  std::unique_ptr<KvStore::Writer> writer;
};

TEST(KvStoreExpiry, AKeyReadsAsAbsentFromItsExpiryTimeOn) {
  Fixture f;
  ASSERT_THAT(f.store->Put(f.writer.get(), "k", "v", absl::ZeroDuration(), f.InMs(100)), IsOk());
  ASSERT_THAT(f.store->Put(f.writer.get(), "forever", "v"), IsOk());
  auto info = f.store->Stat("k");
  ASSERT_THAT(info.status(), IsOk());
  EXPECT_EQ(info->expires_at_ms, f.InMs(100));
  EXPECT_EQ(info->value_len, 1u);
  f.clock.Advance(absl::Milliseconds(99));
  EXPECT_TRUE(f.store->Exists("k"));
  EXPECT_THAT(f.store->Get("k").status(), IsOk());
  f.clock.Advance(absl::Milliseconds(1));
  EXPECT_THAT(f.store->Get("k").status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(f.store->Stat("k").status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_FALSE(f.store->Exists("k"));
  EXPECT_EQ(f.store->Stat("forever")->expires_at_ms, 0u);
  // Deleting a key whose time passed finds nothing, as Redis's DEL does.
  EXPECT_THAT(f.store->Delete("k"), StatusIs(absl::StatusCode::kNotFound));
}

TEST(KvStoreExpiry, TheCycleDeletesDueKeysOnlyAndCountsThem) {
  Fixture f;
  for (int i = 0; i < 100; ++i) {
    ASSERT_THAT(f.store->Put(f.writer.get(), absl::StrCat("short", i), "v", absl::ZeroDuration(),
                             f.InMs(10 + i)),
                IsOk());
    ASSERT_THAT(f.store->Put(f.writer.get(), absl::StrCat("long", i), "v", absl::ZeroDuration(),
                             f.InMs(100000)),
                IsOk());
  }
  // Rewritten without an expiry before its time: its old record must not
  // delete the new value.
  ASSERT_THAT(f.store->Put(f.writer.get(), "short0", "kept"), IsOk());
  EXPECT_EQ(f.store->ExpireDue(), 0u);
  f.clock.Advance(absl::Milliseconds(60));
  EXPECT_EQ(f.store->ExpireDue(), 50u);  // short1..short50
  f.clock.Advance(absl::Milliseconds(1000));
  EXPECT_EQ(f.store->ExpireDue(), 49u);
  EXPECT_EQ(f.store->size(), 101u);
  EXPECT_EQ(std::string(f.store->Get("short0")->value()), "kept");
  EXPECT_EQ(Value(f.store->registry(), "kvstore_expired_keys_total"), 99);
  EXPECT_EQ(Value(f.store->registry(), "kvstore_keys_with_expiry"), 100);  // the long ones
  ASSERT_THAT(f.store->Delete("long0"), IsOk());
  ASSERT_THAT(f.store->Put(f.writer.get(), "long1", "no expiry now"), IsOk());
  EXPECT_EQ(Value(f.store->registry(), "kvstore_keys_with_expiry"), 98);
  EXPECT_EQ(Value(f.store->registry(), "kvstore_keyspace_hits_total"), 1);
  EXPECT_FALSE(f.store->Get("short5").ok());
  EXPECT_EQ(Value(f.store->registry(), "kvstore_keyspace_misses_total"), 1);
}

TEST(KvStoreExpiry, ABackupHidesExpiredKeysButLeavesTheDeleteToItsPrimary) {
  LeadHook hook;
  hook.leads = false;
  Fixture f(&hook);
  ASSERT_THAT(f.store->Put(f.writer.get(), "k", "v", absl::ZeroDuration(), f.InMs(10)), IsOk());
  f.clock.Advance(absl::Milliseconds(10));
  EXPECT_FALSE(f.store->Exists("k"));
  EXPECT_EQ(f.store->ExpireDue(), 0u);
  EXPECT_EQ(hook.deletes.load(), 0);
  EXPECT_EQ(f.store->size(), 1u);
  // Promoted: the re-queued record is found again and the delete goes
  // through the hook (which replicates it in cluster mode).
  hook.leads = true;
  f.clock.Advance(absl::Seconds(3));
  EXPECT_EQ(f.store->ExpireDue(), 1u);
  EXPECT_EQ(hook.deletes.load(), 1);
  EXPECT_EQ(f.store->size(), 0u);
}

TEST(KvStoreExpiry, AnEntryTheCleanerMovedStillExpires) {
  Fixture f(nullptr, /*segment_bytes=*/64 << 10);
  ASSERT_THAT(f.store->Put(f.writer.get(), "ttl", "v", absl::ZeroDuration(), f.InMs(50)), IsOk());
  // Fill the rest of its segment with entries that die, so the segment is
  // sparse and sealed, and the cleaner copies "ttl" out of it.
  const std::string big(1000, 'x');
  for (int i = 0; i < 200; ++i) {
    ASSERT_THAT(f.store->Put(f.writer.get(), absl::StrCat("f", i), big), IsOk());
    ASSERT_THAT(f.store->Delete(absl::StrCat("f", i)), IsOk());
  }
  const uint64_t before = f.store->Stat("ttl").ok() ? 1 : 0;
  ASSERT_EQ(before, 1u);
  f.store->RunCleanerOnce();
  ASSERT_GT(Value(f.store->registry(), "kvstore_cleaner_moved_entries_total"), 0);
  EXPECT_EQ(Value(f.store->registry(), "kvstore_keys_with_expiry"), 1);  // moved, counted once
  f.clock.Advance(absl::Milliseconds(50));
  EXPECT_EQ(f.store->ExpireDue(), 1u);
  EXPECT_EQ(f.store->size(), 0u);
}

TEST(KvStoreUpdate, IncrementsFromManyThreadsAreNeverLost) {
  LeadHook hook;  // a hook, as in cluster mode, and plain Puts racing too
  Fixture f(&hook);
  constexpr int kThreads = 4, kEach = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      auto w = f.store->NewWriter();
      for (int i = 0; i < kEach; ++i) {
        absl::Status s = f.store->Update(w.get(), "n", [](const CurrentValue& c) {
          int64_t n = 0;
          if (c.exists && !absl::SimpleAtoi(c.value, &n)) {
            return absl::StatusOr<KeyUpdate>(absl::InvalidArgumentError("not an integer"));
          }
          KeyUpdate u;
          u.action = KeyUpdate::Action::kWrite;
          // Owned by the lambda's caller for the update: a static buffer per
          // thread would do too, but a string in the closure is simplest.
          thread_local std::string text;
          text = absl::StrCat(n + 1);
          u.value = {text};
          return absl::StatusOr<KeyUpdate>(u);
        });
        ASSERT_THAT(s, IsOk());
        ASSERT_THAT(f.store->Put(w.get(), absl::StrCat("other", i % 7), "x"), IsOk());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(std::string(f.store->Get("n")->value()), absl::StrCat(kThreads * kEach));
}

TEST(KvStoreUpdate, PiecesAppendToTheCurrentValueAndKeepItsExpiry) {
  Fixture f;
  ASSERT_THAT(f.store->Put(f.writer.get(), "k", "abc", absl::ZeroDuration(), f.InMs(1000)), IsOk());
  ASSERT_THAT(f.store->Update(f.writer.get(), "k",
                              [](const CurrentValue& c) {
                                KeyUpdate u;
                                u.action = KeyUpdate::Action::kWrite;
                                u.value = {c.value, "def"};
                                u.expires_at_ms = c.expires_at_ms;
                                return absl::StatusOr<KeyUpdate>(u);
                              }),
              IsOk());
  EXPECT_EQ(std::string(f.store->Get("k")->value()), "abcdef");
  EXPECT_EQ(f.store->Stat("k")->expires_at_ms, f.InMs(1000));
  // A decision's error changes nothing.
  EXPECT_THAT(f.store->Update(f.writer.get(), "k",
                              [](const CurrentValue&) {
                                return absl::StatusOr<KeyUpdate>(absl::InvalidArgumentError("no"));
                              }),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Deleting an absent key is a no-op.
  EXPECT_THAT(f.store->Update(f.writer.get(), "absent",
                              [](const CurrentValue& c) {
                                EXPECT_FALSE(c.exists);
                                KeyUpdate u;
                                u.action = KeyUpdate::Action::kDelete;
                                return absl::StatusOr<KeyUpdate>(u);
                              }),
              IsOk());
}

TEST(KvStoreUpdate, UpdateKeysSeesEveryKeyUnderOneLock) {
  Fixture f;
  ASSERT_THAT(f.store->Put(f.writer.get(), "b", "old"), IsOk());
  const std::vector<absl::string_view> keys = {"a", "b", "c"};
  auto set_if_none_exist = [&](absl::Span<const CurrentValue> cur, std::vector<KeyUpdate>* out) {
    for (const CurrentValue& c : cur) {
      if (c.exists) return absl::OkStatus();  // MSETNX: nothing written
    }
    for (size_t i = 0; i < cur.size(); ++i) {
      KeyUpdate u;
      u.action = KeyUpdate::Action::kWrite;
      u.value = {"new"};
      out->push_back(u);
    }
    return absl::OkStatus();
  };
  ASSERT_THAT(f.store->UpdateKeys(f.writer.get(), keys, set_if_none_exist), IsOk());
  EXPECT_FALSE(f.store->Exists("a"));
  ASSERT_THAT(f.store->Delete("b"), IsOk());
  ASSERT_THAT(f.store->UpdateKeys(f.writer.get(), keys, set_if_none_exist), IsOk());
  EXPECT_EQ(std::string(f.store->Get("c")->value()), "new");
}

}  // namespace
}  // namespace server
}  // namespace kvstore
