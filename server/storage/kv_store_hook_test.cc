// Copyright 2026 The kvstore Authors.
//
// The write hook on every client write path of KvStore, and the replica
// paths that bypass it (architecture §19.3).

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/storage/deferred_hook.h"
#include "server/storage/kv_store.h"
#include "server/storage/write_hook.h"

namespace kvstore {
namespace server {
namespace {

using ::testing::HasSubstr;

// Records each write and what the store showed while the hook held it.
class RecordingHook : public WriteHook {
 public:
  absl::Status Write(absl::string_view key, absl::string_view entry,
                     absl::FunctionRef<absl::Status()> publish) override {
    Seen s;
    s.key = std::string(key);
    s.entry = std::string(entry);
    s.visible_before = store->Exists(key);
    if (!refuse.ok()) {
      seen.push_back(s);
      return refuse;
    }
    absl::Status p = publish();
    s.visible_after = store->Exists(key);
    seen.push_back(s);
    return p;
  }
  struct Seen {
    std::string key, entry;
    bool visible_before = false, visible_after = false;
  };
  KvStore* store = nullptr;
  absl::Status refuse;
  std::vector<Seen> seen;
};

struct Fixture {
  std::unique_ptr<MemoryPool> pool;
  std::unique_ptr<KvStore> store;
};

Fixture Make(WriteHook* hook) {
  MemoryPoolOptions po;
  po.data_bytes = 8 << 20;
  po.index_bytes = 1 << 20;
  Fixture f;
  auto pool = MemoryPool::Create(po);
  EXPECT_TRUE(pool.ok()) << pool.status();
  f.pool = std::move(*pool);
  KvStoreOptions so;
  so.segment_bytes = 1 << 20;
  so.cleaner_interval = absl::ZeroDuration();
  so.write_hook = hook;
  auto store = KvStore::Create(f.pool.get(), so);
  EXPECT_TRUE(store.ok()) << store.status();
  f.store = std::move(*store);
  return f;
}

std::string Entry(absl::string_view key, absl::string_view value, uint64_t version) {
  std::string e(layout::EntryBytes(key.size(), value.size()), '\0');
  layout::EncodeEntry(e.data(), key, value, version);
  return e;
}

TEST(KvStoreHook, SeesPutCommitAndDeleteBeforeTheyAreVisible) {
  RecordingHook hook;
  Fixture f = Make(&hook);
  hook.store = f.store.get();
  auto w = f.store->NewWriter();
  ASSERT_TRUE(f.store->Put(w.get(), "a", "1").ok());
  // The RESP path: reserve, encode, CommitReserved (no checks of its own).
  auto r = w->Reserve(1, 2);
  ASSERT_TRUE(r.ok());
  layout::EncodeEntry(r->ptr, "b", "22", f.store->Version());
  ASSERT_TRUE(f.store->CommitReserved(*r).ok());
  w->Done(*r);
  ASSERT_TRUE(f.store->Delete("a").ok());
  EXPECT_TRUE(absl::IsNotFound(f.store->Delete("zz")));  // replicated too

  ASSERT_EQ(hook.seen.size(), 4u);
  EXPECT_EQ(hook.seen[0].key, "a");
  EXPECT_FALSE(hook.seen[0].visible_before);
  EXPECT_TRUE(hook.seen[0].visible_after);
  EXPECT_TRUE(layout::VerifyEntry(hook.seen[0].entry, "a").ok());
  EXPECT_EQ(hook.seen[1].key, "b");
  auto view = layout::VerifyEntry(hook.seen[1].entry, "b");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->value, "22");
  EXPECT_EQ(hook.seen[2].key, "a");
  EXPECT_TRUE(hook.seen[2].entry.empty());
  EXPECT_TRUE(hook.seen[2].visible_before);
  EXPECT_FALSE(hook.seen[2].visible_after);
  EXPECT_EQ(hook.seen[3].key, "zz");
}

TEST(KvStoreHook, RefusalPublishesNothing) {
  RecordingHook hook;
  Fixture f = Make(&hook);
  hook.store = f.store.get();
  auto w = f.store->NewWriter();
  ASSERT_TRUE(f.store->Put(w.get(), "k", "old").ok());
  hook.refuse = absl::FailedPreconditionError("MOVED 1 h:1");
  EXPECT_THAT(f.store->Put(w.get(), "k", "new").message(), HasSubstr("MOVED"));
  auto r = w->Reserve(1, 4);
  ASSERT_TRUE(r.ok());
  layout::EncodeEntry(r->ptr, "k", "new2", f.store->Version());
  EXPECT_THAT(f.store->CommitReserved(*r).message(), HasSubstr("MOVED"));
  w->Done(*r);
  EXPECT_TRUE(absl::IsFailedPrecondition(f.store->Delete("k")));
  auto v = f.store->Get("k");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->value(), "old");
  EXPECT_TRUE(absl::IsFailedPrecondition(f.store->Put(w.get(), "fresh", "x")));
  EXPECT_FALSE(f.store->Exists("fresh"));
}

TEST(KvStoreHook, ReplicaPathsBypassTheHookAndVerify) {
  RecordingHook hook;
  hook.refuse = absl::UnavailableError("CLUSTERDOWN");
  Fixture f = Make(&hook);
  hook.store = f.store.get();
  ASSERT_TRUE(f.store->InstallReplica(Entry("r", "v1", 77)).ok());
  auto v = f.store->Get("r");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->value(), "v1");
  v->Release();
  EXPECT_GT(f.store->Version(), 77u);
  auto copy = f.store->CopyEntry("r");
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ(*copy, Entry("r", "v1", 77));

  std::string bad = Entry("r", "v2", 78);
  bad[bad.size() - layout::kEntryAlign + 1] ^= 0;  // padding untouched
  bad[layout::kEntryHeaderBytes + 1] ^= 0x5a;      // a value byte
  EXPECT_TRUE(absl::IsDataLoss(f.store->InstallReplica(bad)));
  v = f.store->Get("r");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->value(), "v1");
  v->Release();
  EXPECT_TRUE(absl::IsDataLoss(f.store->InstallReplica("short")));

  ASSERT_TRUE(f.store->DeleteReplica("r").ok());
  EXPECT_FALSE(f.store->Exists("r"));
  EXPECT_TRUE(f.store->DeleteReplica("r").ok());  // idempotent
  EXPECT_TRUE(hook.seen.empty());
}

TEST(KvStoreHook, RdmaCommitInALeaseChunkPassesACopyAndMayBeRetriedAfterARefusal) {
  RecordingHook hook;
  Fixture f = Make(&hook);
  hook.store = f.store.get();
  auto chunk = f.store->AllocateChunk(1 << 20);
  ASSERT_TRUE(chunk.ok());
  const uint64_t size = layout::EntryBytes(1, 5);
  char* at = f.pool->data() + chunk->offset;
  layout::EncodeEntry(at, "L", "leased", f.store->Version());
  hook.refuse = absl::UnavailableError("CLUSTERDOWN");
  EXPECT_TRUE(absl::IsUnavailable(f.store->Commit(chunk->offset, size)));
  EXPECT_FALSE(f.store->Exists("L"));
  // Refused, so the offset was never committed: the holder may retry it.
  hook.refuse = absl::OkStatus();
  ASSERT_TRUE(f.store->Commit(chunk->offset, size).ok());
  ASSERT_EQ(hook.seen.size(), 2u);
  // The hook got a copy, not pool memory the holder can still rewrite.
  EXPECT_EQ(hook.seen[1].entry, std::string(at, size));
  EXPECT_TRUE(hook.seen[1].visible_after);
  // A second commit of the same offset is refused before the hook runs.
  EXPECT_TRUE(absl::IsInvalidArgument(f.store->Commit(chunk->offset, size)));
  EXPECT_EQ(hook.seen.size(), 2u);
  f.store->ReleaseChunk(*chunk);
  auto v = f.store->Get("L");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->value(), "leased");
}

// An RDMA commit started without a waiting thread (LeaseTable::
// StartCommitFrom): the hook gets a copy the holder cannot change, the
// offset is recorded from the start (a second commit of it is refused at
// once) and the key appears only when the round ends.
TEST(KvStoreHook, StartedCommitInALeaseChunkSendsACopyAndPublishesWhenItsRoundEnds) {
  DeferredHook hook;
  Fixture f = Make(&hook);
  auto chunk = f.store->AllocateChunk(1 << 20);
  ASSERT_TRUE(chunk.ok());
  const uint64_t size = layout::EntryBytes(1, 5);
  char* at = f.pool->data() + chunk->offset;
  layout::EncodeEntry(at, "S", "first", f.store->Version());
  const std::string committed(at, size);
  absl::Status result = absl::UnknownError("done never ran");
  ASSERT_TRUE(f.store->StartCommit(chunk->offset, size, /*verify_checksum=*/true,
                                   [&](absl::Status s) { result = s; }));
  ASSERT_EQ(hook.held(), 1u);
  EXPECT_EQ(hook.entry_at_start(), committed);
  EXPECT_FALSE(f.store->Exists("S"));
  EXPECT_TRUE(absl::IsInvalidArgument(f.store->Commit(chunk->offset, size)));
  // The holder rewrites its bytes meanwhile: what the hook holds is a copy.
  layout::EncodeEntry(at, "S", "later", f.store->Version());
  EXPECT_EQ(std::string(hook.entry_view()), committed);
  hook.Finish();
  ASSERT_TRUE(result.ok()) << result;
  EXPECT_TRUE(f.store->Exists("S"));

  // A round that ends refused publishes nothing and leaves the offset free.
  const uint64_t second = chunk->offset + 4096;
  layout::EncodeEntry(f.pool->data() + second, "R", "value", f.store->Version());
  ASSERT_TRUE(f.store->StartCommit(second, size, true, [&](absl::Status s) { result = s; }));
  hook.Finish(absl::UnavailableError("CLUSTERDOWN"));
  EXPECT_TRUE(absl::IsUnavailable(result)) << result;
  EXPECT_FALSE(f.store->Exists("R"));
  // A start the hook declines does nothing either: no record of the
  // offset, no lock on the key; the waiting Commit() then does it.
  hook.set_decline(true);
  EXPECT_FALSE(f.store->StartCommit(second, size, true, [&](absl::Status s) { result = s; }));
  EXPECT_TRUE(f.store->Commit(second, size).ok());
  EXPECT_TRUE(f.store->Exists("R"));
  f.store->ReleaseChunk(*chunk);
  // "S" was committed as "first" and rewritten afterwards: the release's
  // check drops it; "R" was never touched after its commit.
  EXPECT_FALSE(f.store->Exists("S"));
  EXPECT_TRUE(f.store->Exists("R"));
}

// The RESP SET's parked commit (StartCommitReserved): published when the
// round ends, nothing on a refusal, the key's lock held meanwhile (a
// second start of the key declines) and released either way.
TEST(KvStoreHook, StartedCommitOfAReservationPublishesWhenItsRoundEnds) {
  DeferredHook hook;
  Fixture f = Make(&hook);
  auto w = f.store->NewWriter();
  auto r = w->Reserve(1, 5);
  ASSERT_TRUE(r.ok());
  layout::EncodeEntry(r->ptr, "P", "first", f.store->Version());
  absl::Status result = absl::UnknownError("done never ran");
  ASSERT_TRUE(f.store->StartCommitReserved(*r, [&](absl::Status s) { result = s; }));
  ASSERT_EQ(hook.held(), 1u);
  EXPECT_EQ(hook.entry_at_start(), std::string(r->ptr, r->size));
  EXPECT_FALSE(f.store->Exists("P"));
  auto r2 = w->Reserve(1, 6);
  ASSERT_TRUE(r2.ok());
  layout::EncodeEntry(r2->ptr, "P", "second", f.store->Version());
  EXPECT_FALSE(f.store->StartCommitReserved(*r2, [](absl::Status) {}));  // the key is locked
  hook.Finish();
  ASSERT_TRUE(result.ok()) << result;
  EXPECT_TRUE(f.store->Exists("P"));
  ASSERT_TRUE(f.store->StartCommitReserved(*r2, [&](absl::Status s) { result = s; }));
  hook.Finish(absl::UnavailableError("CLUSTERDOWN"));
  EXPECT_TRUE(absl::IsUnavailable(result)) << result;
  auto v = f.store->Get("P");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->value(), "first");
  w->Done(*r);
  w->Done(*r2);
}

// A delete started without a waiting thread (gRPC Delete, an RDMA DELETE
// commit): the key stays until the round ends, holds its lock meanwhile,
// and the caller's buffer may be reused at once (the key is copied).
TEST(KvStoreHook, StartedDeleteUnpublishesWhenItsRoundEnds) {
  DeferredHook hook;
  Fixture f = Make(&hook);
  auto w = f.store->NewWriter();
  hook.set_decline(true);  // Put() waits in Write(), which publishes at once
  ASSERT_TRUE(f.store->Put(w.get(), "gone", "v").ok());
  hook.set_decline(false);
  std::string buffer = "gone";
  absl::Status result = absl::UnknownError("done never ran");
  ASSERT_TRUE(f.store->StartDelete(buffer, [&](absl::Status s) { result = s; }));
  buffer = "xxxx";
  EXPECT_EQ(hook.entry_view(), "");  // an empty entry: a delete
  EXPECT_TRUE(f.store->Exists("gone"));
  // The key's lock is held: a second start of it is declined.
  EXPECT_FALSE(f.store->StartDelete("gone", [](absl::Status) {}));
  hook.Finish();
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_FALSE(f.store->Exists("gone"));
  // An absent key answers NOT_FOUND, as Delete() does; a key over the
  // limits is declined, so that Delete() refuses it.
  ASSERT_TRUE(f.store->StartDelete("gone", [&](absl::Status s) { result = s; }));
  hook.Finish();
  EXPECT_TRUE(absl::IsNotFound(result)) << result;
  EXPECT_FALSE(f.store->StartDelete(std::string(100000, 'k'), [](absl::Status) {}));
  EXPECT_EQ(hook.held(), 0u);
}

TEST(KvStoreHook, NoHookKeepsSingleNodeBehaviour) {
  Fixture f = Make(nullptr);
  auto w = f.store->NewWriter();
  ASSERT_TRUE(f.store->Put(w.get(), "a", "1").ok());
  EXPECT_TRUE(f.store->Delete("a").ok());
  EXPECT_TRUE(absl::IsNotFound(f.store->Delete("a")));
}

}  // namespace
}  // namespace server
}  // namespace kvstore
