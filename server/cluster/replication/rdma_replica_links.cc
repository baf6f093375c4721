// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/rdma_replica_links.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/internal/control_client.h"
#include "client/internal/rdma/rdma_context.h"
#include "client/internal/rdma/rdma_data_path.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace kvstore {
namespace server {

RdmaReplicaLink::RdmaReplicaLink(std::unique_ptr<client::ControlClient> control,
                                 std::unique_ptr<client::RdmaDataPath> path)
    : control_(std::move(control)), path_(std::move(path)) {}

RdmaReplicaLink::~RdmaReplicaLink() { path_.reset(); }

absl::Status RdmaReplicaLink::Send(absl::string_view key, absl::string_view entry,
                                   const wire::ReplicaCommit& tag, absl::Time deadline) {
  return entry.empty() ? path_->ReplicateDelete(key, tag, deadline)
                       : path_->ReplicatePut(entry, tag, deadline);
}

// The backup's own refusals arrive in the ack and leave the path healthy;
// everything that breaks the path, loses the session or times out means the
// link cannot be trusted with the next write either.
bool RdmaReplicaLink::failed(const absl::Status& status) const {
  return path_->broken() || client::IsSessionLost(status) ||
         status.code() == absl::StatusCode::kDeadlineExceeded;
}

RdmaReplicaLinks::RdmaReplicaLinks(RdmaReplicaLinksOptions options, metrics::Registry* registry)
    : options_(std::move(options)) {
  metrics::Registry& r = *registry;
  sent_ = r.AddCounter("kvstore_replication_rdma_writes_total",
                       "Replicated writes sent to a backup as RDMA WRITE + replica commit.");
  connects_ = r.AddCounter("kvstore_replication_rdma_connects_total",
                           "RDMA links to backups connected (handshake + queue pair).");
  connect_failures_ =
      r.AddCounter("kvstore_replication_rdma_connect_failures_total",
                   "Attempts to connect an RDMA link to a backup that failed (gRPC used instead).");
  fallbacks_ = r.AddCounter("kvstore_replication_rdma_fallbacks_total",
                            "RDMA links to backups dropped after a transport failure (the write "
                            "and those after it go by gRPC until the link reconnects).");
  if (options_.device.empty()) return;
  for (int i = 0; i < kSenders; ++i) {
    senders_.push_back(std::make_unique<Sender>());
    Sender* s = senders_.back().get();
    s->thread = std::thread([this, s] { SenderLoop(s); });
  }
  connector_ = std::thread([this] { ConnectLoop(); });
}

RdmaReplicaLinks::~RdmaReplicaLinks() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (connector_.joinable()) connector_.join();
  for (auto& s : senders_) {
    absl::MutexLock lock(&s->mu);
    s->stop = true;
  }
  for (auto& s : senders_) s->thread.join();
}

void RdmaReplicaLinks::SenderLoop(Sender* s) {
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&s->mu);
      s->mu.Await(absl::Condition(
          +[](Sender* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu) {
            return self->stop || !self->tasks.empty();
          },
          s));
      // Tasks still queued are run even when stopping: SendAll() waits
      // for them.
      if (s->tasks.empty()) return;
      task = std::move(s->tasks.front());
      s->tasks.pop_front();
    }
    task();
  }
}

void RdmaReplicaLinks::SendAll(std::vector<Send>& sends, absl::string_view key,
                               absl::string_view entry, const wire::ReplicaCommit& tag,
                               absl::Time deadline) {
  // Shared with the queued tasks: a task may still be inside Unlock() when
  // this thread wakes and returns, so the mutex must outlive both.
  struct Pending {
    absl::Mutex mu;
    size_t left ABSL_GUARDED_BY(mu) = 0;
  };
  auto pending = std::make_shared<Pending>();
  // Only as many in parallel as there are senders; the rest (none with
  // R <= 3) go after the first on this thread. The views and `tag` stay
  // valid: this call returns only after every task is done with them.
  size_t queued = 0;
  for (size_t i = 1; i < sends.size() && queued < senders_.size(); ++i, ++queued) {
    {
      absl::MutexLock lock(&pending->mu);
      ++pending->left;
    }
    Send* send = &sends[i];
    Sender* s = senders_[queued].get();
    absl::MutexLock lock(&s->mu);
    s->tasks.push_back([send, key, entry, &tag, deadline, pending] {
      send->status = send->link->Send(key, entry, tag, deadline);
      absl::MutexLock done(&pending->mu);
      --pending->left;
    });
  }
  for (size_t i = 0; i < sends.size(); ++i) {
    if (i >= 1 && i <= queued) continue;
    sends[i].status = sends[i].link->Send(key, entry, tag, deadline);
  }
  absl::MutexLock lock(&pending->mu);
  pending->mu.Await(absl::Condition(
      +[](Pending* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu) { return p->left == 0; },
      pending.get()));
}

std::shared_ptr<RdmaReplicaLinks::Entry> RdmaReplicaLinks::EntryOf(const std::string& node_id) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Entry>& e = entries_[node_id];
  if (e == nullptr) e = std::make_shared<Entry>();
  return e;
}

std::shared_ptr<RdmaReplicaLink> RdmaReplicaLinks::Get(const v1::ClusterNode& node) {
  if (options_.device.empty()) return nullptr;
  std::shared_ptr<Entry> e = EntryOf(node.node_id());
  // Declared before the lock: a replaced link is destroyed (its leases
  // released) after the entry's mutex is let go.
  std::shared_ptr<RdmaReplicaLink> old;
  absl::MutexLock lock(&e->mu);
  if (e->address != node.control_address() || e->incarnation != node.incarnation()) {
    // Another process (or place) than the link was made for.
    old = std::move(e->link);
    e->address = node.control_address();
    e->incarnation = node.incarnation();
    e->retry_at = absl::InfinitePast();
    e->said_no_device = false;
  }
  if (e->link != nullptr) return e->link;
  if (!e->connecting && absl::Now() >= e->retry_at) {
    e->connecting = true;
    absl::MutexLock queue_lock(&mu_);
    queue_.push_back(node);
  }
  return nullptr;
}

void RdmaReplicaLinks::ConnectLoop() {
  for (;;) {
    v1::ClusterNode node;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](RdmaReplicaLinks* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->stopping_ || !self->queue_.empty();
          },
          this));
      if (stopping_) return;
      node = std::move(queue_.front());
      queue_.pop_front();
    }
    bool no_device = false;
    absl::StatusOr<std::shared_ptr<RdmaReplicaLink>> link =
        Connect(node, absl::Now() + options_.connect_timeout, &no_device);
    std::shared_ptr<Entry> e = EntryOf(node.node_id());
    absl::MutexLock lock(&e->mu);
    e->connecting = false;
    if (e->address != node.control_address() || e->incarnation != node.incarnation()) {
      continue;  // the node changed meanwhile: this link is for its past
    }
    if (!link.ok()) {
      connect_failures_->Increment();
      // A backup without a device stays without one for this incarnation:
      // asked again only every 12 retry periods, and said once at INFO,
      // not every 5 s as a warning.
      e->retry_at = absl::Now() + (no_device ? 12 : 1) * options_.retry_after;
      if (!no_device) {
        LOG(WARNING) << "replication to " << node.node_id() << " uses gRPC: " << link.status();
      } else if (!e->said_no_device) {
        LOG(INFO) << "replication to " << node.node_id() << " uses gRPC: " << link.status();
      }
      e->said_no_device = no_device;
      continue;
    }
    connects_->Increment();
    LOG(INFO) << "replication to " << node.node_id() << " (" << node.control_address()
              << ") uses RDMA";
    e->link = std::move(*link);
  }
}

void RdmaReplicaLinks::Drop(const std::string& node_id,
                            const std::shared_ptr<RdmaReplicaLink>& link) {
  std::shared_ptr<Entry> e = EntryOf(node_id);
  absl::MutexLock lock(&e->mu);
  if (e->link != link) return;  // already dropped or replaced
  e->link = nullptr;
  e->retry_at = absl::Now() + options_.retry_after;
  fallbacks_->Increment();
}

absl::StatusOr<std::shared_ptr<RdmaReplicaLink>> RdmaReplicaLinks::Connect(
    const v1::ClusterNode& node, absl::Time deadline, bool* no_device) {
  client::ControlSecurity security;
  security.auth_token = options_.auth_token;
  KV_ASSIGN_OR_RETURN(std::unique_ptr<client::ControlClient> control,
                      client::ControlClient::Dial(node.control_address(), security));
  const std::string name = absl::StrCat("replica-of-", options_.self);
  KV_ASSIGN_OR_RETURN(v1::HandshakeResponse hs,
                      control->Handshake(name, /*wait_for_ready=*/false, deadline));
  if (hs.endpoints().rdma_device().empty()) {
    *no_device = true;
    return absl::UnavailableError(absl::StrCat(node.node_id(), " has no RDMA device"));
  }
  std::shared_ptr<client::RdmaContext> context;
  {
    absl::MutexLock lock(&mu_);
    if (context_ == nullptr) {
      absl::StatusOr<std::shared_ptr<client::RdmaContext>> opened =
          client::OpenRdmaContext(options_.device, hs.limits().max_value_bytes());
      if (!opened.ok()) {
        return absl::UnavailableError(
            absl::StrCat("opening RDMA device ", options_.device,
                         " for replication: ", opened.status().message()));
      }
      context_ = std::move(*opened);
    }
    context = context_;
  }
  // No location cache: a link only writes.
  KV_ASSIGN_OR_RETURN(
      std::unique_ptr<client::RdmaDataPath> path,
      client::RdmaDataPath::Connect(context, control.get(), hs, name, options_.lease_bytes,
                                    options_.connect_timeout, &path_registry_,
                                    client::ReadOptions{/*location_cache_entries=*/0}));
  // The writing thread is a server thread (the RESP loop, the RDMA poller,
  // a gRPC handler): a short spin catches a fast NIC's ack, then it sleeps
  // rather than yield, so waiting does not take cores from the server's
  // other threads (on a 2-core host, or under emulation, yielding threads
  // starved the very backups they waited for).
  client::WaitPolicy wait;
  wait.busy_poll = absl::Microseconds(50);
  wait.yield_until = absl::ZeroDuration();
  wait.first_sleep = absl::Microseconds(10);
  wait.max_sleep = absl::Microseconds(200);
  path->set_wait_policy(wait);
  return std::make_shared<RdmaReplicaLink>(std::move(control), std::move(path));
}

}  // namespace server
}  // namespace kvstore
