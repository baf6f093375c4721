// Copyright 2026 The kvstore Authors.
//
// The lease lifecycle and the lock order are described in lease_table.h.

#include "server/storage/lease_table.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/protocol/layout.h"
#include "common/status_macros.h"
#include "common/sync/thread_name.h"
#include "glog/logging.h"

namespace kvstore {
namespace server {
namespace {

// The message of every kAborted commit/renew: the client must restart the
// whole PUT with a new lease.
absl::Status LeaseGone(uint64_t lease_id, absl::string_view detail) {
  return absl::AbortedError(
      absl::StrCat("lease ", lease_id, " expired", detail, "; restart the PUT with a new lease"));
}

// "... expired 1.5s ago": how long ago a lease found past its expiry ended.
std::string Ago(absl::Duration now, absl::Duration expired_at) {
  return absl::StrCat(" ", absl::FormatDuration(now - expired_at), " ago");
}

}  // namespace

absl::Status LeaseOptions::Validate() const {
  if (ttl < kMinTtl || ttl > kMaxTtl) {
    return absl::InvalidArgumentError(absl::StrCat("lease TTL ", absl::FormatDuration(ttl),
                                                   " is outside [", absl::FormatDuration(kMinTtl),
                                                   ", ", absl::FormatDuration(kMaxTtl), "]"));
  }
  return absl::OkStatus();
}

LeaseTable::LeaseTable(KvStore* store, LeaseOptions options)
    : own_registry_(options.registry == nullptr ? std::make_unique<metrics::Registry>() : nullptr),
      registry_(options.registry != nullptr ? options.registry : own_registry_.get()),
      store_(store),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : Clock::Real()) {
  RegisterMetrics();
  // A lease must hold one whole entry: a client cannot split a value across
  // leases, so a smaller limit silently moves the largest values to TCP.
  const Limits& limits = store_->limits();
  const uint64_t largest = layout::EntryBytes(limits.max_key_bytes, limits.max_value_bytes);
  if (options_.max_lease_bytes < largest) {
    // Not fatal: such entries can still be written over TCP or gRPC.
    LOG(WARNING) << "max_lease_bytes=" << options_.max_lease_bytes
                 << " cannot hold the largest entry the limits allow (" << largest
                 << " bytes); such values cannot be PUT over RDMA";
  }
  if (options_.expire_interval > absl::ZeroDuration()) {
    expiry_thread_ = std::thread([this] {
      NameThread("kv-lease-expiry");
      ExpiryLoop();
    });
  }
}

LeaseTable::~LeaseTable() {
  // The expiry thread goes first, so nothing else ends leases concurrently.
  stop_.Notify();
  if (expiry_thread_.joinable()) expiry_thread_.join();
  absl::flat_hash_map<uint64_t, std::shared_ptr<Lease>> remaining;
  {
    absl::MutexLock lock(&mu_);
    remaining.swap(leases_);
  }
  // Not counted: the destructor's leases are the "dropped" term of the
  // granted/active/released/expired identity (lease_table.h).
  for (auto& [id, lease] : remaining) Revoke(lease.get());
}

// Five steps, each with its own lock scope: reserve a place under
// max_leases, allocate the chunk (no lock), assign an id, make the key (no
// lock), publish. Every early return undoes exactly what was done before it.
absl::StatusOr<LeaseInfo> LeaseTable::Grant(uint64_t bytes, std::string owner,
                                            const KeyMaker& make_key, absl::Duration space_wait) {
  // Size checks first: they cost nothing and need no lock.
  if (bytes == 0) return absl::InvalidArgumentError("lease size must be positive");
  if (bytes > options_.max_lease_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lease of ", bytes, " bytes is over the limit max_lease_bytes=", options_.max_lease_bytes));
  }
  {
    absl::MutexLock lock(&mu_);
    if (leases_.size() + pending_grants_ >= options_.max_leases) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "too many leases: ", leases_.size(), " alive, limit max_leases=", options_.max_leases,
          "; release leases or retry later"));
    }
    // Holds the lease's place under max_leases until it is in leases_.
    ++pending_grants_;
  }
  // Allocate outside mu_: it may reclaim segments, and commits on other
  // leases should not wait for that.
  absl::StatusOr<Chunk> chunk = store_->AllocateChunk(bytes, space_wait);
  LeaseInfo info;
  {
    absl::MutexLock lock(&mu_);
    // A failed allocation ends the reservation here; otherwise it ends when
    // the lease is published or its key fails.
    if (!chunk.ok()) {
      --pending_grants_;
      return chunk.status();
    }
    info.lease_id = next_id_++;
    if (next_id_ == 0) next_id_ = 1;  // 0 is never an id
  }
  info.owner = std::move(owner);
  info.chunk = *chunk;
  // The lease's life starts now, before the key is made, as it did when the
  // key was bound after the grant: a slow bind eats into the TTL.
  // Expiry is decided on the steady clock; the wall-clock times are what the
  // holder is told.
  info.deadline = clock_.Steady() + options_.ttl;
  info.granted_at = clock_.Wall();
  info.expires_at = info.granted_at + options_.ttl;

  // The key is made before the lease is published, so a lease in the table
  // is complete: commits and revocation never see half a lease. Outside mu_:
  // the RDMA layer waits up to seconds for its bind to complete.
  std::unique_ptr<LeaseWriteKey> key;
  if (make_key) {
    absl::StatusOr<std::unique_ptr<LeaseWriteKey>> made = make_key(info);
    if (made.ok() && *made == nullptr) made = absl::InternalError("KeyMaker made no key");
    if (!made.ok()) {
      // The lease was never published, so nobody can be committing into
      // the chunk: it goes straight back (no write key to revoke).
      store_->ReleaseChunk(info.chunk);
      absl::MutexLock lock(&mu_);
      --pending_grants_;
      // Counted as a lease granted and released at once, which is what it
      // was when keys were bound after the grant: Stats stay comparable.
      granted_->Increment();
      released_->Increment();
      return made.status();
    }
    key = std::move(*made);
    info.write_rkey = key->rkey();
  }

  // Publish: from here on commits, renewals and the sweeper can see it.
  absl::MutexLock lock(&mu_);
  --pending_grants_;
  leases_.emplace(info.lease_id, std::make_shared<Lease>(info, std::move(key)));
  granted_->Increment();
  VLOG(1) << "lease " << info.lease_id << " granted to " << info.owner << ": [" << info.chunk.offset
          << ", +" << info.chunk.length << ")";
  return info;
}

absl::StatusOr<LeaseInfo> LeaseTable::Renew(uint64_t lease_id, uint64_t connection_id) {
  const absl::Duration now = clock_.Steady();
  std::shared_ptr<Lease> lapsed;
  absl::Duration expired_at;
  {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<Lease> lease = FindLocked(lease_id);
    if (lease == nullptr) return LeaseGone(lease_id, " or was released");
    // The holder check comes first: another connection learns nothing about
    // the lease, and cannot make it be revoked below.
    KV_RETURN_IF_ERROR(CheckHolder(*lease, connection_id, "RDMA connection"));
    if (now < lease->deadline) {
      // Still alive: the new expiry counts from now, not from the old one.
      lease->deadline = now + options_.ttl;
      lease->expires_at = clock_.Wall() + options_.ttl;
      renewed_->Increment();
      return Snapshot(*lease);
    }
    // Past its expiry but not yet swept: end it now, as ExpireNow() would.
    expired_at = lease->deadline;
    lapsed = RemoveLocked(lease_id, expired_);
  }
  // Outside mu_: revocation waits for commits and for the NIC.
  Revoke(lapsed.get());
  return LeaseGone(lease_id, Ago(now, expired_at));
}

absl::Status LeaseTable::Release(uint64_t lease_id, uint64_t connection_id) {
  std::shared_ptr<Lease> lease;
  {
    absl::MutexLock lock(&mu_);
    lease = FindLocked(lease_id);
    if (lease == nullptr) {
      return absl::NotFoundError(absl::StrCat(
          "lease ", lease_id, " not found (released already, expired, or never granted)"));
    }
    // Only the holder may end a lease with a key: another client could
    // otherwise cut off a PUT in progress.
    KV_RETURN_IF_ERROR(CheckHolder(*lease, connection_id, "RDMA connection"));
    RemoveLocked(lease_id, released_);
  }
  // `lease` keeps the record alive until Revoke() is done with it.
  Revoke(lease.get());
  return absl::OkStatus();
}

size_t LeaseTable::ReleaseHeldBy(uint64_t connection_id) {
  // kNoConnection holds nothing, whatever the keys say.
  if (connection_id == kNoConnection) return 0;
  std::vector<std::shared_ptr<Lease>> held;
  {
    absl::MutexLock lock(&mu_);
    // A scan of every lease: connections end rarely, and a second index by
    // connection would be a second record of who holds what.
    for (const auto& [id, lease] : leases_) {
      if (lease->write_key != nullptr && lease->write_key->connection_id() == connection_id) {
        held.push_back(lease);
      }
    }
    // Erased and counted under one lock hold, as RemoveLocked() does.
    for (const auto& lease : held) leases_.erase(lease->id);
    released_->Increment(held.size());
  }
  for (const auto& lease : held) Revoke(lease.get());
  return held.size();
}

absl::Status LeaseTable::Commit(uint64_t lease_id, uint64_t offset, uint64_t size) {
  const absl::Duration now = clock_.Steady();
  std::shared_ptr<Lease> lease;
  {
    absl::MutexLock lock(&mu_);
    lease = FindLocked(lease_id);
    if (lease == nullptr) {
      aborted_commits_->Increment();
      return LeaseGone(lease_id, " or was released");
    }
    if (now >= lease->deadline) {
      // The sweeper has not got to it yet; it is dead all the same.
      aborted_commits_->Increment();
      return LeaseGone(lease_id, Ago(now, lease->deadline));
    }
  }
  // mu_ is released before the store is touched: a large commit (checksum
  // of a 64 MiB value) must not block every other lease.
  return CommitLocked(*lease, offset, size,
                      [this](uint64_t o, uint64_t n) { return store_->Commit(o, n); });
}

absl::Status LeaseTable::CommitFrom(uint64_t connection_id, uint64_t lease_id, uint64_t offset,
                                    uint64_t size) {
  return CommitFromWith(connection_id, lease_id, offset, size,
                        [this](uint64_t o, uint64_t n) { return store_->Commit(o, n); });
}

absl::Status LeaseTable::CommitFromWith(uint64_t connection_id, uint64_t lease_id, uint64_t offset,
                                        uint64_t size, PublishFn publish) {
  KV_ASSIGN_OR_RETURN(std::shared_ptr<Lease> lease, FindForCommit(connection_id, lease_id));
  return CommitLocked(*lease, offset, size, publish);
}

absl::StatusOr<std::shared_ptr<LeaseTable::Lease>> LeaseTable::FindForCommit(uint64_t connection_id,
                                                                             uint64_t lease_id) {
  const absl::Duration now = clock_.Steady();
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Lease> lease = FindLocked(lease_id);
  // Refusals before the expiry check are not aborted_commits: the commit
  // never reached a lease it could have used (docs/protocol.md §4 lists
  // these messages).
  if (lease == nullptr || lease->write_key == nullptr) {
    return absl::AbortedError(absl::StrCat(
        "lease ", lease_id, " is not active (expired, released or never granted): redo the PUT"));
  }
  // A foreign connection is refused even for an expired lease: it must not
  // learn (or trigger) anything about a lease it does not hold.
  KV_RETURN_IF_ERROR(CheckHolder(*lease, connection_id, "connection"));
  if (now >= lease->deadline) {
    aborted_commits_->Increment();
    return LeaseGone(lease_id, Ago(now, lease->deadline));
  }
  return lease;
}

absl::Status LeaseTable::CheckRange(const Lease& lease, uint64_t offset, uint64_t size) {
  // The chunk never changes after Grant(), so it is read without a lock.
  const Chunk& chunk = lease.chunk;
  // Written so that no sum can overflow: offset and size come off the wire.
  if (size == 0 || offset < chunk.offset || size > chunk.length ||
      offset - chunk.offset > chunk.length - size) {
    return absl::InvalidArgumentError(absl::StrCat("commit range [", offset, ", +", size,
                                                   ") is not inside lease ", lease.id, "'s chunk [",
                                                   chunk.offset, ", +", chunk.length, ")"));
  }
  return absl::OkStatus();
}

absl::Status LeaseTable::CommitLocked(Lease& lease, uint64_t offset, uint64_t size,
                                      PublishFn publish) {
  KV_RETURN_IF_ERROR(CheckRange(lease, offset, size));
  absl::MutexLock lock(&lease.commit_mu);
  // Revoked between the look-up and now: its chunk may already be back in
  // the store, so publishing into it would be a use-after-free.
  if (lease.revoked) {
    aborted_commits_->Increment();
    return LeaseGone(lease.id, " during the commit");
  }
  absl::Status status = publish(offset, size);
  if (status.ok()) commits_->Increment();
  return status;
}

absl::StatusOr<bool> LeaseTable::StartCommitFrom(uint64_t connection_id, uint64_t lease_id,
                                                 uint64_t offset, uint64_t size,
                                                 std::function<void(absl::Status)> done) {
  KV_ASSIGN_OR_RETURN(std::shared_ptr<Lease> lease, FindForCommit(connection_id, lease_id));
  KV_RETURN_IF_ERROR(CheckRange(*lease, offset, size));
  {
    // Counted before the store is asked, and under commit_mu only while
    // `revoked` is looked at: once Revoke() has set it, nothing more is
    // counted in. `done` may run before StartCommit() returns.
    absl::MutexLock lock(&lease->commit_mu);
    if (lease->revoked) {
      aborted_commits_->Increment();
      return LeaseGone(lease->id, " during the commit");
    }
    absl::MutexLock count(&lease->started_mu);
    ++lease->started;
  }
  auto ended = [this, lease, done = std::move(done)](absl::Status status) {
    if (status.ok()) commits_->Increment();
    // Counted out after `done`: the lease may end once this is zero, and
    // `done` runs before that (the contract above). Never commit_mu here
    // (see Lease::started_mu).
    done(std::move(status));
    absl::MutexLock count(&lease->started_mu);
    --lease->started;
  };
  if (store_->StartCommit(offset, size, /*verify_checksum=*/true, std::move(ended))) return true;
  absl::MutexLock count(&lease->started_mu);
  --lease->started;
  return false;
}

size_t LeaseTable::ExpireNow(absl::Duration steady_now) {
  std::vector<std::shared_ptr<Lease>> lapsed;
  {
    // Collected first, erased after, so the loop never erases under its own
    // iterator; the revocations then run without mu_.
    absl::MutexLock lock(&mu_);
    for (const auto& [id, lease] : leases_) {
      if (lease->deadline <= steady_now) lapsed.push_back(lease);
    }
    for (const auto& lease : lapsed) leases_.erase(lease->id);
    expired_->Increment(lapsed.size());
  }
  for (const auto& lease : lapsed) {
    VLOG(1) << "lease " << lease->id << " of " << lease->owner << " expired";
    Revoke(lease.get());
  }
  return lapsed.size();
}

absl::StatusOr<LeaseInfo> LeaseTable::Lookup(uint64_t lease_id) const {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Lease> lease = FindLocked(lease_id);
  if (lease == nullptr) {
    return absl::NotFoundError(absl::StrCat("lease ", lease_id, " not found"));
  }
  return Snapshot(*lease);
}

absl::flat_hash_set<uint64_t> LeaseTable::KeyHolders() const {
  // One set per call, so the caller (the idle prober) asks once per pass
  // instead of once per connection.
  absl::flat_hash_set<uint64_t> holders;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, lease] : leases_) {
    if (lease->write_key != nullptr) holders.insert(lease->write_key->connection_id());
  }
  return holders;
}

LeaseTable::Holdings LeaseTable::HeldBy(const absl::flat_hash_set<uint64_t>& connections) const {
  // A scan, like KeyHolders(): called once per grant, over at most
  // max_leases records, and a second index would be a second record.
  Holdings h;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, lease] : leases_) {
    if (lease->write_key != nullptr && connections.contains(lease->write_key->connection_id())) {
      h.leases++;
      h.bytes += lease->chunk.length;
    }
  }
  return h;
}

void LeaseTable::RegisterMetrics() {
  metrics::Registry& r = *registry_;
  granted_ = r.AddCounter("kvstore_leases_granted_total", "Write leases granted.");
  renewed_ = r.AddCounter("kvstore_leases_renewed_total", "Write leases renewed.");
  released_ = r.AddCounter("kvstore_leases_released_total",
                           "Write leases released by their holder (or a failed key).");
  expired_ = r.AddCounter("kvstore_leases_expired_total", "Write leases that ran out.");
  commits_ = r.AddCounter("kvstore_lease_commits_total", "Commits into leased chunks.");
  aborted_commits_ = r.AddCounter("kvstore_lease_aborted_commits_total",
                                  "Commits refused because the lease expired or was unknown.");
  // The map is the one record of live leases; read it at scrape time.
  active_gauge_ = r.AddCallbackGauge("kvstore_leases_active", "Write leases alive.", {}, [this] {
    absl::MutexLock lock(&mu_);
    return static_cast<int64_t>(leases_.size());
  });
}

std::shared_ptr<LeaseTable::Lease> LeaseTable::FindLocked(uint64_t lease_id) const {
  // A copy of the pointer: the caller may use the record after mu_ is gone.
  auto it = leases_.find(lease_id);
  return it == leases_.end() ? nullptr : it->second;
}

absl::Status LeaseTable::CheckHolder(const Lease& lease, uint64_t connection_id,
                                     absl::string_view connection_noun) {
  // A lease without a write key cannot be written remotely, so it has no
  // holder to protect (and the server may have no RDMA at all).
  if (lease.write_key == nullptr || lease.write_key->connection_id() == connection_id) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat("lease ", lease.id, " belongs to another ", connection_noun));
}

LeaseInfo LeaseTable::Snapshot(const Lease& lease) const {
  // The rkey is read from the key itself: the lease keeps no copy of it.
  LeaseInfo info;
  info.lease_id = lease.id;
  info.owner = lease.owner;
  info.chunk = lease.chunk;
  info.granted_at = lease.granted_at;
  info.expires_at = lease.expires_at;
  info.deadline = lease.deadline;
  info.write_rkey = lease.write_key != nullptr ? lease.write_key->rkey() : 0;
  return info;
}

std::shared_ptr<LeaseTable::Lease> LeaseTable::RemoveLocked(uint64_t lease_id,
                                                            metrics::Counter* counter) {
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return nullptr;
  std::shared_ptr<Lease> lease = std::move(it->second);
  leases_.erase(it);
  // Under mu_, with the erase, so the count and the map change together.
  counter->Increment();
  return lease;
}

void LeaseTable::Revoke(Lease* lease) {
  {
    // Waits for a commit in progress on this lease; later ones see
    // `revoked` and fail at once.
    absl::MutexLock lock(&lease->commit_mu);
    lease->revoked = true;
  }
  {
    // And for the started ones (StartCommitFrom) to end: their entries are
    // published into the chunk when their round ends. None is counted in
    // after `revoked` was set.
    absl::MutexLock count(&lease->started_mu);
    lease->started_mu.Await(absl::Condition(&NoCommitStarted, lease));
  }
  // Outside commit_mu: revoking an RDMA key waits for the NIC (up to 5 s),
  // and a commit that looked the lease up just before it left the table
  // must not wait that long behind it (the RDMA commit poller serves every
  // client). No commit can publish into the chunk any more: it was marked
  // revoked above, and Revoke() runs once per lease.
  // The key goes before the chunk: once ReleaseChunk() has run, the chunk
  // may be handed to another lease, and no write from this one may land.
  if (lease->write_key != nullptr) lease->write_key->Revoke();
  store_->ReleaseChunk(lease->chunk);
}

void LeaseTable::ExpiryLoop() {
  // Sleeps on stop_, so the destructor wakes it at once.
  while (!stop_.WaitForNotificationWithTimeout(options_.expire_interval)) {
    ExpireNow(clock_.Steady());
  }
}

}  // namespace server
}  // namespace kvstore
