// Copyright 2026 The kvstore Authors.
//
// LeaseTable: write leases over KvStore chunks (docs/architecture.md §8).
//
// A client that PUTs over RDMA first obtains a lease: a run of whole
// segments of the data arena that it alone may write, until an expiry time.
// It bump-allocates entries inside the chunk, writes them remotely, and then
// asks the server to publish each one with Commit(). Commit() is the only way
// an entry written under a lease becomes visible, and it refuses any entry
// that is not entirely inside a live lease's chunk.
//
// One lease, one record. Everything the server knows about a lease lives in
// its LeaseTable::Lease: id, owner, chunk, expiry and, for a lease granted to
// an RDMA connection, its write key (a LeaseWriteKey the transport made at
// grant time; the RDMA layer's is a memory window bound on the client's
// queue pair). The key is owned by the lease: it is made before the lease is
// published, it is revoked when the lease ends, and it is destroyed with the
// lease record. The connection the key is bound to is the lease's holder:
// only that connection may commit under the lease (CommitFrom), renew it or
// release it.
//
// Lifecycle of a lease:
//   1. Grant(): checks the size and max_leases, allocates a chunk
//      (KvStore::AllocateChunk), assigns an id and the expiry, lets the
//      caller's KeyMaker make the write key (outside every table lock: a
//      bind waits for the NIC), and publishes the record in the table.
//   2. Alive: Renew() moves the expiry; Commit()/CommitFrom() publish
//      entries written into the chunk.
//   3. End: Release(), ReleaseHeldBy(), expiry (ExpireNow(), run by the
//      background thread or by tests; also a Renew() that finds the lease
//      expired) or the destructor. The record leaves the table first, then
//      Revoke() runs: it waits for a commit in progress, marks the lease
//      revoked, revokes the write key (no remote write can land any more),
//      and only then gives the chunk back with KvStore::ReleaseChunk().
//      ReleaseChunk() verifies every entry committed in the chunk once more
//      and unpublishes one changed after its commit; the other committed
//      entries stay live. Bytes written but never committed were never
//      live, so a client that dies between its WRITE and its commit leaves
//      no trace once the store's grace period has passed.
//   4. The record is freed when the last reference to it goes (a commit
//      that raced the revocation may hold one for a moment).
//
// A commit and the revocation of its lease never overlap: a commit either
// completes before the chunk is released or fails with kAborted.
//
// Locking (lock order top to bottom; no other order is ever taken):
//   * LeaseTable::mu_ guards the map of live leases, every lease's expiry,
//     the id counter and the pending-grant count. It is held only for map
//     look-ups and updates: never across KvStore calls or a write key's
//     Revoke(), so a slow commit or bind never blocks other leases.
//   * Lease::commit_mu (one per lease) is held across KvStore::Commit() and
//     while the revocation marks the lease revoked; not across the write
//     key's Revoke() (which may wait seconds for a NIC) nor ReleaseChunk(),
//     which run after it, once no commit can start. It is never taken with
//     mu_ held.
//   * Lease::started_mu (one per lease) guards the count of started
//     commits; held only to count or to await zero, never across a call.
//     The end of a started commit takes it and nothing above it.
//   * Below it: the KvStore's own locks. A LeaseWriteKey's Revoke() (the
//     RDMA layer's per-connection send mutex) runs with no table lock held.
//
// Errors: kInvalidArgument for bad sizes and out-of-chunk commits,
// kResourceExhausted when the table or the pool is full, kAborted for an
// expired or unknown lease on Renew()/Commit() (the client restarts the whole
// PUT with a new lease), kPermissionDenied when a connection other than the
// holder names a lease with a write key, kNotFound for Release() of an
// unknown lease.
//
// Thread safety: LeaseTable is thread-safe.

#ifndef KVSTORE_SERVER_STORAGE_LEASE_TABLE_H_
#define KVSTORE_SERVER_STORAGE_LEASE_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/metrics/registry.h"
#include "server/storage/clock.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

// The caller of Renew()/Release() has no RDMA connection.
inline constexpr uint64_t kNoConnection = 0;

// The remote-write capability over one lease's chunk, made by a transport
// (the RDMA layer: a memory window over the chunk, bound on one queue pair;
// server/rdma/rdma_service.h) and owned by the lease it was made for. Storage
// knows it only through this interface, so it needs no verbs.
//
// Contract for implementations:
//   * rkey() and connection_id() never change; connection_id() is never
//     kNoConnection (an rkey of 0 would read as "no key" on the wire, as it
//     always has).
//   * Revoke() is called exactly once, by LeaseTable, when the lease ends and
//     before its chunk goes back to the store, with the lease's commit lock
//     held (no LeaseTable::mu_). When it returns, no remote write through
//     the key may land in the chunk any more. It cannot fail (problems are
//     logged) and must not call back into the LeaseTable.
//   * The destructor runs when the lease record is freed, on whatever thread
//     drops the last reference; it frees what Revoke() left.
// Thread safety: the accessors may be called from any thread; Revoke() and
// the destructor are serialized by LeaseTable.
class LeaseWriteKey {
 public:
  virtual ~LeaseWriteKey() = default;
  LeaseWriteKey(const LeaseWriteKey&) = delete;
  LeaseWriteKey& operator=(const LeaseWriteKey&) = delete;

  // The key a client names in its remote writes into the chunk.
  uint32_t rkey() const { return rkey_; }
  // The connection the key is bound to: the lease's holder.
  uint64_t connection_id() const { return connection_id_; }

  // Makes the key useless; see the class comment.
  virtual void Revoke() = 0;

 protected:
  LeaseWriteKey(uint32_t rkey, uint64_t connection_id)
      : rkey_(rkey), connection_id_(connection_id) {}

 private:
  const uint32_t rkey_;
  const uint64_t connection_id_;
};

// One granted lease, as reported to its holder: a copy of the record, taken
// under the table's lock.
struct LeaseInfo {
  // Unique within the table, never 0.
  uint64_t lease_id = 0;
  // Who asked for it (client name and peer), for logs.
  std::string owner;
  // The segments the lease covers; `chunk.length` is the requested size
  // rounded up to whole segments, and all of it may be written.
  Chunk chunk;
  // Wall-clock times, for reporting only (expires_unix_ms, logs).
  absl::Time granted_at = absl::InfinitePast();
  absl::Time expires_at = absl::InfinitePast();
  // When the lease expires on the table's steady clock (Clock::Steady()):
  // what expiry is decided by.
  absl::Duration deadline = -absl::InfiniteDuration();
  // The rkey of the lease's write key; 0 when it has none (granted without
  // a connection).
  uint32_t write_rkey = 0;
};

struct LeaseOptions {
  // How long a lease lives without a Renew(). Validate() wants it within
  // [kMinTtl, kMaxTtl]: clients round a shorter one up to 100 ms (and would
  // write after the server expired the lease), and the handshake reports it
  // in 32-bit milliseconds.
  absl::Duration ttl = absl::Seconds(10);
  static constexpr absl::Duration kMinTtl = absl::Milliseconds(100);
  static constexpr absl::Duration kMaxTtl = absl::Hours(24);
  // Largest lease a client may ask for. Must hold the largest entry the
  // store's limits allow (64 MiB value + 1 KiB key + header with the default
  // limits); the constructor logs a warning when it does not.
  uint64_t max_lease_bytes = (64ull << 20) + (4ull << 10);
  // Most leases alive at once.
  size_t max_leases = 1024;
  // How often the background thread calls ExpireNow(); zero disables the
  // thread (tests then call ExpireNow() themselves).
  absl::Duration expire_interval = absl::Milliseconds(100);
  // The time sources (not owned; must outlive the table). Null: the real
  // clocks. Tests pass a fake to step the wall clock.
  const Clock* clock = nullptr;
  // Where the table registers kvstore_leases_* and kvstore_lease_*_total
  // (not owned; must outlive the table). Null: a private registry.
  metrics::Registry* registry = nullptr;

  // kInvalidArgument naming the bad value. The table itself accepts any
  // options (tests use tiny TTLs); a server checks them before it starts.
  absl::Status Validate() const;
};

// The table's series: kvstore_leases_{granted,renewed,released,expired}_total,
// kvstore_leases_active, kvstore_lease_commits_total and
// kvstore_lease_aborted_commits_total. At rest, granted == active + released
// + expired + leases dropped by the destructor. "released" counts
// Release()/ReleaseHeldBy() and failed KeyMakers; "expired" counts
// ExpireNow() and Renew()s that found the lease expired; "aborted commits"
// are Commit()/CommitFrom() calls refused for an expired/unknown lease.

class LeaseTable {
 public:
  // Makes the write key of a lease being granted, from its id, owner and
  // chunk (the times are set too). Runs on the granting thread with no
  // LeaseTable lock held. An error fails the Grant().
  using KeyMaker =
      std::function<absl::StatusOr<std::unique_ptr<LeaseWriteKey>>(const LeaseInfo& lease)>;

  // `store` must outlive the table. Starts the expiry thread when
  // options.expire_interval > 0.
  LeaseTable(KvStore* store, LeaseOptions options);
  // Stops the expiry thread and revokes every remaining lease (and so its
  // write key: whatever made the keys must still be alive).
  ~LeaseTable();
  LeaseTable(const LeaseTable&) = delete;
  LeaseTable& operator=(const LeaseTable&) = delete;

  // Grants a lease over a fresh chunk of at least `bytes` bytes, expiring
  // options().ttl from now. With a `make_key`, the lease gets the write key
  // it returns (LeaseInfo::write_rkey is set) and is held by that key's
  // connection.
  // kInvalidArgument if bytes == 0 or bytes > max_lease_bytes (the message
  // names the limit); kResourceExhausted when max_leases are alive or the
  // pool has no run of free segments that large; make_key's error if it
  // fails (the chunk goes back at once; the lease counts as granted and
  // released, as it did when keys were bound after the grant).
  // `space_wait`: how long a pool full only of segments in their grace
  // period may hold the grant back (KvStore::Writer::Reserve()); zero
  // refuses at once. The grant counts against max_leases meanwhile.
  absl::StatusOr<LeaseInfo> Grant(uint64_t bytes, std::string owner,
                                  const KeyMaker& make_key = nullptr,
                                  absl::Duration space_wait = absl::ZeroDuration());

  // Moves the lease's expiry to options().ttl from now and returns it.
  // `connection_id` is the caller's connection (kNoConnection: none).
  // kPermissionDenied if the lease has a write key bound on another
  // connection; kAborted if the lease is unknown or already expired (an
  // expired lease is revoked on the spot).
  absl::StatusOr<LeaseInfo> Renew(uint64_t lease_id, uint64_t connection_id = kNoConnection);

  // Ends the lease and returns its chunk to the store. Entries committed in
  // it stay live. kPermissionDenied as for Renew(); kNotFound if the lease
  // is unknown (never granted, released already, or expired).
  absl::Status Release(uint64_t lease_id, uint64_t connection_id = kNoConnection);

  // Ends every lease whose write key is bound on `connection_id` (the
  // connection is going away) and returns how many. Each counts as released.
  size_t ReleaseHeldBy(uint64_t connection_id);

  // THE commit entry point for entries written under a lease: publishes the
  // entry at [offset, offset + size) of the data arena with KvStore::Commit()
  // after checking that the lease is alive and the range lies entirely inside
  // its chunk. On any failure nothing is published. Does not look at the
  // lease's write key (local callers and tests; the RDMA path uses
  // CommitFrom()).
  // kAborted "lease N expired ..." if the lease is unknown or past its
  // expiry; kInvalidArgument if the range is empty or leaves the chunk;
  // otherwise whatever KvStore::Commit() returns (kInvalidArgument/kDataLoss
  // for a malformed entry, kResourceExhausted for a full index).
  absl::Status Commit(uint64_t lease_id, uint64_t offset, uint64_t size);

  // Commit() for a commit that arrived on connection `connection_id`: the
  // lease must have a write key bound on that connection. kAborted "lease N
  // is not active ..." if the lease is unknown or has no write key;
  // kPermissionDenied if its key is bound on another connection; otherwise
  // as Commit(). One look-up under one lock decides all of it.
  absl::Status CommitFrom(uint64_t connection_id, uint64_t lease_id, uint64_t offset,
                          uint64_t size);

  // How a commit publishes a checked range: KvStore::Commit() for clients;
  // a backup's replica commits publish without the write hook, after the
  // replication checks (server/rdma/replica_commit_sink.h).
  using PublishFn = absl::FunctionRef<absl::Status(uint64_t offset, uint64_t size)>;
  // CommitFrom() that publishes with `publish` instead of KvStore::Commit(),
  // under the same checks and the lease's commit lock (so the chunk cannot
  // be revoked while `publish` runs). The errors of CommitFrom(), then
  // those of `publish`.
  absl::Status CommitFromWith(uint64_t connection_id, uint64_t lease_id, uint64_t offset,
                              uint64_t size, PublishFn publish);

  // CommitFrom() without waiting for the write hook's replication round:
  // for the RDMA commit poller in cluster mode, whose commit is acked when
  // the round ends instead of holding a worker for it. The same checks,
  // then KvStore::StartCommit(). Returns
  //   * CommitFrom()'s refusal when a check fails (`done` never runs);
  //   * true when the commit started: `done` runs once with what
  //     CommitFrom() would have returned, on a thread of the write hook's
  //     (possibly before this returns); the lease is not revoked (its chunk
  //     not released) before `done` has run;
  //   * false when the store declined to start it (no hook, a busy key, a
  //     migration...: KvStore::StartCommit): nothing was done, and the
  //     caller calls CommitFrom() on a thread that may wait.
  absl::StatusOr<bool> StartCommitFrom(uint64_t connection_id, uint64_t lease_id, uint64_t offset,
                                       uint64_t size, std::function<void(absl::Status)> done);

  // Revokes every lease whose deadline is at or before `steady_now` (a
  // reading of the table's Clock::Steady(), or a time tests choose).
  // Returns how many. The expiry thread passes the clock's reading.
  size_t ExpireNow(absl::Duration steady_now);

  // The lease while it is in the table (possibly past its expiry but not
  // yet swept); kNotFound otherwise.
  absl::StatusOr<LeaseInfo> Lookup(uint64_t lease_id) const;

  // The connections that hold at least one live lease with a write key.
  absl::flat_hash_set<uint64_t> KeyHolders() const;

  // The live leases whose write key is bound on one of `connections` (a
  // session's), and their chunks' bytes: what a session's quota counts.
  struct Holdings {
    size_t leases = 0;
    uint64_t bytes = 0;
  };
  Holdings HeldBy(const absl::flat_hash_set<uint64_t>& connections) const;

  // The registry holding the table's series (options.registry or its own).
  const metrics::Registry& registry() const { return *registry_; }
  // The options the table was made with; never change.
  const LeaseOptions& options() const { return options_; }

 private:
  // The one record of a lease. Shared (std::shared_ptr) between the table
  // and a commit in progress, so a commit never touches freed memory even
  // if the lease ends under it.
  struct Lease {
    Lease(const LeaseInfo& info, std::unique_ptr<LeaseWriteKey> key)
        : id(info.lease_id),
          owner(info.owner),
          chunk(info.chunk),
          granted_at(info.granted_at),
          write_key(std::move(key)),
          expires_at(info.expires_at),
          deadline(info.deadline) {}

    // Fixed at grant; read without a lock.
    const uint64_t id;
    const std::string owner;
    const Chunk chunk;
    const absl::Time granted_at;
    // Null for a lease granted without a connection. Revoked by
    // LeaseTable::Revoke() once `revoked` is set; destroyed with the record.
    const std::unique_ptr<LeaseWriteKey> write_key;

    // Guarded by LeaseTable::mu_ (ABSL_GUARDED_BY cannot name the table's
    // mutex from here): only read or written with mu_ held, while the
    // record is in leases_.
    absl::Time expires_at;  // reported only
    absl::Duration deadline;

    // Held across KvStore::Commit() and while revocation sets `revoked`, so
    // a chunk is never released in the middle of a commit into it (started
    // commits are counted in `started` instead).
    absl::Mutex commit_mu;
    bool revoked ABSL_GUARDED_BY(commit_mu) = false;
    // Commits StartCommitFrom() started whose `done` has not run: what
    // Revoke() waits for after setting `revoked`. A lock of its own, only
    // ever held for the count: a started commit's end must never wait for
    // commit_mu, whose holder may be waiting (for a key) on that very
    // commit, or on one whose end comes after it on the same thread.
    absl::Mutex started_mu ABSL_ACQUIRED_AFTER(commit_mu);
    int started ABSL_GUARDED_BY(started_mu) = 0;
  };
  static bool NoCommitStarted(Lease* lease) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lease->started_mu) {
    return lease->started == 0;
  }
  // The lease `lease_id` when connection `connection_id` may commit under
  // it (CommitFrom()'s look-up and refusals). REQUIRES: mu_ not held.
  absl::StatusOr<std::shared_ptr<Lease>> FindForCommit(uint64_t connection_id, uint64_t lease_id)
      ABSL_LOCKS_EXCLUDED(mu_);
  // kInvalidArgument unless [offset, offset + size) is a non-empty range
  // inside the lease's chunk.
  static absl::Status CheckRange(const Lease& lease, uint64_t offset, uint64_t size);

  // The lease `lease_id` if it is in the table, else null.
  // REQUIRES: mu_ held.
  std::shared_ptr<Lease> FindLocked(uint64_t lease_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // kPermissionDenied "lease N belongs to another <connection_noun>" unless
  // `lease` has no write key or its key is bound on `connection_id`. The
  // noun differs between the RPCs and RDMA commits, as documented.
  static absl::Status CheckHolder(const Lease& lease, uint64_t connection_id,
                                  absl::string_view connection_noun);
  // A copy of the record for the caller.
  // REQUIRES: mu_ held (for expires_at and deadline).
  LeaseInfo Snapshot(const Lease& lease) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The range check, the revocation check and KvStore::Commit(), under the
  // lease's commit lock. REQUIRES: mu_ not held.
  absl::Status CommitLocked(Lease& lease, uint64_t offset, uint64_t size, PublishFn publish)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Takes the lease out of leases_ and counts it in `counter`.
  // REQUIRES: mu_ held.
  std::shared_ptr<Lease> RemoveLocked(uint64_t lease_id, metrics::Counter* counter)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Revokes the write key and releases the chunk; see the lifecycle above.
  // REQUIRES: `lease` has been removed from leases_; mu_ not held.
  void Revoke(Lease* lease) ABSL_LOCKS_EXCLUDED(mu_);
  void ExpiryLoop();
  // Registers the table's series; constructor only.
  void RegisterMetrics();

  // Declared first: the Counter*s below point into it, so it dies last.
  std::unique_ptr<metrics::Registry> own_registry_;
  metrics::Registry* const registry_;
  KvStore* const store_;
  const LeaseOptions options_;
  const Clock& clock_;

  mutable absl::Mutex mu_;
  // The live leases by id. A lease leaves the map before it is revoked.
  absl::flat_hash_map<uint64_t, std::shared_ptr<Lease>> leases_ ABSL_GUARDED_BY(mu_);
  // Grants that passed the max_leases check and are allocating their chunk
  // or making their write key.
  size_t pending_grants_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;

  // Owned by *registry_. Counting needs no lock; granted_, released_ and
  // expired_ still change with mu_ held, next to the map change they count.
  metrics::Counter* granted_;
  metrics::Counter* renewed_;
  metrics::Counter* released_;
  metrics::Counter* expired_;
  metrics::Counter* commits_;
  metrics::Counter* aborted_commits_;

  absl::Notification stop_;
  std::thread expiry_thread_;
  // kvstore_leases_active reads leases_ under mu_; declared last so it is
  // unregistered before the map and the mutex go.
  metrics::CallbackHandle active_gauge_;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_STORAGE_LEASE_TABLE_H_
