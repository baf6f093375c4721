// Copyright 2026 The kvstore Authors.
//
// KvStore: the storage engine of one server. It owns the index and the space
// of the data arena, and is the single commit path for every transport: a
// RESP SET, a gRPC Put and (next) an RDMA WRITE + commit all end in Commit().
//
// Space is handed out in segments (--segment-size). A writer bump-allocates
// entries inside a segment it holds open (a Writer: one per event loop, one
// for the cleaner, one per RDMA write lease); an entry larger than a segment
// gets a run of consecutive segments to itself. Entries are never updated in
// place: an update writes a new entry and swaps the slot word; the old entry's
// bytes stop counting as live in their segment. A sealed segment with no live
// bytes is freed a grace period later (longer than any one-sided READ a client
// allows itself), and only once no local reader has it pinned. The cleaner
// compacts sealed segments that are mostly dead by copying their live entries
// elsewhere and republishing a slot only if it still points at the old copy.
//
// Errors: kInvalidArgument for limits and malformed entries,
// kResourceExhausted when the pool or the index is full (the store keeps
// serving; deleting or overwriting frees space).
//
// Thread safety: KvStore is thread-safe. A Writer is used by one thread.
//
// Lock order: cleaner_mu_ is taken first (compaction holds it while it
// allocates, reclaims and republishes); alloc_mu_, reclaim_mu_, wake_mu_ and
// a Segment's mu are leaves: no other lock is taken while one is held.
// KvIndex's stripe locks are taken with no KvStore lock held but cleaner_mu_.

#ifndef KVSTORE_SERVER_STORAGE_KV_STORE_H_
#define KVSTORE_SERVER_STORAGE_KV_STORE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/metrics/registry.h"
#include "common/protocol/layout.h"
#include "common/protocol/limits.h"
#include "server/storage/clock.h"
#include "server/storage/eviction.h"
#include "server/storage/expiry_queue.h"
#include "server/storage/key_locks.h"
#include "server/storage/key_update.h"
#include "server/storage/kv_index.h"
#include "server/storage/kv_store_options.h"
#include "server/storage/memory_pool.h"
#include "server/storage/pinned_value.h"
#include "server/storage/reservation.h"
#include "server/storage/write_hook.h"

namespace kvstore {
namespace server {

class KvStore {
 public:
  friend class PinnedValue;
  // A bump allocator over segments. It holds one open segment (pinned by
  // the writer itself) and seals it when the next entry does not fit or when
  // the writer is destroyed.
  //
  // Thread safety: a writer from NewWriter() is not thread-safe (one per
  // thread or lock holder; the gRPC service holds a mutex per writer). A
  // writer from NewSharedWriter() may Reserve() and Done() from several
  // threads at once: only Reserve() touches the open segment, under the
  // writer's own mutex, so the threads' writes (and their replication
  // rounds) still overlap.
  class Writer {
   public:
    // Seals the open segment, if any. REQUIRES: every reservation made by
    // this writer has been handed back with Done(); the store outlives it.
    ~Writer();
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;

    // Reserves space for an entry of key_len + value_len bytes.
    // kInvalidArgument over the limits, kResourceExhausted if the pool is full.
    // The limits are checked before any allocation. "Full" means no run of
    // free segments long enough is left beyond the cleaner's reserve after
    // one synchronous attempt to reclaim; the failure also wakes the cleaner.
    // An entry larger than a segment gets a run of its own (r.dedicated).
    // `space_wait`: how long the caller may be held back when the pool is
    // full only because emptied segments are still in their grace period
    // (AllocateRun() says when it waits); zero, the default, never waits.
    // Event-loop threads pass zero: a wait there would stall every
    // connection of the loop.
    absl::StatusOr<Reservation> Reserve(uint64_t key_len, uint64_t value_len,
                                        absl::Duration space_wait = absl::ZeroDuration());
    // Ends a reservation after Commit() or after giving up on it.
    // Drops its pin, seals a dedicated run and resets `r`; bytes never
    // committed become dead space. A no-op on an empty reservation.
    // REQUIRES: `r` came from this writer's Reserve().
    void Done(Reservation& r);
    // Reserve() of an entry whose key and value lengths the caller has
    // already checked against limits(), taken from the open segment when it
    // has room (nearly always): no allocation, no status, no checks again.
    // An empty Reservation (ptr null) otherwise, and then the caller calls
    // Reserve(). Not for a shared writer (NewSharedWriter()), which always
    // answers empty.
    Reservation ReserveInOpen(uint64_t key_len, uint64_t value_len);

   private:
    friend class KvStore;
    // `size` bytes bump-allocated in the open segment, which has room,
    // pinned until Done().
    Reservation TakeFromOpen(uint64_t size);
    Writer(KvStore* store, bool cleaner, bool shared = false)
        : store_(store), cleaner_(cleaner), shared_(shared) {}
    absl::StatusOr<Reservation> ReserveLocked(uint64_t key_len, uint64_t value_len,
                                              absl::Duration space_wait);
    KvStore* store_;
    const bool cleaner_;  // may use the segments reserved for compaction
    const bool shared_;   // NewSharedWriter(): Reserve() under mu_
    absl::Mutex mu_;
    std::optional<Chunk> open_;
    uint64_t used_ = 0;  // bytes bump-allocated in open_
  };

  // A store over `pool`'s data arena and index arena (not owned; must
  // outlive the store), with the cleaner thread started unless
  // options.cleaner_interval is zero. kInvalidArgument for limits that fail
  // Limits::Validate(), a segment size that is not a multiple of kEntryAlign or is
  // under 64 KiB, a grace period outside [kMinGracePeriod,
  // kMaxGracePeriod], a pool holding fewer than two segments or more than
  // layout::kMaxPoolBytes, or an index arena too small for one bucket.
  static absl::StatusOr<std::unique_ptr<KvStore>> Create(MemoryPool* pool,
                                                         const KvStoreOptions& options);
  // Stops and joins the cleaner thread, then seals the cleaner's segment.
  // REQUIRES: every Writer and PinnedValue of this store is destroyed and
  // every lease chunk released.
  ~KvStore();
  KvStore(const KvStore&) = delete;
  KvStore& operator=(const KvStore&) = delete;

  // A writer for one thread (or one lock holder). It takes no segment until
  // its first Reserve(). REQUIRES: destroyed before the store.
  std::unique_ptr<Writer> NewWriter() { return std::unique_ptr<Writer>(new Writer(this, false)); }
  // A writer several threads may use at once (see Writer), for a pool of
  // workers that would otherwise each hold a segment open.
  std::unique_ptr<Writer> NewSharedWriter() {
    return std::unique_ptr<Writer>(new Writer(this, false, /*shared=*/true));
  }

  // Publishes the entry already written at [offset, offset+size) of the data
  // arena: bounds, header, lengths (against the limits), checksum. The commit
  // path of every transport. `verify_checksum` may be false only for an
  // entry this server wrote and checksummed itself a moment ago (RESP SET,
  // gRPC Put): computing it twice on that hot path would buy nothing.
  // On success the key's slot points at the entry and the entry it replaced,
  // if any, stops counting as live (it stays readable for the grace period).
  // Errors: kInvalidArgument for a range that is misaligned, outside the
  // arena or not inside one allocated run, for lengths that do not add up to
  // `size`, or for a key or value over the limits; kDataLoss (from
  // layout::ParseEntry) for a bad magic, bad lengths or a bad checksum;
  // kResourceExhausted when the key is new and both of its index buckets are
  // full (the entry's bytes are then dead); kInvalidArgument, in a lease
  // chunk, for a range that overlaps an entry already committed there (each
  // offset is committed once: entries are never updated in place). Nothing
  // is published on error. Any slot that named the key is unpublished, so the
  // key has exactly one slot afterwards.
  // REQUIRES: the range was reserved by the caller.
  absl::Status Commit(uint64_t offset, uint64_t size, bool verify_checksum = true);
  // Commit() of an entry this server wrote itself (BeginEntry(), then the
  // value and SealEntry()) into `r`, a Writer reservation of this store, for
  // a key and value length already checked against limits(): a reservation
  // lies inside one allocated run and never in a lease chunk, and the entry
  // is well formed, so the checks Commit() makes of a range and of bytes a
  // client wrote are skipped (the RESP SET's path). Hook, key lock, errors
  // and publication as Commit(). `key_hash`: null, or KvIndex::Hash() of
  // the entry's key, which the caller computed already (the RESP loop's
  // look-ahead); it names the key's lock and index places, so it must be
  // that key's (checked in debug builds).
  absl::Status CommitReserved(const Reservation& r, const layout::KeyHash* key_hash = nullptr);

  // Commit() without waiting for the write hook's replication round: for an
  // event loop or a callback (the RESP loop's streamed SET, gRPC Put, an
  // RDMA commit), so that the round does not hold a thread. Returns false,
  // having done nothing, when the commit cannot go so (no hook, a range or
  // entry Commit() would refuse, a lease chunk's entry overlapping one
  // committed there, the key's lock busy, or the hook's
  // WriteHook::StartWrite declines): the caller then calls Commit().
  // Otherwise `done` runs once with Commit()'s status, on a thread of the
  // hook's (possibly before this returns), after the key's lock is
  // released. A lease chunk's entry is copied first, as Commit() copies it.
  // REQUIRES: the range stays reserved by the caller (or, in a lease chunk,
  // the lease stays unrevoked: LeaseTable::StartCommitFrom) until `done`
  // runs.
  bool StartCommit(uint64_t offset, uint64_t size, bool verify_checksum,
                   std::function<void(absl::Status)> done);
  // StartCommit() of an entry this server wrote into its own reservation:
  // CommitReserved()'s skipped checks, StartCommit()'s contract otherwise.
  bool StartCommitReserved(const Reservation& r, std::function<void(absl::Status)> done);

  // Convenience for callers that hold the value in memory.
  // Reserve, encode (one copy of the value), Commit, Done. The errors of
  // Limits::CheckKey, Writer::Reserve() and Commit().
  // `space_wait` as for Writer::Reserve(); `expires_at_ms` as for
  // layout::MakeHeader (0: no expiry; a time already past stores an entry
  // that reads as absent at once, which callers avoid by deleting instead).
  // REQUIRES: `writer` belongs to this store and is not used concurrently.
  absl::Status Put(Writer* writer, absl::string_view key, absl::string_view value,
                   absl::Duration space_wait = absl::ZeroDuration(), uint64_t expires_at_ms = 0);
  // The value of `key`, pinned in pool memory (or a verified copy when the
  // entry lies in a live lease chunk). kNotFound if absent; kDataLoss when
  // the lease holder overwrote the entry after its commit; kUnavailable when
  // on three attempts in a row the entry the index named no longer held the
  // key (an overwrite raced each read). Takes no lock.
  absl::StatusOr<PinnedValue> Get(absl::string_view key);
  // Whether `key` holds a value that has not expired: a lock-free snapshot
  // that a concurrent writer may already have changed.
  bool Exists(absl::string_view key) { return Stat(key).ok(); }
  // The value length and expiry of `key`, without pinning its value past the
  // call. kNotFound if absent or expired; otherwise the errors of Get().
  absl::StatusOr<KeyInfo> Stat(absl::string_view key);
  // A read-modify-write of `key`, atomic with respect to every other client
  // write of it (KeyLocks): `decide` sees what the key holds now and says
  // what to write (key_update.h). The write goes through the write hook like
  // any other. Errors: those of Limits::CheckKey, Get() (reading the current
  // value), `decide`, Writer::Reserve() and Commit(); kNotFound is never
  // returned for an absent key (decide sees it absent). A kDelete of an
  // absent key does nothing and returns OK.
  // REQUIRES: as for Put().
  absl::Status Update(Writer* writer, absl::string_view key, UpdateFn decide,
                      absl::Duration space_wait = absl::ZeroDuration());
  // Update() of several keys at once (MSETNX): every key's lock is held
  // while `decide` sees all their current values (in the order of `keys`)
  // and fills one KeyUpdate per key, applied in order. A write error stops
  // the batch (the writes before it stay) and is returned.
  using MultiUpdateFn = absl::FunctionRef<absl::Status(absl::Span<const CurrentValue> current,
                                                       std::vector<KeyUpdate>* updates)>;
  absl::Status UpdateKeys(Writer* writer, absl::Span<const absl::string_view> keys,
                          MultiUpdateFn decide);
  // The wall clock in unix milliseconds as the store reads expiry times.
  int64_t NowMs() const { return absl::ToUnixMillis(clock_.Wall()); }
  // The memory limit and policy (KvStoreOptions), changeable at any time.
  // A limit under two segments' worth is raised to two segments.
  void SetMaxMemory(uint64_t bytes);
  uint64_t max_memory() const { return max_memory_.load(std::memory_order_relaxed); }
  void SetEvictionPolicy(EvictionPolicy p) { policy_.store(p, std::memory_order_relaxed); }
  EvictionPolicy eviction_policy() const { return policy_.load(std::memory_order_relaxed); }
  // Bytes of segments in use (not free): what the limit is held against.
  uint64_t UsedBytes();
  uint64_t pool_bytes() const { return pool_->data_bytes(); }
  // A read of the entry at `offset` that the server did not see (a client's
  // one-sided GET, reported in a batch): counted for eviction.
  void NoteRead(uint64_t offset) { access_->Touch(offset / layout::kEntryAlign); }
  // One eviction pass: while more than the limit (less a headroom for
  // writers' open segments) is in use, empties the oldest segment (or, for
  // volatile-ttl, deletes the keys expiring soonest). Returns keys evicted.
  // The cleaner thread runs it; so does a writer that found the pool full.
  size_t EvictOnce();
  // The free space eviction keeps below the limit (bytes): two segments,
  // the cleaner's reserve + 1 or 1/32 of the pool, whichever is most. A
  // pool of few segments gives a large share of its limit to it.
  uint64_t EvictionHeadroomBytes() const;
  // One expiry pass: deletes (through the write hook, so in cluster mode
  // only where this node leads the key, replicated as any delete) every key
  // whose entry's expiry time has passed. Returns how many it deleted.
  // Safe to call concurrently with the expiry thread.
  size_t ExpireDue();
  // Cache hints for a Get/Put of `key` coming soon (KvIndex::PrefetchBuckets
  // and, with `entries`, KvIndex::PrefetchEntries). Results are unaffected.
  void Prefetch(absl::string_view key, bool entries) const {
    if (entries) {
      index_->PrefetchEntries(key);
    } else {
      index_->PrefetchBuckets(key);
    }
  }
  // The two stages apart, for a caller that keeps the hash between them:
  // PrefetchBuckets returns what PrefetchEntries takes.
  layout::KeyHash PrefetchBuckets(absl::string_view key) const {
    const layout::KeyHash h = index_->Hash(key);
    index_->PrefetchBuckets(h);
    return h;
  }
  void PrefetchEntries(const layout::KeyHash& h) const { index_->PrefetchEntries(h); }
  // PrefetchBuckets() of a key whose hash the caller has.
  void PrefetchBuckets(const layout::KeyHash& h) const { index_->PrefetchBuckets(h); }
  // Unpublishes `key`; its entry stays readable for the grace period.
  // kInvalidArgument for a key over the limits (or empty).
  // kNotFound if absent.
  absl::Status Delete(absl::string_view key);
  // Delete() without waiting for the write hook's replication round, as
  // StartCommit() is Commit()'s. False, having done nothing, when it cannot
  // go so (no hook, a key over the limits, the key's lock busy, the hook
  // declines): the caller then calls Delete(). Otherwise `done` runs once
  // with Delete()'s status, on a thread of the hook's (possibly before this
  // returns), after the key's lock is released. `key` is copied.
  bool StartDelete(absl::string_view key, std::function<void(absl::Status)> done);

  // A backup installs a write its primary replicated (cluster mode,
  // server/cluster/replica_installer.h): `entry` is the whole
  // self-verifying entry the primary committed. It is copied into this
  // store's own space (a writer of its own, under a mutex) and committed
  // with its checksum verified, bypassing the write hook (the primary
  // already routed and ordered it). Versions handed out later by Version()
  // are above the entry's, so a backup promoted to primary keeps them
  // increasing. Errors: kDataLoss for a corrupt entry, and those of
  // Writer::Reserve() and Commit(); nothing is published on error.
  // `deadline`: a pool full only of emptied segments still in their grace
  // period is waited for until then (as a primary's SET waits), and an
  // entry whose space came only after it is not installed
  // (kDeadlineExceeded): its primary has given up on it and may have sent
  // the key's state again since. InfiniteFuture, the default: no wait.
  // `key_hash`, when not null, is KvIndex::Hash() of `hashed_key`, which
  // the caller computed already: used when the entry's key is that key.
  absl::Status InstallReplica(absl::string_view entry, absl::Time deadline = absl::InfiniteFuture(),
                              const layout::KeyHash* key_hash = nullptr,
                              absl::string_view hashed_key = {});
  // InstallReplica() of an entry the primary RDMA-WROTE into a write lease
  // of this store (LeaseTable::CommitFromWith calls it): published in place,
  // no copy, checksum verified, no write hook; versions as InstallReplica().
  // The errors of Commit(). REQUIRES: the range lies in a live lease chunk.
  absl::Status CommitReplica(uint64_t offset, uint64_t size);
  // The bytes of [offset, offset+size) of the data arena, for a caller that
  // has checked the range (a lease's chunk) and must look at an entry before
  // it is committed. REQUIRES: the range lies inside the arena.
  absl::string_view ArenaBytes(uint64_t offset, uint64_t size) const;
  // A backup applies a replicated DELETE, bypassing the hook. Idempotent:
  // an absent key is OK. kInvalidArgument for a key over the limits.
  absl::Status DeleteReplica(absl::string_view key);
  // Where `key` is published now (its entry's offset and size), for a later
  // DeleteReplicaIf(); nullopt when absent. A lock-free snapshot.
  std::optional<layout::Slot> Locate(absl::string_view key) const { return index_->Lookup(key); }
  // DeleteReplica() of exactly the entry `seen` (from Locate()): unpublishes
  // `key` only while it is still published at that offset and size, so a
  // write (or install) of the key since then is never undone. Returns
  // whether it unpublished it (false also when the key is gone, or the
  // cleaner moved the entry).
  bool DeleteReplicaIf(absl::string_view key, const layout::Slot& seen);
  // A verified copy of the whole entry (header, key, value) that `key`'s
  // slot names, for a primary streaming its shard to a joining replica.
  // kNotFound if absent; kUnavailable when overwrites kept racing the copy.
  absl::StatusOr<std::string> CopyEntry(absl::string_view key) const;

  // Keys for SCAN / the Scan RPC (see KvIndex::Scan).
  uint64_t Scan(uint64_t cursor, size_t count, absl::string_view prefix,
                std::vector<std::string>* keys, uint64_t max_buckets = 0) const {
    return index_->Scan(cursor, count, prefix, keys, max_buckets);
  }

  // A run of whole segments for an RDMA write lease: `bytes` rounded up to
  // segments. Until ReleaseChunk() (called after the lease's write key is
  // revoked) the lease holder can overwrite entries it committed there, so
  // Get() verifies the checksum of entries in it (kDataLoss when it fails).
  // ReleaseChunk() checks every entry committed in it once more against what
  // was committed at its offset (key, size, checksum; the last chance to
  // catch an overwrite: the key is revoked by then), unpublishes by offset
  // any that differ, and seals it; the others stay live.
  // AllocateChunk: kInvalidArgument for 0 bytes, kResourceExhausted when no
  // run that long is free beyond the cleaner's reserve. The chunk is not
  // pinned: it stays open (never reclaimed, never compacted) until released.
  // `space_wait` as for Writer::Reserve().
  absl::StatusOr<Chunk> AllocateChunk(uint64_t bytes,
                                      absl::Duration space_wait = absl::ZeroDuration());
  // REQUIRES: `chunk` came from AllocateChunk() and is released once, after
  // which nothing commits into it or writes to it (LeaseTable revokes the
  // lease's write key and marks the lease revoked first).
  void ReleaseChunk(const Chunk& chunk);

  // One cleaner pass: free segments whose grace period ended, then compact.
  // Safe to call concurrently with the cleaner thread; compaction passes
  // are serialised.
  void RunCleanerOnce();

  // For callers that cannot sleep (the RESP loops), which hold a refused
  // write back themselves and try again later: how long until an emptied
  // run queued for reclamation is due (zero if one is due already or a
  // segment beyond the cleaner's reserve is free), or nullopt when nothing
  // is queued, so that space will not come back without deletes or the
  // cleaner. Thread-safe.
  std::optional<absl::Duration> SpaceReturnsIn();

  // A version stamp for a new entry's header: unique and increasing within
  // this store (relaxed: it orders nothing).
  uint64_t Version() { return next_version_.fetch_add(1, std::memory_order_relaxed); }
  const Limits& limits() const { return options_.limits; }
  const KvStoreOptions& options() const { return options_; }
  // The index, read-only (e.g. for the geometry the handshake publishes).
  const KvIndex& index() const { return *index_; }
  // Keys in the index (KvIndex::size(): approximate while writers run).
  uint64_t size() const { return index_->size(); }
  // The store's time sources (options.clock, or the real clocks), for code
  // that must keep time the way the store does (the RESP loops).
  const Clock& clock() const { return clock_; }
  // The registry holding this store's series (options.registry or its own).
  const metrics::Registry& registry() const { return *registry_; }

 private:
  // kFree -> kOpen (AllocateRun) -> kSealed (Seal) -> kReclaiming (no live
  // bytes left) -> kFree (ReclaimReady, after the grace period and with no
  // pins); kReclaiming goes back to kSealed when a late commit made the run
  // live again. kOpen and kSealed are stored on every segment of a run,
  // kReclaiming on its head only; freeing resets every segment.
  enum class SegState : uint8_t { kFree, kOpen, kSealed, kReclaiming };

  // An entry committed into a lease chunk, as it was at its commit. The key
  // is a copy (at most max_key_bytes, and the entry itself is larger), as
  // the entry's own bytes may be rewritten by the lease holder.
  struct CommittedEntry {
    uint64_t size = 0;
    uint64_t checksum = 0;
    std::string key;
  };
  // A started commit of a lease chunk's entry (StartCommit): the copy that
  // is checked, sent and names the key, kept until its `done`, and whether
  // it was published (set by the hook's publish, read when the write ends).
  struct LeaseCommitCopy {
    std::string entry;
    std::atomic<bool> published{false};
  };
  // What a started write's publish and finish callbacks share
  // (StartPublishThroughHook): one heap block, owned by the finish.
  struct StartedWrite;

  // Per-segment bookkeeping. live_bytes, pins, remote_writable and entries
  // are kept on a run's head segment only. run_head and run_length are
  // written under alloc_mu_ (allocation and freeing); other paths read them
  // without a lock while a pin, a reservation or a live entry keeps the run
  // from being freed, or re-check the state afterwards (CompactOnce). They are
  // atomics because those lock-free snapshot reads (the cleaner's scan,
  // LiveBytes) race with allocation: a plain field there is a data race
  // (found by TSan); on x86 the loads are plain moves.
  struct Segment {
    std::atomic<SegState> state{SegState::kFree};
    std::atomic<int64_t> live_bytes{0};
    std::atomic<int32_t> pins{0};
    // A lease chunk: its holder can still WRITE over entries it committed,
    // so local readers verify their checksum (on the head).
    std::atomic<bool> remote_writable{false};
    std::atomic<uint32_t> run_head{0};    // first segment of the run this one belongs to
    std::atomic<uint32_t> run_length{0};  // valid on the head
    std::atomic<uint64_t> seal_seq{0};    // sealing order (eviction's FIFO), on the head
    // Filled by clients' writes (eviction's probation queue), not by the
    // cleaner or the evictor's copies (its main queue); on the head.
    std::atomic<bool> probation{false};
    absl::Mutex mu;
    std::vector<uint32_t> entries ABSL_GUARDED_BY(mu);  // committed offsets in the run
    // A lease chunk only: what was committed at each offset, so that the end
    // of the lease can check the bytes against it and find the entry's slot
    // by its offset whatever the holder wrote over the entry since. Keyed by
    // offset; the ranges never overlap (Commit() refuses that).
    std::map<uint64_t, CommittedEntry> lease_entries ABSL_GUARDED_BY(mu);
  };

  explicit KvStore(MemoryPool* pool, const KvStoreOptions& options);

  // `for_cleaner` may take the last free segments, which are kept for the
  // cleaner: without them a pool whose segments all hold some live data
  // could never be compacted again.
  // Returns an open run of `segments` consecutive segments. When none is
  // free it runs ReclaimReady() and, if that freed anything, tries once
  // more. Then, for up to `space_wait`, it sleeps until the next queued run
  // is due and tries again, as long as one is due within the wait: under a
  // steady stream of overwrites the space is coming back, and holding the
  // writer back a little beats refusing it. kResourceExhausted otherwise
  // (counted, and the cleaner is woken unless it is the caller).
  absl::StatusOr<Chunk> AllocateRun(uint32_t segments, bool for_cleaner = false,
                                    absl::Duration space_wait = absl::ZeroDuration());
  // The first-fit search of AllocateRun(), under alloc_mu_; nullopt when no
  // run of `n` free segments is left beyond `keep`.
  std::optional<Chunk> TryAllocateRun(uint32_t n, uint32_t keep);
  // When the earliest run queued for reclamation is due, on clock_.Steady();
  // nullopt when none is queued.
  std::optional<absl::Duration> NextReclaimDue();
  // Asks the cleaner thread for a pass now (pool running out).
  void WakeCleaner();
  // Marks every segment of the run at `head` sealed and queues the run for
  // reclamation if nothing in it is live.
  void Seal(uint32_t head);
  // Raises the next version handed out above `version`.
  void KeepVersionsAbove(uint64_t version);
  // Commit()'s checks of a range: the head of the allocated run holding
  // it, or kInvalidArgument.
  absl::StatusOr<uint32_t> CommitRun(uint64_t offset, uint64_t size) const;
  // Commit()'s checks of the entry's bytes (`size` of them): its view, or
  // the parse, length and limit errors.
  absl::StatusOr<layout::EntryView> CheckEntry(absl::string_view bytes, uint64_t size,
                                               bool verify_checksum) const;
  // Commit() with the hook to consult (null: none, as for InstallReplica).
  // `key_locked`: the caller holds the key's KeyLocks stripe already.
  absl::Status CommitEntry(uint64_t offset, uint64_t size, bool verify_checksum, WriteHook* hook,
                           bool key_locked = false);
  // A commit's second half, once its entry is known good: the key's lock
  // (unless `key_locked`, or the hook is not this store's own), then `hook`
  // (replication) around PublishEntry(); *published tells whether the
  // index got the entry.
  // StartCommit()'s second half, with the key's lock held (`h`, the key's
  // KvIndex::Hash, names it): `hook` starts
  // the write, and `done` runs when it ends, after the lock is released. On
  // false (the hook declined) the lock is released and `copy`'s lease
  // record (if any) forgotten.
  bool StartPublishThroughHook(WriteHook* hook, absl::string_view key, const layout::KeyHash& h,
                               absl::string_view bytes, uint32_t run, uint64_t offset,
                               uint64_t size, uint64_t expires_at_ms,
                               std::shared_ptr<LeaseCommitCopy> copy,
                               std::function<void(absl::Status)> done);
  // CommitReserved() through `hook` (null: none, as for InstallReplica).
  absl::Status CommitReservedThrough(const Reservation& r, WriteHook* hook,
                                     const layout::KeyHash* key_hash);
  // `key_hash`: null, or the key's KvIndex::Hash() (computed here if null).
  absl::Status PublishThroughHook(absl::string_view key, absl::string_view bytes, uint32_t head,
                                  uint64_t offset, uint64_t size, uint64_t expires_at_ms,
                                  WriteHook* hook, bool key_locked, bool* published,
                                  const layout::KeyHash* key_hash = nullptr);
  // The publishing half of a commit: counts the entry live in the run at
  // `head`, stores its slot word (what a WriteHook's publish runs) and
  // queues its expiry, if any. `hash`: the key's KvIndex::Hash, when the
  // caller has it (null: computed here).
  absl::Status PublishEntry(absl::string_view key, uint32_t head, uint64_t offset, uint64_t size,
                            uint64_t expires_at_ms, const layout::KeyHash* hash = nullptr);
  // Get() that also reports the expiry time (kNotFound once it has passed).
  absl::StatusOr<PinnedValue> GetEntry(absl::string_view key, uint64_t* expires_at_ms,
                                       uint64_t* offset = nullptr);
  // For Update(): `key` into `current`, its value pinned in `pin`.
  absl::Status ReadCurrent(absl::string_view key, CurrentValue* current, PinnedValue* pin);
  // Applies one decided update of `key`. REQUIRES: the key's lock is held.
  absl::Status ApplyLocked(Writer* writer, absl::string_view key, const KeyUpdate& u,
                           absl::Duration space_wait);
  absl::Status DeleteLocked(absl::string_view key);  // Delete() under the key's lock
  // Deletes the key of the entry a due expiry record names, if it is still
  // published there and expired at `now_ms`. Returns whether it did.
  bool ExpireRecord(const ExpiryQueue::Record& r, int64_t now_ms);
  // Whether an expiry record names its key's published entry.
  bool RecordLive(const ExpiryQueue::Record& r) const;
  void ExpiryLoop();  // the expiry thread: ExpireDue() every expiry_interval
  // EvictOnce()'s parts (kv_store_evict.cc): the oldest sealed single
  // segment; copying or deleting each of its entries; the volatile-ttl pass.
  // Sealed single segments in eviction order: the probation queue's
  // oldest first while it holds more than its share, then the main
  // queue's oldest first (kv_store_evict.cc).
  std::vector<uint32_t> SealedByAge();
  // noeviction with a limit: kResourceExhausted (Redis's OOM text) when
  // `n` more segments would take live bytes past it; evicting: wakes the
  // cleaner near the limit.
  absl::Status CheckMemoryLimit(uint32_t n);
  // Copies the entry `key` is published at (`slot`) into `writer`'s space
  // and swings the slot over unless a write got there first. The new
  // offset, nullopt when it lost that race; an error when no space.
  absl::StatusOr<std::optional<uint64_t>> MoveEntry(Writer* writer, absl::string_view key,
                                                    const layout::Slot& slot);
  // How a pass treats a segment's read entries: copies them forward
  // (kKeepRead); leaves the whole segment alone if it has any (kWholeOnly:
  // once nothing can be copied, only an unread segment frees anything);
  // ignores reads (kFifo).
  enum class SweepMode { kKeepRead, kWholeOnly, kFifo };
  // `no_space`: set when an entry could be neither copied nor evicted.
  size_t EvictSegment(uint32_t head, SweepMode mode, bool* no_space);
  // True if a live entry of the pinned run at `head` has been read.
  bool HasReadEntries(uint32_t head, const std::vector<uint32_t>& entries);
  enum class EvictOutcome { kEvicted, kKept, kNoSpace };
  EvictOutcome EvictOrKeep(uint64_t offset, const layout::EntryHeader& h, absl::string_view key,
                           EvictionPolicy policy, bool force);
  size_t EvictSoonestExpiring(uint64_t bytes_wanted);
  // Deletes `key` if it is still published at `slot`, through the hook, and
  // counts it evicted. False when the key's lock is busy or the hook refuses.
  bool EvictKey(absl::string_view key, const layout::Slot& slot);
  // The publishing half of Delete(). kNotFound if absent.
  absl::Status Unpublish(absl::string_view key);
  // Records an entry committed into the lease chunk whose head is `seg`;
  // kInvalidArgument when its range overlaps one committed before.
  absl::Status RecordLeaseEntryLocked(Segment& seg, uint64_t offset, uint64_t size,
                                      uint64_t checksum, const std::string& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(seg.mu);
  // Drops the record of the lease entry at `offset` of run `head` unless
  // `copy` was published (a holder may then commit that offset again).
  void ForgetUnpublishedLeaseEntry(uint32_t head, uint64_t offset, const LeaseCommitCopy& copy);
  // Unpublishes, by offset, an entry of a released lease chunk that no
  // longer holds what was committed there. Returns whether it did.
  bool CheckReleasedEntry(uint64_t offset, const CommittedEntry& committed);
  // Drops `slot`'s bytes from its segment's live count.
  // The caller has just unpublished `slot` (or never published it).
  // `published`: false for an entry that never was (keeps volatile_keys_ exact).
  void Retire(const layout::Slot& slot, bool published = true);
  // Queues the run at `head` for freeing a grace period from now, if it is
  // sealed and holds no live bytes; only the caller that moves it to
  // kReclaiming queues it.
  void MaybeScheduleReclaim(uint32_t head);
  // Frees segments whose grace period has passed. Returns how many.
  // Runs that are still pinned are re-queued; runs that became live again go
  // back to kSealed.
  size_t ReclaimReady();
  // Segments in runs queued by MaybeScheduleReclaim(): free once their grace
  // period ends (or, if pinned, soon after). Takes reclaim_mu_.
  uint32_t SegmentsAwaitingGrace();
  // Copies the live entries out of a few sparse sealed single-segment runs.
  // Takes cleaner_mu_.
  void CompactOnce();
  // The cleaner thread's body: a pass every cleaner_interval or when woken,
  // until the destructor sets stopping_.
  void CleanerLoop();
  uint32_t SegmentOf(uint64_t offset) const {
    return static_cast<uint32_t>(offset / options_.segment_bytes);
  }
  // Drops one pin on the run whose head is `segment`.
  void Unpin(uint32_t segment);
  // Registers the counters and the scrape-time gauges; constructor only.
  void RegisterMetrics();
  // Charges `bytes` to the lease-read copy budget; false when over it.
  bool TakeCopyBudget(uint64_t bytes);
  void ReturnCopyBudget(uint64_t bytes) { copy_bytes_.fetch_sub(bytes, std::memory_order_acq_rel); }
  // Get() of an entry in a live lease chunk: copy, verify, serve the copy.
  // REQUIRES: the caller pinned `head`; the pin is dropped here.
  absl::StatusOr<PinnedValue> CopyLeasedEntry(absl::string_view key, const layout::Slot& slot,
                                              uint32_t head);
  // Bytes of live entries over all runs (the kvstore_pool_live_bytes gauge).
  int64_t LiveBytes() const;

  // Declared first: every Counter* below points into it, so it dies last.
  std::unique_ptr<metrics::Registry> own_registry_;
  metrics::Registry* const registry_;
  MemoryPool* const pool_;
  const KvStoreOptions options_;
  const Clock& clock_;
  std::unique_ptr<KvIndex> index_;
  const uint32_t segment_count_;
  std::unique_ptr<Segment[]> segments_;
  std::atomic<uint64_t> next_version_{1};
  // Bytes of lease-entry copies held by PinnedValues (see
  // KvStoreOptions::lease_read_copy_bytes).
  std::atomic<uint64_t> copy_bytes_{0};

  absl::Mutex alloc_mu_;
  uint32_t free_segments_ ABSL_GUARDED_BY(alloc_mu_) = 0;
  // The highest segment TryAllocateRun() ever handed out, plus one.
  uint32_t segments_touched_ ABSL_GUARDED_BY(alloc_mu_) = 0;

  struct PendingFree {
    uint32_t head;
    absl::Duration ready;  // on clock_.Steady(): a wall-clock step moves nothing
  };
  absl::Mutex reclaim_mu_;
  std::deque<PendingFree> pending_ ABSL_GUARDED_BY(reclaim_mu_);

  // Only the cleaner thread (or RunCleanerOnce callers, serialised) use this.
  absl::Mutex cleaner_mu_;
  std::unique_ptr<Writer> cleaner_writer_ ABSL_GUARDED_BY(cleaner_mu_);

  KeyLocks key_locks_;
  ExpiryQueue expiry_;
  std::thread expirer_;

  // The writer of InstallReplica(), shared by the threads installing
  // replicated writes.
  absl::Mutex replica_mu_;
  std::unique_ptr<Writer> replica_writer_ ABSL_GUARDED_BY(replica_mu_);

  // Owned by *registry_; incremented on the paths that count them.
  metrics::Counter* commits_;
  metrics::Counter* deletes_;
  metrics::Counter* cleaner_passes_;
  metrics::Counter* moved_entries_;
  metrics::Counter* moved_bytes_;
  metrics::Counter* reclaimed_;
  metrics::Counter* pool_full_;
  metrics::Counter* space_waits_;
  metrics::Counter* index_full_;
  metrics::Counter* modified_;
  metrics::Counter* copy_refused_;
  metrics::Counter* expired_;
  metrics::Counter* hits_;
  metrics::Counter* misses_;
  std::atomic<int64_t> volatile_keys_{0};  // published entries with an expiry
  std::atomic<uint64_t> max_memory_{0};
  std::atomic<EvictionPolicy> policy_{EvictionPolicy::kNoEviction};
  std::unique_ptr<AccessCounts> access_;
  std::atomic<uint64_t> next_seal_seq_{0};
  absl::Mutex evict_mu_;  // one pass at a time; guards evict_writer_
  std::unique_ptr<Writer> evict_writer_ ABSL_GUARDED_BY(evict_mu_);
  metrics::Counter* evicted_;

  // Segments only the cleaner may allocate.
  uint32_t cleaner_reserve_ = 0;
  absl::Mutex wake_mu_;
  bool wake_ ABSL_GUARDED_BY(wake_mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(wake_mu_) = false;
  std::thread cleaner_;
  // Declared last: destroyed (unregistered, waiting out a running scrape)
  // before the index, segments and mutexes their callbacks read.
  std::vector<metrics::CallbackHandle> gauges_;
};

// Inline: a RESP SET reserves its entry once per request.
inline Reservation KvStore::Writer::TakeFromOpen(uint64_t size) {
  Reservation r;
  r.size = size;
  r.offset = open_->offset + used_;
  used_ += size;
  store_->segments_[open_->first_segment].pins.fetch_add(1, std::memory_order_acq_rel);
  r.ptr = store_->pool_->data() + r.offset;
  return r;
}

inline Reservation KvStore::Writer::ReserveInOpen(uint64_t key_len, uint64_t value_len) {
  const uint64_t size = layout::EntryBytes(key_len, value_len);
  if (shared_ || !open_ || size > store_->options_.segment_bytes || used_ + size > open_->length) {
    return Reservation();
  }
  return TakeFromOpen(size);
}

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_STORAGE_KV_STORE_H_
