// Copyright 2026 The kvstore Authors.

#include "server/storage/lease_table.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/protocol/layout.h"
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

}  // namespace

LeaseTable::LeaseTable(KvStore* store, LeaseOptions options)
    : store_(store), options_(std::move(options)) {
  const Limits& limits = store_->limits();
  const uint64_t largest = layout::EntryBytes(limits.max_key_bytes, limits.max_value_bytes);
  if (options_.max_lease_bytes < largest) {
    // Not fatal: such entries can still be written over TCP or gRPC.
    LOG(WARNING) << "max_lease_bytes=" << options_.max_lease_bytes
                 << " cannot hold the largest entry the limits allow (" << largest
                 << " bytes); such values cannot be PUT over RDMA";
  }
  if (options_.expire_interval > absl::ZeroDuration()) {
    expiry_thread_ = std::thread([this] { ExpiryLoop(); });
  }
}

LeaseTable::~LeaseTable() {
  stop_.Notify();
  if (expiry_thread_.joinable()) expiry_thread_.join();
  absl::flat_hash_map<uint64_t, std::shared_ptr<Lease>> remaining;
  {
    absl::MutexLock lock(&mu_);
    remaining.swap(leases_);
  }
  for (auto& [id, lease] : remaining) Revoke(lease.get());
}

absl::StatusOr<LeaseInfo> LeaseTable::Grant(uint64_t bytes, std::string owner) {
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
    ++pending_grants_;
  }
  // Allocate outside mu_: it may reclaim segments, and commits on other
  // leases should not wait for that.
  absl::StatusOr<Chunk> chunk = store_->AllocateChunk(bytes);
  absl::MutexLock lock(&mu_);
  --pending_grants_;
  if (!chunk.ok()) return chunk.status();
  LeaseInfo info;
  info.lease_id = next_id_++;
  if (next_id_ == 0) next_id_ = 1;  // 0 is never an id
  info.owner = std::move(owner);
  info.chunk = *chunk;
  info.granted_at = absl::Now();
  info.expires_at = info.granted_at + options_.ttl;
  leases_.emplace(info.lease_id, std::make_shared<Lease>(info));
  granted_.fetch_add(1, std::memory_order_relaxed);
  VLOG(1) << "lease " << info.lease_id << " granted to " << info.owner << ": [" << info.chunk.offset
          << ", +" << info.chunk.length << ")";
  return info;
}

absl::StatusOr<LeaseInfo> LeaseTable::Renew(uint64_t lease_id) {
  const absl::Time now = absl::Now();
  std::shared_ptr<Lease> lapsed;
  absl::Time expired_at;
  {
    absl::MutexLock lock(&mu_);
    auto it = leases_.find(lease_id);
    if (it == leases_.end()) return LeaseGone(lease_id, " or was released");
    Lease& lease = *it->second;
    if (now < lease.info.expires_at) {
      lease.info.expires_at = now + options_.ttl;
      renewed_.fetch_add(1, std::memory_order_relaxed);
      return lease.info;
    }
    // Past its expiry but not yet swept: end it now, as ExpireNow() would.
    expired_at = lease.info.expires_at;
    lapsed = std::move(it->second);
    leases_.erase(it);
    expired_.fetch_add(1, std::memory_order_relaxed);
  }
  Revoke(lapsed.get());
  return LeaseGone(lease_id, absl::StrCat(" ", absl::FormatDuration(now - expired_at), " ago"));
}

absl::Status LeaseTable::Release(uint64_t lease_id) {
  std::shared_ptr<Lease> lease;
  {
    absl::MutexLock lock(&mu_);
    auto it = leases_.find(lease_id);
    if (it == leases_.end()) {
      return absl::NotFoundError(absl::StrCat(
          "lease ", lease_id, " not found (released already, expired, or never granted)"));
    }
    lease = std::move(it->second);
    leases_.erase(it);
    released_.fetch_add(1, std::memory_order_relaxed);
  }
  Revoke(lease.get());
  return absl::OkStatus();
}

absl::Status LeaseTable::Commit(uint64_t lease_id, uint64_t offset, uint64_t size) {
  const absl::Time now = absl::Now();
  std::shared_ptr<Lease> lease;
  {
    absl::MutexLock lock(&mu_);
    auto it = leases_.find(lease_id);
    if (it == leases_.end()) {
      aborted_commits_.fetch_add(1, std::memory_order_relaxed);
      return LeaseGone(lease_id, " or was released");
    }
    if (now >= it->second->info.expires_at) {
      // The sweeper has not got to it yet; it is dead all the same.
      aborted_commits_.fetch_add(1, std::memory_order_relaxed);
      return LeaseGone(
          lease_id,
          absl::StrCat(" ", absl::FormatDuration(now - it->second->info.expires_at), " ago"));
    }
    lease = it->second;
  }
  // The chunk never changes after Grant(), so it is read without mu_.
  const Chunk& chunk = lease->info.chunk;
  if (size == 0 || offset < chunk.offset || size > chunk.length ||
      offset - chunk.offset > chunk.length - size) {
    return absl::InvalidArgumentError(absl::StrCat("commit range [", offset, ", +", size,
                                                   ") is not inside lease ", lease_id, "'s chunk [",
                                                   chunk.offset, ", +", chunk.length, ")"));
  }
  absl::MutexLock lock(&lease->commit_mu);
  // Revoked between the lookup above and now: its chunk may already be back
  // in the store, so publishing into it would be a use-after-free.
  if (lease->revoked) {
    aborted_commits_.fetch_add(1, std::memory_order_relaxed);
    return LeaseGone(lease_id, " during the commit");
  }
  absl::Status status = store_->Commit(offset, size);
  if (status.ok()) commits_.fetch_add(1, std::memory_order_relaxed);
  return status;
}

size_t LeaseTable::ExpireNow(absl::Time now) {
  std::vector<std::shared_ptr<Lease>> lapsed;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, lease] : leases_) {
      if (lease->info.expires_at <= now) lapsed.push_back(lease);
    }
    for (const auto& lease : lapsed) leases_.erase(lease->info.lease_id);
    expired_.fetch_add(lapsed.size(), std::memory_order_relaxed);
  }
  for (const auto& lease : lapsed) {
    VLOG(1) << "lease " << lease->info.lease_id << " of " << lease->info.owner << " expired";
    Revoke(lease.get());
  }
  return lapsed.size();
}

absl::StatusOr<LeaseInfo> LeaseTable::Lookup(uint64_t lease_id) const {
  absl::MutexLock lock(&mu_);
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) {
    return absl::NotFoundError(absl::StrCat("lease ", lease_id, " not found"));
  }
  return it->second->info;
}

LeaseCounters LeaseTable::counters() const {
  // granted, released, expired and active change together under mu_, so a
  // snapshot taken under it is consistent: granted == active + released +
  // expired (+ those dropped by the destructor).
  absl::MutexLock lock(&mu_);
  LeaseCounters c;
  c.granted = granted_.load(std::memory_order_relaxed);
  c.renewed = renewed_.load(std::memory_order_relaxed);
  c.released = released_.load(std::memory_order_relaxed);
  c.expired = expired_.load(std::memory_order_relaxed);
  c.commits = commits_.load(std::memory_order_relaxed);
  c.aborted_commits = aborted_commits_.load(std::memory_order_relaxed);
  c.active = leases_.size();
  return c;
}

void LeaseTable::Revoke(Lease* lease) {
  // Waits for a commit in progress on this lease; later ones see `revoked`.
  absl::MutexLock lock(&lease->commit_mu);
  lease->revoked = true;
  // Out of leases_, nobody else touches info any more.
  if (options_.on_revoke) options_.on_revoke(lease->info);
  store_->ReleaseChunk(lease->info.chunk);
}

void LeaseTable::ExpiryLoop() {
  while (!stop_.WaitForNotificationWithTimeout(options_.expire_interval)) {
    ExpireNow(absl::Now());
  }
}

}  // namespace server
}  // namespace kvstore
