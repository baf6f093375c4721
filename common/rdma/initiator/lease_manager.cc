// Copyright 2026 The kvstore Authors.
//
// Locking: mu_ guards every Lease and the cur_/next_/retired_ lists. It is
// never held across an RPC: the grant, renew and release calls drop it, and
// the state is re-checked after they return, since other threads may have
// moved leases between the lists meanwhile.

#include "common/rdma/initiator/lease_manager.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kvstore {
namespace initiator {

LeaseManager::LeaseManager(control::ControlClient* control, OpEngine* engine,
                           const LeaseCounters& counters, control::SessionScope scope,
                           uint64_t connection_id, std::string client_name, uint64_t lease_bytes,
                           absl::Duration lease_ttl, absl::Duration rpc_timeout)
    : control_(control),
      engine_(engine),
      counters_(counters),
      scope_(scope),
      connection_id_(connection_id),
      client_name_(std::move(client_name)),
      lease_bytes_(lease_bytes),
      lease_ttl_(lease_ttl),
      rpc_timeout_(rpc_timeout) {}

// The owner normally calls Shutdown() first (deciding whether to release);
// this only makes sure the thread never outlives the manager.
LeaseManager::~LeaseManager() { Shutdown(/*release=*/false); }

// Started only once the path is fully built: the thread calls the engine.
void LeaseManager::Start() {
  thread_ = std::thread([this] { Loop(); });
}

// Safe to call twice; the second call finds no thread and no leases.
void LeaseManager::Shutdown(bool release) {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  if (!release) return;
  // Gives the leases back so the server frees them now rather than at
  // expiry. The thread is gone: nothing else touches the leases.
  std::vector<std::shared_ptr<Lease>> all;
  {
    absl::MutexLock lock(&mu_);
    all = retired_;
    if (cur_) all.push_back(cur_);
    if (next_) all.push_back(next_);
    retired_.clear();
    cur_ = next_ = nullptr;
  }
  for (auto& l : all) Release(*l);
}

// Called without mu_ held (it makes an RPC), from Reserve() or the thread.
absl::StatusOr<std::shared_ptr<Lease>> LeaseManager::Grant(uint64_t bytes) {
  const absl::Time asked = absl::Now();
  absl::StatusOr<v1::Lease> granted =
      control_->GrantLease(scope_, bytes, client_name_, connection_id_, asked + rpc_timeout_);
  if (!granted.ok()) return BreakIfPathLost(granted.status());
  if (granted->write_rkey() == 0) return absl::InternalError("lease without a write key");
  auto l = std::make_shared<Lease>();
  l->id = granted->lease_id();
  l->arena_offset = granted->arena_offset();
  l->length = granted->length();
  l->write_addr = granted->write_addr();
  l->rkey = granted->write_rkey();
  // Measured from before the request: never later than the server's view.
  l->expires = asked + lease_ttl_;
  counters_.granted->Increment();
  return l;
}

// A stale epoch (the server restarted), a server that is gone, or a session
// the server expired (the client sat idle past its TTL): this path is done,
// and the client handshakes again as for a restart. Other errors (quota,
// pool full) are the request's own.
absl::Status LeaseManager::BreakIfPathLost(absl::Status s) {
  if (absl::IsUnavailable(s)) {
    engine_->MarkBroken(s);
  } else if (control::IsSessionLost(s)) {
    s = absl::UnavailableError(absl::StrCat("server session lost (", s.message(), ")"));
    engine_->MarkBroken(s);
  }
  return s;
}

// Best effort: a failed release only leaves the lease to expire on the
// server. Counted only when the server confirmed it.
void LeaseManager::Release(const Lease& l) {
  if (control_->ReleaseLease(scope_, l.id, connection_id_, absl::Now() + rpc_timeout_).ok()) {
    counters_.released->Increment();
  }
}

// Bump allocation: entries are never freed inside a lease, the whole lease
// is released once drained. Four rounds bound the loop when leases keep
// turning out unusable (e.g. each one expiring before it can be used).
absl::StatusOr<LeaseSpace> LeaseManager::Reserve(uint64_t size) {
  absl::MutexLock lock(&mu_);
  for (int round = 0; round < 4; ++round) {
    const absl::Time now = absl::Now();
    // Leave a margin so a commit never races the expiry.
    auto usable = [&](const std::shared_ptr<Lease>& l) {
      return l && !l->dead && l->used + size <= l->length && l->expires - now > lease_ttl_ / 4;
    };
    if (usable(cur_)) {
      LeaseSpace sp{cur_, cur_->arena_offset + cur_->used, cur_->write_addr + cur_->used};
      cur_->used += size;
      cur_->inflight++;
      // Half used: have the thread grant the next one before this runs out.
      if (!next_ && cur_->used > cur_->length / 2) refill_wanted_ = true;
      return sp;
    }
    if (cur_) retired_.push_back(std::move(cur_));
    cur_ = nullptr;
    if (usable(next_)) {
      cur_ = std::move(next_);
      next_ = nullptr;
      continue;
    }
    // Nothing ready: grant one now (rare when the refill keeps up). The
    // lock is dropped for the RPC so other threads' commits can finish.
    const uint64_t want = std::max(size, lease_bytes_);
    mu_.Unlock();
    auto l = Grant(want);
    mu_.Lock();
    if (!l.ok()) return l.status();
    if (cur_) retired_.push_back(std::move(cur_));
    cur_ = *l;
  }
  return absl::UnavailableError("could not obtain a write lease");
}

// The in-flight count keeps a retired lease from being released while a
// commit into it may still be on its way.
void LeaseManager::Finish(const LeaseSpace& space, const absl::Status& result) {
  absl::MutexLock lock(&mu_);
  space.lease->inflight--;
  if (result.code() == absl::StatusCode::kAborted) space.lease->dead = true;
}

// Stops on Shutdown() or once the path broke (the server is gone or has a
// new epoch: its leases are void).
void LeaseManager::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    // Wakes for a refill at once, otherwise every 50 ms to renew and release.
    auto wake = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || refill_wanted_; };
    mu_.AwaitWithTimeout(absl::Condition(&wake), absl::Milliseconds(50));
    if (stopping_ || engine_->broken()) break;
    RefillLocked();
    RenewLocked();
    ReleaseDrainedLocked();
  }
}

// Grants the next lease ahead of need, so PUTs rarely wait for an RPC.
void LeaseManager::RefillLocked() {
  if (refill_wanted_ && !next_) {
    refill_wanted_ = false;
    mu_.Unlock();
    auto l = Grant(lease_bytes_);
    mu_.Lock();
    if (l.ok()) {
      // A Reserve() may have granted one meanwhile: keep it, retire ours.
      if (next_)
        retired_.push_back(*l);
      else
        next_ = *l;
    }
  }
  refill_wanted_ = false;
}

// Only cur_ and next_ are renewed: retired leases take no new entries; a
// commit into one that expired is refused (kAborted) and redone elsewhere.
void LeaseManager::RenewLocked() {
  const absl::Time now = absl::Now();
  for (std::shared_ptr<Lease>* lp : {&cur_, &next_}) {
    std::shared_ptr<Lease> l = *lp;
    // Renewed once half the TTL is gone, so a slow RPC still lands in time.
    if (!l || l->dead || l->expires - now > lease_ttl_ / 2) continue;
    mu_.Unlock();
    const absl::Time asked = absl::Now();
    const absl::Status s =
        control_->RenewLease(scope_, l->id, connection_id_, asked + rpc_timeout_);
    // A renewal refused for a lost session breaks the whole path (then
    // Loop() stops), not just this lease: every later RPC would be refused
    // too. Other failures only cost this lease, as before sessions existed.
    if (control::IsSessionLost(s)) (void)BreakIfPathLost(s);
    mu_.Lock();
    if (s.ok()) {
      l->expires = asked + lease_ttl_;
      counters_.renewed->Increment();
    } else {
      l->dead = true;
    }
  }
}

// Releases retired leases with no commit in flight, outside the lock.
void LeaseManager::ReleaseDrainedLocked() {
  std::vector<std::shared_ptr<Lease>> drained;
  for (auto it = retired_.begin(); it != retired_.end();) {
    if ((*it)->inflight == 0) {
      drained.push_back(std::move(*it));
      it = retired_.erase(it);
    } else {
      ++it;
    }
  }
  if (!drained.empty()) {
    mu_.Unlock();
    for (auto& l : drained) Release(*l);
    mu_.Lock();
  }
}

}  // namespace initiator
}  // namespace kvstore
