// Copyright 2026 The kvstore Authors.
//
// LeaseTable: write leases over KvStore chunks (docs/architecture.md §4).
//
// A client that PUTs over RDMA first obtains a lease: a run of whole
// segments of the data arena that it alone may write, until an expiry time.
// It bump-allocates entries inside the chunk, writes them remotely, and then
// asks the server to publish each one with Commit(). Commit() is the only way
// an entry written under a lease becomes visible, and it refuses any entry
// that is not entirely inside a live lease's chunk.
//
// A lease ends in one of three ways: the client releases it, it expires
// (ExpireNow(), called by the background thread or by tests), or the table
// is destroyed. In every case the on_revoke hook runs first (the RDMA layer
// invalidates the lease's memory window there) and then the chunk goes back
// to the store with KvStore::ReleaseChunk(): entries committed in it stay
// live; bytes written but never committed are dead, and once nothing live is
// left the store frees the segments after its grace period. So a client that
// dies between its WRITE and its commit leaves no trace.
//
// A commit and the revocation of its lease never overlap: a commit either
// completes before the chunk is released or fails with kAborted.
//
// Errors: kInvalidArgument for bad sizes and out-of-chunk commits,
// kResourceExhausted when the table or the pool is full, kAborted for an
// expired or unknown lease on Renew()/Commit() (the client restarts the whole
// PUT with a new lease), kNotFound for Release() of an unknown lease.
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
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

// One granted lease, as reported to its holder.
struct LeaseInfo {
  // Unique within the table, never 0.
  uint64_t lease_id = 0;
  // Who asked for it (client name and peer), for logs.
  std::string owner;
  // The segments the lease covers; `chunk.length` is the requested size
  // rounded up to whole segments, and all of it may be written.
  Chunk chunk;
  absl::Time granted_at = absl::InfinitePast();
  absl::Time expires_at = absl::InfinitePast();
  // Remote-write key covering only this chunk. Always 0 for now: the RDMA
  // layer will bind a memory window at grant time and set it.
  uint32_t write_rkey = 0;
};

struct LeaseOptions {
  // How long a lease lives without a Renew().
  absl::Duration ttl = absl::Seconds(10);
  // Largest lease a client may ask for. Must hold the largest entry the
  // store's limits allow (64 MiB value + 1 KiB key + header with the default
  // limits); the constructor logs a warning when it does not.
  uint64_t max_lease_bytes = (64ull << 20) + (4ull << 10);
  // Most leases alive at once.
  size_t max_leases = 1024;
  // How often the background thread calls ExpireNow(); zero disables the
  // thread (tests then call ExpireNow() themselves).
  absl::Duration expire_interval = absl::Milliseconds(100);
  // Called for every lease that ends (released, expired or dropped by the
  // destructor) before its chunk goes back to the store. Runs on the thread
  // that ended the lease, with no LeaseTable lock held except that lease's
  // own commit lock: it must not call Commit() on that lease. May be empty.
  std::function<void(const LeaseInfo&)> on_revoke;
};

// granted, released, expired and active are one consistent snapshot:
// granted == active + released + expired + leases dropped by the destructor.
struct LeaseCounters {
  uint64_t granted = 0;
  uint64_t renewed = 0;
  uint64_t released = 0;         // by Release()
  uint64_t expired = 0;          // by ExpireNow() or a Renew() that found it expired
  uint64_t commits = 0;          // successful Commit() calls
  uint64_t aborted_commits = 0;  // Commit() refused for an expired/unknown lease
  uint64_t active = 0;
};

class LeaseTable {
 public:
  // `store` must outlive the table. Starts the expiry thread when
  // options.expire_interval > 0.
  LeaseTable(KvStore* store, LeaseOptions options);
  // Stops the expiry thread and revokes every remaining lease (on_revoke
  // runs for each).
  ~LeaseTable();
  LeaseTable(const LeaseTable&) = delete;
  LeaseTable& operator=(const LeaseTable&) = delete;

  // Grants a lease over a fresh chunk of at least `bytes` bytes, expiring
  // options().ttl from now.
  // kInvalidArgument if bytes == 0 or bytes > max_lease_bytes (the message
  // names the limit); kResourceExhausted when max_leases are alive or the
  // pool has no run of free segments that large.
  absl::StatusOr<LeaseInfo> Grant(uint64_t bytes, std::string owner);

  // Moves the lease's expiry to options().ttl from now and returns it.
  // kAborted if the lease is unknown or already expired (an expired lease is
  // revoked on the spot).
  absl::StatusOr<LeaseInfo> Renew(uint64_t lease_id);

  // Ends the lease and returns its chunk to the store. Entries committed in
  // it stay live. kNotFound if the lease is unknown (never granted, released
  // already, or expired).
  absl::Status Release(uint64_t lease_id);

  // THE commit entry point for entries written under a lease: publishes the
  // entry at [offset, offset + size) of the data arena with KvStore::Commit()
  // after checking that the lease is alive and the range lies entirely inside
  // its chunk. On any failure nothing is published.
  // kAborted "lease N expired ..." if the lease is unknown or past its
  // expiry; kInvalidArgument if the range is empty or leaves the chunk;
  // otherwise whatever KvStore::Commit() returns (kInvalidArgument/kDataLoss
  // for a malformed entry, kResourceExhausted for a full index).
  absl::Status Commit(uint64_t lease_id, uint64_t offset, uint64_t size);

  // Revokes every lease whose expiry is at or before `now`. Returns how many.
  size_t ExpireNow(absl::Time now);

  // The lease while it is in the table (possibly past its expiry but not
  // yet swept); kNotFound otherwise.
  absl::StatusOr<LeaseInfo> Lookup(uint64_t lease_id) const;

  LeaseCounters counters() const;
  const LeaseOptions& options() const { return options_; }

 private:
  struct Lease {
    explicit Lease(LeaseInfo i) : info(std::move(i)) {}
    // lease_id, owner, chunk and write_rkey never change after Grant();
    // expires_at is guarded by LeaseTable::mu_.
    LeaseInfo info;
    // Held across KvStore::Commit() and across revocation, so a chunk is
    // never released in the middle of a commit into it.
    absl::Mutex commit_mu;
    bool revoked ABSL_GUARDED_BY(commit_mu) = false;
  };

  // Runs on_revoke and releases the chunk.
  // REQUIRES: `lease` has been removed from leases_; mu_ not held.
  void Revoke(Lease* lease);
  void ExpiryLoop();

  KvStore* const store_;
  const LeaseOptions options_;

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Lease>> leases_ ABSL_GUARDED_BY(mu_);
  // Grants that passed the max_leases check and are allocating their chunk.
  size_t pending_grants_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;

  std::atomic<uint64_t> granted_{0}, renewed_{0}, released_{0}, expired_{0}, commits_{0},
      aborted_commits_{0};

  absl::Notification stop_;
  std::thread expiry_thread_;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_STORAGE_LEASE_TABLE_H_
