// Copyright 2026 The kvstore Authors.

#include "server/cluster/membership/membership.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/cluster/cluster_map.h"
#include "common/failpoint/failpoint.h"
#include "common/status_macros.h"
#include "common/sync/thread_name.h"
#include "glog/logging.h"
#include "server/cluster/membership/etcd_keys.h"

namespace kvstore {
namespace server {
namespace {

// Backoff after a failed map read or watch: short, etcd usually comes back
// quickly, and a fenced node is waiting for it.
constexpr absl::Duration kRetryDelay = absl::Milliseconds(200);

// How long Register() waits for an earlier incarnation's member key to go
// (its lease to expire), in TTLs of this node: etcd may have raised that
// lease to its minimum TTL, and the earlier process may have renewed it
// just before it died.
constexpr int kRegisterWaitTtls = 3;

// The map thread asks its watch for a progress notice this often, in parts
// of the TTL, and drops a watch that stayed silent for a third of the TTL.
constexpr int kProgressPerTtl = 6;

}  // namespace

Membership::Membership(etcd::EtcdClient* etcd, ClusterState* state, FencePage* fence,
                       MembershipOptions options)
    : etcd_(etcd),
      state_(state),
      fence_(fence),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : Clock::Real()),
      member_key_(etcd_keys::MemberKey(options_.cluster_name, options_.self.node_id())),
      map_key_(etcd_keys::MapKey(options_.cluster_name)),
      listener_(std::make_shared<ListenerLink>()) {
  // After a lease lapse the state is fenced, and stays so until this
  // Membership's lease is granted (Register: Renewed unfences).
  fenced_ = state_->fenced();
}

absl::StatusOr<std::unique_ptr<Membership>> Membership::Start(etcd::EtcdClient* etcd,
                                                              ClusterState* state, FencePage* fence,
                                                              MembershipOptions options) {
  if (options.ttl < absl::Seconds(1) || options.fence_margin < absl::ZeroDuration() ||
      options.fence_margin >= options.ttl) {
    return absl::InvalidArgumentError(
        "membership: ttl must be at least 1s and fence_margin in [0, ttl)");
  }
  if (options.self.node_id().empty()) {
    return absl::InvalidArgumentError("membership: empty node id");
  }
  std::unique_ptr<Membership> m(new Membership(etcd, state, fence, std::move(options)));
  // Every installed map, whoever installs it, reaches the fence page and
  // the member key. The link is cut in Shutdown(): ClusterState outlives us.
  m->listener_->target = m.get();
  state->AddListener([link = m->listener_](const cluster::ClusterMapView& view) {
    absl::MutexLock lock(&link->mu);
    if (link->target != nullptr) link->target->MapInstalled(view);
  });
  // A released hold of a new lead (ClusterState::ReleaseHold) may let the
  // fence page show the map epoch again. Under the same link mutex as
  // MapInstalled, so the page always ends on the newest answer.
  state->AddHoldListener([link = m->listener_] {
    absl::MutexLock lock(&link->mu);
    if (link->target != nullptr)
      link->target->fence_->set_map_epoch(link->target->state_->FenceEpoch());
  });
  KV_RETURN_IF_ERROR(m->Register());
  int64_t revision = 0;
  absl::Status read = m->ReadMap(&revision);
  if (!read.ok()) {
    m->Shutdown();
    return read;
  }
  m->keepalive_ = std::thread([p = m.get()] {
    NameThread("kv-keepalive");
    p->KeepAliveLoop();
  });
  m->watchdog_ = std::thread([p = m.get()] {
    NameThread("kv-lease-watch");
    p->WatchdogLoop();
  });
  m->map_thread_ = std::thread([p = m.get(), revision] {
    NameThread("kv-map-watch");
    p->MapLoop(revision);
  });
  return m;
}

Membership::~Membership() { Shutdown(); }

absl::Status Membership::Register() {
  // Never over another incarnation's key: that process may still be alive
  // and renewing its own lease, and overwriting its key would detach it
  // from the key the controller watches. Wait for that lease to end.
  const absl::Duration wait_until = clock_.Steady() + options_.ttl * kRegisterWaitTtls;
  for (bool logged = false;; logged = true) {
    KV_ASSIGN_OR_RETURN(std::optional<etcd::KeyValue> held, etcd_->Get(member_key_));
    if (!held.has_value()) break;
    if (!logged) {
      LOG(WARNING) << "membership: " << member_key_ << " is held by lease "
                   << absl::StrCat(absl::Hex(held->lease))
                   << " (an earlier incarnation of this node); waiting for it to expire";
    }
    if (clock_.Steady() >= wait_until) {
      return absl::FailedPreconditionError(
          absl::StrCat("membership: ", member_key_, " is still held by lease ",
                       absl::StrCat(absl::Hex(held->lease)), ": another process with node id ",
                       options_.self.node_id(), " is alive; not registering over it"));
    }
    if (!Sleep(kRetryDelay)) return absl::CancelledError("membership: stopped while registering");
  }
  const absl::Duration sent = clock_.Steady();
  KV_ASSIGN_OR_RETURN(lease_, etcd_->GrantLease(options_.ttl));
  options_.self.set_incarnation(static_cast<uint64_t>(lease_));
  state_->set_process_id(options_.self.process_id());
  state_->set_incarnation(static_cast<uint64_t>(lease_));
  // Registering again (a lease lapse): the installed map names the earlier
  // incarnation, whose roles are not this one's until the controller gives
  // them back. One-sided readers must refuse before the renewal below makes
  // the page valid again.
  if (auto map = state_->map()) MapInstalled(*map);
  options_.self.clear_copies();
  if (options_.copies) {
    for (v1::ShardCopy& copy : options_.copies()) *options_.self.add_copies() = std::move(copy);
  }
  options_.self.set_applied_map_epoch(state_->map_epoch());
  absl::StatusOr<etcd::TxnResult> put =
      etcd_->Txn({etcd::Compare{member_key_, etcd::Compare::Target::kCreateRevision,
                                etcd::Compare::Op::kEqual, 0, ""}},
                 {etcd::TxnOp{etcd::TxnOp::Kind::kPut, member_key_,
                              etcd_keys::EncodeNode(options_.self), lease_}},
                 {});
  absl::Status failed = put.status();
  if (put.ok() && !put->succeeded) {
    failed = absl::AbortedError(
        absl::StrCat("membership: another incarnation registered ", member_key_, " meanwhile"));
  }
  if (!failed.ok()) {
    (void)etcd_->RevokeLease(lease_);
    lease_ = 0;
    return failed;
  }
  {
    absl::MutexLock lock(&mu_);
    wall_anchor_ = clock_.Wall();
    steady_anchor_ = clock_.Steady();
  }
  Renewed(sent, options_.ttl);
  LOG(INFO) << "membership: registered " << member_key_ << " under lease "
            << absl::StrCat(absl::Hex(lease_)) << " (ttl " << absl::FormatDuration(options_.ttl)
            << ")";
  return absl::OkStatus();
}

void Membership::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  // Fenced before the lease goes: once etcd deletes the member key the
  // controller may promote another primary at once.
  FenceNow("shutting down");
  if (keepalive_.joinable()) keepalive_.join();
  if (watchdog_.joinable()) watchdog_.join();
  if (map_thread_.joinable()) map_thread_.join();
  {
    absl::MutexLock lock(&listener_->mu);
    listener_->target = nullptr;
  }
  bool lost;
  {
    absl::MutexLock lock(&mu_);
    lost = lease_lost_;
  }
  if (lease_ != 0 && !lost) {
    absl::Status s = etcd_->RevokeLease(lease_);
    if (!s.ok()) {
      LOG(WARNING) << "membership: could not revoke lease " << absl::StrCat(absl::Hex(lease_))
                   << " (" << s << "); " << member_key_ << " goes when the lease expires";
    } else {
      LOG(INFO) << "membership: revoked lease " << absl::StrCat(absl::Hex(lease_)) << ", "
                << member_key_ << " removed";
    }
  }
}

uint64_t Membership::renewals() const {
  absl::MutexLock lock(&mu_);
  return renewals_;
}

bool Membership::Sleep(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  return !clock_.AwaitUntil(&mu_, absl::Condition(&stopping_), clock_.Steady() + d);
}

void Membership::KeepAliveLoop() {
  const absl::Duration period = options_.ttl / 3;
  absl::Duration next = clock_.Steady() + period;
  while (Sleep(next - clock_.Steady())) {
    // The period runs from one send to the next, however long a call took.
    next = clock_.Steady() + period;
    const Renewal r = RenewOnce();
    if (r == Renewal::kLost) return;
    // A call etcd did not answer moved the client to its next endpoint:
    // try that one soon rather than a period later. After an outage the
    // lease may have expired, and the controller counts this node dead one
    // TTL after it saw the member key go, whether the node has heard of
    // the expiry yet or not.
    if (r == Renewal::kNoAnswer) next = std::min(next, clock_.Steady() + kRetryDelay);
  }
}

Membership::Renewal Membership::RenewOnce() {
  {
    absl::MutexLock lock(&mu_);
    if (lease_lost_) return Renewal::kLost;  // LeaseGone() heard it first
  }
  const absl::Duration sent = clock_.Steady();
  // An error armed here reads as etcd's answer (UNAVAILABLE: cut off from
  // etcd; NOT_FOUND: the lease expired).
  absl::Status cut = KV_FAILPOINT("membership/before-keepalive");
  absl::StatusOr<absl::Duration> granted = cut.ok() ? etcd_->KeepAliveOnce(lease_) : cut;
  if (granted.ok()) {
    // Never trust more than asked for: a shorter answer is taken as is.
    absl::Duration ttl = options_.ttl;
    if (*granted > absl::ZeroDuration()) ttl = std::min(ttl, *granted);
    // The lease alone proves that nobody replaced this node through expiry,
    // not that no map deposed it: serve on only with the newest map.
    absl::Status current = ProveMapCurrent();
    if (current.ok()) {
      Renewed(sent, ttl);
    } else {
      LOG_EVERY_N(WARNING, 10) << "membership: lease " << absl::StrCat(absl::Hex(lease_))
                               << " renewed but not the serving deadline: " << current;
      // Known to be behind or replaced (not merely etcd unreachable): stop now.
      if (!absl::IsUnavailable(current)) FenceNow("map or member key not current");
      if (absl::IsNotFound(current)) Republish();
    }
    bool republish;
    {
      absl::MutexLock lock(&mu_);
      republish = republish_;
      republish_ = false;
    }
    if (republish) Republish();
    return Renewal::kAnswered;
  }
  if (granted.status().code() == absl::StatusCode::kNotFound) {
    LeaseGone("the keepalive");
    return Renewal::kLost;
  }
  // etcd not reachable: keep trying; the watchdog fences at the deadline.
  LOG_EVERY_N(WARNING, 10) << "membership: keepalive of lease " << absl::StrCat(absl::Hex(lease_))
                           << " failed: " << granted.status();
  return Renewal::kNoAnswer;
}

void Membership::LeaseGone(absl::string_view who) {
  {
    absl::MutexLock lock(&mu_);
    if (lease_lost_ || stopping_) return;
    lease_lost_ = true;
  }
  FenceNow("lease expired");
  LOG(ERROR) << "membership: etcd lease " << absl::StrCat(absl::Hex(lease_)) << " of node "
             << options_.self.node_id() << " has expired (told to " << who
             << "): this node has been or will be replaced; it serves nothing until it has "
                "registered again with a new incarnation"
             << (options_.on_lease_lost ? "" : " (no handler: exit status 3)");
  if (options_.on_lease_lost) {
    options_.on_lease_lost();
  } else {
    _exit(3);
  }
}

void Membership::Renewed(absl::Duration sent, absl::Duration ttl) {
  const absl::Duration deadline = sent + ttl - options_.fence_margin;
  // An answer that came back after the deadline it would set proves
  // nothing for now (etcd was slow or frozen); the next one will.
  if (deadline <= clock_.Steady()) return;
  bool unfenced = false;
  {
    absl::MutexLock lock(&mu_);
    // A renewal that raced with Shutdown() or a lost lease must not undo
    // their fence.
    if (stopping_ || lease_lost_) return;
    deadline_ = deadline;
    ++renewals_;
    // Deadline first, then the page, then the flag: a request that sees
    // "not fenced" also sees the new deadline.
    state_->set_lease_deadline(deadline);
    fence_->set_valid_until_ms(ValidUntilMs(deadline));
    if (fenced_) {
      fenced_ = false;
      unfenced = true;
      state_->set_fenced(false);
    }
  }
  if (unfenced) {
    LOG(WARNING) << "membership: lease " << absl::StrCat(absl::Hex(lease_))
                 << " renewed again: unfenced, serving";
    if (options_.on_unfence) options_.on_unfence();
  }
}

uint64_t Membership::ValidUntilMs(absl::Duration deadline) {
  // Readers on other hosts compare the page with their own wall clocks, so
  // it speaks wall time; but this host's wall clock may be stepped. Carry
  // the wall time forward from the previous renewal by the steady time
  // elapsed since, and follow the wall clock only when it is behind that:
  // a step forward never lengthens the window readers trust, a step back
  // shortens it.
  const absl::Duration now = clock_.Steady();
  const absl::Time carried = wall_anchor_ + (now - steady_anchor_);
  const absl::Time wall = clock_.Wall();
  if (wall > carried + absl::Seconds(1)) {
    LOG_EVERY_N(WARNING, 100) << "membership: the wall clock is "
                              << absl::FormatDuration(wall - carried)
                              << " ahead of the steady clock since the last renewal; the fence "
                                 "page keeps the steady reckoning";
  }
  wall_anchor_ = std::min(wall, carried);
  steady_anchor_ = now;
  const int64_t ms = absl::ToUnixMillis(wall_anchor_ + (deadline - now));
  return ms > 0 ? static_cast<uint64_t>(ms) : 0;
}

void Membership::FenceNow(const char* why) {
  {
    absl::MutexLock lock(&mu_);
    if (fenced_) return;
    fenced_ = true;
    state_->set_fenced(true);
    fence_->Fence();
  }
  LOG(WARNING) << "membership: fenced (" << why << "): serving nothing until the lease of "
               << options_.self.node_id() << " is renewed";
  if (options_.on_fence) options_.on_fence();
}

void Membership::WatchdogLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    const absl::Duration now = clock_.Steady();
    if (!fenced_ && now >= deadline_) {
      mu_.Unlock();
      FenceNow("lease deadline passed without a renewal");
      mu_.Lock();
      continue;
    }
    // Fenced: nothing to do until a renewal moves the deadline; look again
    // every ttl/3 (or sooner on stop).
    const absl::Duration wait =
        fenced_ ? options_.ttl / 3 : deadline_ - now + absl::Milliseconds(1);
    clock_.AwaitUntil(&mu_, absl::Condition(&stopping_), now + wait);
  }
}

void Membership::MapInstalled(const cluster::ClusterMapView& view) {
  const uint64_t epoch = view.epoch();
  // Epoch 0 matches no reader's map, so one-sided readers refuse this
  // node's data (and refresh their map) while the map names an earlier life
  // of this node (they would read this empty process as that life's shards)
  // or while a new lead is held (its unreconciled copy could be taken back;
  // the hold began with the install, before this ran): FenceEpoch().
  fence_->set_map_epoch(state_->FenceEpoch());
  absl::MutexLock lock(&mu_);
  applied_epoch_ = std::max(applied_epoch_, epoch);
  republish_ = true;
}

absl::Status Membership::ProveMapCurrent() {
  // One linearizable act: our member key is still ours, and the map read
  // at that same revision is the one we serve with.
  KV_ASSIGN_OR_RETURN(etcd::TxnResult r,
                      etcd_->Txn({etcd::Compare{member_key_, etcd::Compare::Target::kLease,
                                                etcd::Compare::Op::kEqual, lease_, ""}},
                                 {etcd::TxnOp{etcd::TxnOp::Kind::kGet, map_key_, "", 0}},
                                 {etcd::TxnOp{etcd::TxnOp::Kind::kGet, member_key_, "", 0}}));
  if (!r.succeeded) {
    if (r.gets.empty()) {
      return absl::NotFoundError(absl::StrCat(member_key_, " is gone"));
    }
    return absl::FailedPreconditionError(absl::StrCat(member_key_, " belongs to lease ",
                                                      absl::StrCat(absl::Hex(r.gets[0].lease)),
                                                      ", another incarnation"));
  }
  if (r.gets.empty()) return absl::OkStatus();  // no map yet: nothing to be behind
  absl::StatusOr<v1::ClusterMap> map = etcd_keys::DecodeMap(r.gets[0].value);
  if (!map.ok()) return absl::FailedPreconditionError(map.status().message());
  // The watch may have stalled: apply the map from this read.
  if (state_->map_epoch() < map->epoch()) InstallMapJson(r.gets[0].value);
  if (state_->map_epoch() < map->epoch()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot apply cluster map epoch ", map->epoch(), " (applied ", state_->map_epoch(), ")"));
  }
  return absl::OkStatus();
}

void Membership::Republish() {
  v1::ClusterNode self = options_.self;
  {
    absl::MutexLock lock(&mu_);
    self.set_applied_map_epoch(applied_epoch_);
  }
  const std::string value = etcd_keys::EncodeNode(self);
  const etcd::TxnOp put{etcd::TxnOp::Kind::kPut, member_key_, value, lease_};
  // Our own key, or no key: never another incarnation's.
  absl::StatusOr<etcd::TxnResult> r =
      etcd_->Txn({etcd::Compare{member_key_, etcd::Compare::Target::kLease,
                                etcd::Compare::Op::kEqual, lease_, ""}},
                 {put}, {etcd::TxnOp{etcd::TxnOp::Kind::kGet, member_key_, "", 0}});
  if (r.ok() && !r->succeeded && r->gets.empty()) {
    r = etcd_->Txn({etcd::Compare{member_key_, etcd::Compare::Target::kCreateRevision,
                                  etcd::Compare::Op::kEqual, 0, ""}},
                   {put}, {etcd::TxnOp{etcd::TxnOp::Kind::kGet, member_key_, "", 0}});
  }
  if (r.ok() && r->succeeded) return;
  if (r.ok()) {
    LOG_EVERY_N(ERROR, 10) << "membership: " << member_key_ << " belongs to lease "
                           << absl::StrCat(absl::Hex(r->gets.empty() ? 0 : r->gets[0].lease))
                           << ", not ours: another incarnation of " << options_.self.node_id()
                           << " registered; not overwriting it";
  } else if (etcd::IsLeaseNotFound(r.status())) {
    LeaseGone("a republish of the member key");
    return;
  } else {
    LOG(WARNING) << "membership: could not republish " << member_key_ << ": " << r.status();
  }
  absl::MutexLock lock(&mu_);
  republish_ = true;  // next renewal tries again
}

absl::Status Membership::ReadMap(int64_t* revision) {
  KV_ASSIGN_OR_RETURN(std::vector<etcd::KeyValue> kvs, etcd_->GetPrefix(map_key_, revision));
  for (const etcd::KeyValue& kv : kvs) {
    if (kv.key == map_key_) InstallMapJson(kv.value);
  }
  return absl::OkStatus();
}

void Membership::InstallMapJson(const std::string& json) {
  absl::StatusOr<v1::ClusterMap> map = etcd_keys::DecodeMap(json);
  if (!map.ok()) {
    LOG(ERROR) << "membership: ignoring " << map_key_ << ": " << map.status();
    return;
  }
  if (!map->cluster_name().empty() && map->cluster_name() != options_.cluster_name) {
    LOG(ERROR) << "membership: ignoring a map of cluster '" << map->cluster_name() << "' under "
               << map_key_;
    return;
  }
  const uint64_t epoch = map->epoch();
  absl::StatusOr<std::shared_ptr<const cluster::ClusterMapView>> view =
      cluster::ClusterMapView::Build(*std::move(map));
  if (!view.ok()) {
    LOG(ERROR) << "membership: ignoring map epoch " << epoch << ": " << view.status();
    return;
  }
  if (state_->Update(*std::move(view))) {
    LOG(INFO) << "membership: installed cluster map epoch " << epoch;
  }
}

void Membership::MapLoop(int64_t revision) {
  bool need_read = false;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    if (need_read) {
      absl::Status s = ReadMap(&revision);
      if (!s.ok()) {
        LOG_EVERY_N(WARNING, 10) << "membership: cannot read " << map_key_ << ": " << s;
        if (!Sleep(kRetryDelay)) return;
        continue;
      }
    }
    need_read = true;
    const uint64_t endpoint = etcd_->endpoint_changes();
    auto watch = etcd_->Watch(
        map_key_, revision + 1, [this](absl::StatusOr<std::vector<etcd::WatchEvent>> events) {
          {
            absl::MutexLock lock(&mu_);
            if (!events.ok()) {
              watch_broken_ = true;
              return;
            }
            heard_ = true;  // events, or a progress notice (no events)
          }
          for (const etcd::WatchEvent& e : *events) {
            if (e.kv.key != map_key_) continue;
            if (e.type == etcd::WatchEvent::Type::kPut) {
              InstallMapJson(e.kv.value);
            } else {
              LOG(ERROR) << "membership: " << map_key_ << " was deleted; keeping epoch "
                         << state_->map_epoch();
            }
          }
        });
    if (!watch.ok()) {
      LOG_EVERY_N(WARNING, 10) << "membership: cannot watch " << map_key_ << ": " << watch.status();
      if (!Sleep(kRetryDelay)) return;
      continue;
    }
    AwaitWatchEnd(watch->get(), endpoint);
    // Outside mu_: destroying the watch joins its thread, whose callback
    // takes mu_.
    watch->reset();
  }
}

void Membership::AwaitWatchEnd(etcd::WatchHandle* watch, uint64_t endpoint) {
  const absl::Duration period = options_.ttl / kProgressPerTtl;
  const absl::Duration silence = options_.ttl / 3;
  absl::MutexLock lock(&mu_);
  heard_ = false;
  absl::Duration last_heard = clock_.Steady();
  auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || watch_broken_ || heard_;
  };
  while (true) {
    clock_.AwaitUntil(&mu_, absl::Condition(&woken), clock_.Steady() + period);
    if (stopping_ || watch_broken_) break;
    const absl::Duration now = clock_.Steady();
    if (heard_) {
      heard_ = false;
      last_heard = now;
      continue;
    }
    // Calls moved to another endpoint: the one this watch is on failed.
    if (etcd_->endpoint_changes() != endpoint) {
      LOG(WARNING) << "membership: etcd calls moved to another endpoint; watching " << map_key_
                   << " again there";
      break;
    }
    // An open stream that delivers nothing, not even the progress notices
    // asked for, is as broken as a closed one.
    if (now - last_heard >= silence) {
      LOG(WARNING) << "membership: the watch of " << map_key_ << " was silent for "
                   << absl::FormatDuration(now - last_heard) << "; watching again";
      break;
    }
    mu_.Unlock();
    watch->RequestProgress();  // may block on a stuck stream: not under mu_
    mu_.Lock();
  }
  watch_broken_ = false;
}

}  // namespace server
}  // namespace kvstore
