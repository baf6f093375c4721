// Copyright 2026 The kvstore Authors.

#include "server/cluster/membership/etcd/fake_etcd_store.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kvstore {
namespace server {
namespace etcd {
namespace internal {
namespace {

// Lease ids look like etcd's (large, positive) and never like a revision.
constexpr int64_t kFirstLease = 0x7e57000000000001;

absl::Status CheckKey(absl::string_view key) {
  if (key.empty()) return absl::InvalidArgumentError("etcd: empty key");
  return absl::OkStatus();
}

bool Compared(int cmp, Compare::Op op) {
  switch (op) {
    case Compare::Op::kEqual:
      return cmp == 0;
    case Compare::Op::kNotEqual:
      return cmp != 0;
    case Compare::Op::kGreater:
      return cmp > 0;
    case Compare::Op::kLess:
      return cmp < 0;
  }
  return false;
}

int Sign(int64_t a, int64_t b) { return a < b ? -1 : (a > b ? 1 : 0); }

// etcd's message for a lease it does not know, as the gRPC client shows it.
absl::Status LeaseNotFound(const std::string& endpoint, absl::string_view method) {
  return absl::NotFoundError(
      absl::StrCat("etcd ", endpoint, " ", method, ": etcdserver: requested lease not found"));
}

}  // namespace

FakeWatchStream::FakeWatchStream(std::string client, std::string prefix, EventsCallback on_events)
    : client_(std::move(client)), prefix_(std::move(prefix)), on_events_(std::move(on_events)) {
  thread_ = std::thread([this] { Run(); });
}

FakeWatchStream::~FakeWatchStream() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void FakeWatchStream::Push(absl::StatusOr<std::vector<WatchEvent>> item) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(item));
}

void FakeWatchStream::Stall() {
  absl::MutexLock lock(&mu_);
  stalled_ = true;
}

void FakeWatchStream::Run() {
  for (;;) {
    absl::StatusOr<std::vector<WatchEvent>> item;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || (!stalled_ && !queue_.empty());
      };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    const bool last = !item.ok();
    on_events_(std::move(item));
    if (last) return;
  }
}

FakeEtcdStore::FakeEtcdStore(std::string endpoint, const Clock* clock, absl::Duration min_lease_ttl)
    : endpoint_(std::move(endpoint)),
      clock_(clock),
      min_lease_ttl_(min_lease_ttl),
      next_lease_(kFirstLease) {}

absl::Duration FakeEtcdStore::Now() const {
  return clock_ == nullptr ? absl::ZeroDuration() : clock_->Steady();
}

absl::Status FakeEtcdStore::Unavailable(absl::string_view method) const {
  return absl::UnavailableError(
      absl::StrCat("etcd ", endpoint_, " ", method, ": unreachable (fake etcd)"));
}

absl::Status FakeEtcdStore::Reach(const std::string& client, absl::string_view method) {
  if (!reachable_ || cut_off_.count(client) > 0) return Unavailable(method);
  ExpireDueLocked();
  return absl::OkStatus();
}

absl::StatusOr<int64_t> FakeEtcdStore::GrantLease(const std::string& client, absl::Duration ttl) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Reach(client, "LeaseGrant"); !s.ok()) return s;
  // Whole seconds, rounded up, as the real client asks; then etcd's minimum.
  int64_t seconds = absl::ToInt64Seconds(ttl);
  if (ttl > absl::Seconds(seconds) && seconds < std::numeric_limits<int64_t>::max()) ++seconds;
  const absl::Duration granted = std::max(absl::Seconds(std::max<int64_t>(1, seconds)),
                                          absl::Ceil(min_lease_ttl_, absl::Seconds(1)));
  const int64_t id = next_lease_++;
  Lease& lease = leases_[id];
  lease.ttl = granted;
  lease.deadline = clock_ == nullptr ? absl::InfiniteDuration() : Now() + granted;
  return id;
}

absl::Status FakeEtcdStore::RevokeLease(const std::string& client, int64_t lease) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Reach(client, "LeaseRevoke"); !s.ok()) return s;
  if (leases_.count(lease) == 0) return LeaseNotFound(endpoint_, "LeaseRevoke");
  EndLease(lease);
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> FakeEtcdStore::KeepAliveOnce(const std::string& client,
                                                            int64_t lease) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Reach(client, "LeaseKeepAlive"); !s.ok()) return s;
  auto it = leases_.find(lease);
  if (it == leases_.end()) {
    return absl::NotFoundError(absl::StrCat("etcd: lease ", lease, " expired or revoked"));
  }
  if (clock_ != nullptr) it->second.deadline = Now() + it->second.ttl;
  return it->second.ttl;
}

absl::StatusOr<std::optional<KeyValue>> FakeEtcdStore::Get(const std::string& client,
                                                           absl::string_view key) {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Reach(client, "Range"); !s.ok()) return s;
  auto it = kvs_.find(std::string(key));
  if (it == kvs_.end()) return std::optional<KeyValue>();
  return std::optional<KeyValue>(it->second);
}

absl::StatusOr<std::vector<KeyValue>> FakeEtcdStore::GetPrefix(const std::string& client,
                                                               absl::string_view prefix,
                                                               int64_t* revision) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Reach(client, "Range"); !s.ok()) return s;
  std::vector<KeyValue> out;
  // std::string orders bytes as unsigned, as etcd orders keys.
  for (auto it = kvs_.lower_bound(std::string(prefix));
       it != kvs_.end() && absl::StartsWith(it->first, prefix); ++it) {
    out.push_back(it->second);
  }
  if (revision != nullptr) *revision = revision_;
  return out;
}

absl::StatusOr<int64_t> FakeEtcdStore::Put(const std::string& client, absl::string_view key,
                                           absl::string_view value, int64_t lease) {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Reach(client, "Put"); !s.ok()) return s;
  if (lease != 0 && leases_.count(lease) == 0) return LeaseNotFound(endpoint_, "Put");
  std::vector<WatchEvent> events;
  ApplyPut(std::string(key), value, lease, revision_ + 1, &events);
  Commit(std::move(events));
  return revision_;
}

absl::StatusOr<int64_t> FakeEtcdStore::Delete(const std::string& client, absl::string_view key) {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Reach(client, "DeleteRange"); !s.ok()) return s;
  std::vector<WatchEvent> events;
  ApplyDelete(std::string(key), revision_ + 1, &events);
  Commit(std::move(events));  // deleting nothing takes no revision
  return revision_;
}

absl::StatusOr<TxnResult> FakeEtcdStore::Txn(const std::string& client,
                                             const std::vector<Compare>& compares,
                                             const std::vector<TxnOp>& success,
                                             const std::vector<TxnOp>& failure) {
  for (const Compare& c : compares) {
    if (absl::Status s = CheckKey(c.key); !s.ok()) return s;
  }
  for (const std::vector<TxnOp>* branch : {&success, &failure}) {
    for (const TxnOp& op : *branch) {
      if (absl::Status s = CheckKey(op.key); !s.ok()) return s;
    }
  }
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Reach(client, "Txn"); !s.ok()) return s;
  // etcd checks both branches for duplicates before it compares.
  for (const std::vector<TxnOp>* branch : {&success, &failure}) {
    if (absl::Status s = CheckBranch(*branch); !s.ok()) return s;
  }
  TxnResult result;
  result.succeeded =
      std::all_of(compares.begin(), compares.end(), [this](const Compare& c) { return Holds(c); });
  const std::vector<TxnOp>& ops = result.succeeded ? success : failure;
  for (const TxnOp& op : ops) {
    if (op.kind == TxnOp::Kind::kPut && op.lease != 0 && leases_.count(op.lease) == 0) {
      return LeaseNotFound(endpoint_, "Txn");
    }
  }
  const int64_t rev = revision_ + 1;
  std::vector<WatchEvent> events;
  for (const TxnOp& op : ops) {
    switch (op.kind) {
      case TxnOp::Kind::kPut:
        ApplyPut(op.key, op.value, op.lease, rev, &events);
        break;
      case TxnOp::Kind::kDelete:
        ApplyDelete(op.key, rev, &events);
        break;
      case TxnOp::Kind::kGet:
        if (auto it = kvs_.find(op.key); it != kvs_.end()) result.gets.push_back(it->second);
        break;
    }
  }
  Commit(std::move(events));
  result.revision = revision_;
  return result;
}

absl::Status FakeEtcdStore::CheckBranch(const std::vector<TxnOp>& ops) const {
  std::set<std::string> written;
  for (const TxnOp& op : ops) {
    if (op.kind == TxnOp::Kind::kGet) continue;
    if (!written.insert(op.key).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd ", endpoint_, " Txn: etcdserver: duplicate key given in txn request"));
    }
  }
  return absl::OkStatus();
}

bool FakeEtcdStore::Holds(const Compare& c) const {
  auto it = kvs_.find(c.key);
  if (it == kvs_.end() && c.target == Compare::Target::kValue) return false;
  const KeyValue absent;
  const KeyValue& kv = it == kvs_.end() ? absent : it->second;
  switch (c.target) {
    case Compare::Target::kValue: {
      const int cmp = kv.value.compare(c.value);
      return Compared(cmp < 0 ? -1 : (cmp > 0 ? 1 : 0), c.op);
    }
    case Compare::Target::kCreateRevision:
      return Compared(Sign(kv.create_revision, c.number), c.op);
    case Compare::Target::kModRevision:
      return Compared(Sign(kv.mod_revision, c.number), c.op);
    case Compare::Target::kVersion:
      return Compared(Sign(kv.version, c.number), c.op);
    case Compare::Target::kLease:
      return Compared(Sign(kv.lease, c.number), c.op);
  }
  return false;
}

void FakeEtcdStore::ApplyPut(const std::string& key, absl::string_view value, int64_t lease,
                             int64_t rev, std::vector<WatchEvent>* events) {
  KeyValue& kv = kvs_[key];
  if (kv.version == 0) {
    kv.key = key;
    kv.create_revision = rev;
  }
  ++kv.version;
  kv.mod_revision = rev;
  kv.value = std::string(value);
  if (kv.lease != lease) {
    if (auto old = leases_.find(kv.lease); old != leases_.end()) old->second.keys.erase(key);
    if (lease != 0) leases_[lease].keys.insert(key);
    kv.lease = lease;
  }
  WatchEvent e;
  e.type = WatchEvent::Type::kPut;
  e.kv = kv;
  events->push_back(std::move(e));
}

void FakeEtcdStore::ApplyDelete(const std::string& key, int64_t rev,
                                std::vector<WatchEvent>* events) {
  auto it = kvs_.find(key);
  if (it == kvs_.end()) return;
  if (auto lease = leases_.find(it->second.lease); lease != leases_.end()) {
    lease->second.keys.erase(key);
  }
  kvs_.erase(it);
  WatchEvent e;
  e.type = WatchEvent::Type::kDelete;
  e.kv.key = key;
  e.kv.mod_revision = rev;
  events->push_back(std::move(e));
}

void FakeEtcdStore::Commit(std::vector<WatchEvent> events) {
  if (events.empty()) return;
  const int64_t rev = ++revision_;
  for (FakeWatchStream* w : watches_) {
    std::vector<WatchEvent> matching;
    for (const WatchEvent& e : events) {
      if (absl::StartsWith(e.kv.key, w->prefix())) matching.push_back(e);
    }
    if (!matching.empty()) w->Push(std::move(matching));
  }
  history_.push_back(Revision{rev, std::move(events)});
}

void FakeEtcdStore::EndLease(int64_t lease) {
  auto it = leases_.find(lease);
  if (it == leases_.end()) return;
  // Its keys go in one revision, in key order, as etcd's revoke txn does.
  const std::set<std::string> keys = std::move(it->second.keys);
  leases_.erase(it);
  std::vector<WatchEvent> events;
  for (const std::string& key : keys) ApplyDelete(key, revision_ + 1, &events);
  Commit(std::move(events));
}

int FakeEtcdStore::ExpireDueLocked() {
  if (clock_ == nullptr) return 0;
  const absl::Duration now = Now();
  std::vector<int64_t> due;
  for (const auto& [id, lease] : leases_) {
    if (lease.deadline <= now) due.push_back(id);
  }
  for (int64_t id : due) EndLease(id);
  return static_cast<int>(due.size());
}

absl::Status FakeEtcdStore::AddWatch(FakeWatchStream* stream, int64_t start_revision) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Reach(stream->client(), "Watch"); !s.ok()) return s;
  if (start_revision > 0 && start_revision < compacted_) {
    // etcd confirms the watch, then cancels it with the compact revision.
    stream->Push(absl::OutOfRangeError(
        absl::StrCat("etcd ", endpoint_, " Watch: revision compacted up to ", compacted_)));
    return absl::OkStatus();
  }
  // 0: from the next revision on, so no history.
  const int64_t from = start_revision > 0 ? start_revision : revision_ + 1;
  for (const Revision& r : history_) {
    if (r.revision < from) continue;
    std::vector<WatchEvent> matching;
    for (const WatchEvent& e : r.events) {
      if (absl::StartsWith(e.kv.key, stream->prefix())) matching.push_back(e);
    }
    if (!matching.empty()) stream->Push(std::move(matching));
  }
  watches_.insert(stream);
  return absl::OkStatus();
}

void FakeEtcdStore::RemoveWatch(FakeWatchStream* stream) {
  absl::MutexLock lock(&mu_);
  watches_.erase(stream);
}

void FakeEtcdStore::RequestProgress(FakeWatchStream* stream) {
  absl::MutexLock lock(&mu_);
  // A watch that ended (broken, removed) answers nothing, as a dead stream.
  if (watches_.count(stream) == 0) return;
  stream->Push(std::vector<WatchEvent>());
}

uint64_t FakeEtcdStore::endpoint_changes(const std::string& client) const {
  absl::MutexLock lock(&mu_);
  auto it = endpoint_changes_.find(client);
  return it == endpoint_changes_.end() ? 0 : it->second;
}

void FakeEtcdStore::StallWatches(const std::string& client) {
  absl::MutexLock lock(&mu_);
  for (FakeWatchStream* w : watches_) {
    if (client.empty() || w->client() == client) w->Stall();
  }
}

void FakeEtcdStore::ChangeEndpoint(const std::string& client) {
  absl::MutexLock lock(&mu_);
  ++endpoint_changes_[client];
  // The endpoint left behind goes silent for the watches still on it.
  for (FakeWatchStream* w : watches_) {
    if (w->client() == client) w->Stall();
  }
}

void FakeEtcdStore::BreakWatches(const std::string& client) {
  for (auto it = watches_.begin(); it != watches_.end();) {
    if (client.empty() || (*it)->client() == client) {
      (*it)->Push(Unavailable("Watch"));
      it = watches_.erase(it);
    } else {
      ++it;
    }
  }
}

void FakeEtcdStore::SetReachable(bool reachable) {
  absl::MutexLock lock(&mu_);
  reachable_ = reachable;
  if (!reachable) BreakWatches("");
}

void FakeEtcdStore::SetClientReachable(const std::string& client, bool reachable) {
  absl::MutexLock lock(&mu_);
  if (reachable) {
    cut_off_.erase(client);
  } else {
    cut_off_.insert(client);
    BreakWatches(client);
  }
}

void FakeEtcdStore::RenewAllLeases() {
  absl::MutexLock lock(&mu_);
  if (clock_ == nullptr) return;
  for (auto& [id, lease] : leases_) lease.deadline = Now() + lease.ttl;
}

absl::Status FakeEtcdStore::ExpireLease(int64_t lease) {
  absl::MutexLock lock(&mu_);
  if (leases_.count(lease) == 0) {
    return absl::NotFoundError(absl::StrCat("fake etcd: no lease ", lease));
  }
  EndLease(lease);
  return absl::OkStatus();
}

int FakeEtcdStore::ExpireDueLeases() {
  absl::MutexLock lock(&mu_);
  return ExpireDueLocked();
}

absl::Status FakeEtcdStore::Compact(int64_t revision) {
  absl::MutexLock lock(&mu_);
  if (revision > revision_) {
    return absl::OutOfRangeError("etcdserver: mvcc: required revision is a future revision");
  }
  if (revision <= compacted_) {
    return absl::OutOfRangeError("etcdserver: mvcc: required revision has been compacted");
  }
  compacted_ = revision;
  while (!history_.empty() && history_.front().revision < revision) history_.pop_front();
  return absl::OkStatus();
}

int64_t FakeEtcdStore::revision() const {
  absl::MutexLock lock(&mu_);
  return revision_;
}

int FakeEtcdStore::watch_count() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(watches_.size());
}

}  // namespace internal
}  // namespace etcd
}  // namespace server
}  // namespace kvstore
