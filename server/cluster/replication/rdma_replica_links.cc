// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/rdma_replica_links.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/control/control_client.h"
#include "common/status_macros.h"
#include "common/sync/thread_name.h"
#include "glog/logging.h"
#include "server/cluster/replication/replica_writer.h"

namespace kvstore {
namespace server {

RdmaReplicaLink::RdmaReplicaLink(std::unique_ptr<control::ControlClient> control,
                                 std::unique_ptr<ReplicaWriter> writer)
    : control_(std::move(control)), writer_(std::move(writer)) {
  sender_ = std::thread([this] {
    NameThread("kv-rdma-link");
    SendLoop();
  });
}

RdmaReplicaLink::~RdmaReplicaLink() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  sender_.join();
  writer_.reset();
}

absl::Status RdmaReplicaLink::Send(absl::string_view key, absl::string_view entry,
                                   const wire::ReplicaCommit& tag, absl::Time deadline) {
  return entry.empty() ? writer_->Delete(key, tag, deadline) : writer_->Put(entry, tag, deadline);
}

void RdmaReplicaLink::Start(absl::string_view key, absl::string_view entry,
                            const wire::ReplicaCommit& tag, absl::Time deadline,
                            std::function<void(absl::Status)> done) {
  {
    absl::MutexLock lock(&mu_);
    if (!stop_) {
      started_.push_back(Started{key, entry, tag, deadline, std::move(done)});
      return;
    }
  }
  done(absl::UnavailableError("RDMA link closed"));
}

void RdmaReplicaLink::SendLoop() {
  std::vector<Started> batch;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](RdmaReplicaLink* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->stop_ || !self->started_.empty();
          },
          this));
      if (stop_) break;
      // Everything queued while the last batch was on its way goes now:
      // the group commit.
      while (!started_.empty() && batch.size() < kMaxBatch) {
        batch.push_back(std::move(started_.front()));
        started_.pop_front();
      }
    }
    SendBatch(batch);
    batch.clear();
  }
  std::deque<Started> left;
  {
    absl::MutexLock lock(&mu_);
    left.swap(started_);
  }
  for (Started& s : left) s.done(absl::UnavailableError("RDMA link closed"));
}

void RdmaReplicaLink::SendBatch(std::vector<Started>& batch) {
  // The keys of a batch are distinct (a round holds its key's stripe until
  // its `done`), so its PUTs and DELETEs may go in either order.
  std::vector<ReplicaWriter::BatchPut> puts;
  std::vector<size_t> put_index;
  std::vector<absl::Status> status(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].entry.empty()) continue;
    puts.push_back({batch[i].entry, batch[i].tag, absl::OkStatus()});
    put_index.push_back(i);
  }
  if (!puts.empty()) {
    // One deadline for the batch: the earliest of its writes'.
    absl::Time deadline = absl::InfiniteFuture();
    for (size_t i : put_index) deadline = std::min(deadline, batch[i].deadline);
    writer_->PutBatch(absl::MakeSpan(puts), deadline);
    for (size_t k = 0; k < puts.size(); ++k) status[put_index[k]] = std::move(puts[k].status);
  }
  std::vector<ReplicaWriter::BatchDelete> deletes;
  std::vector<size_t> delete_index;
  absl::Time delete_deadline = absl::InfiniteFuture();
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!batch[i].entry.empty()) continue;
    deletes.push_back({batch[i].key, batch[i].tag, absl::OkStatus()});
    delete_index.push_back(i);
    delete_deadline = std::min(delete_deadline, batch[i].deadline);
  }
  if (!deletes.empty()) {
    writer_->DeleteBatch(absl::MakeSpan(deletes), delete_deadline);
    for (size_t k = 0; k < deletes.size(); ++k) {
      status[delete_index[k]] = std::move(deletes[k].status);
    }
  }
  for (size_t i = 0; i < batch.size(); ++i) batch[i].done(std::move(status[i]));
}

// The backup's own refusals arrive in the ack and leave the path healthy;
// everything that breaks the path, loses the session or times out means the
// link cannot be trusted with the next write either.
bool RdmaReplicaLink::failed(const absl::Status& status) const {
  return writer_->broken() || control::IsSessionLost(status) ||
         status.code() == absl::StatusCode::kDeadlineExceeded;
}

RdmaReplicaLinks::RdmaReplicaLinks(RdmaReplicaLinksOptions options, metrics::Registry* registry)
    : options_(std::move(options)), metrics_(registry) {
  if (options_.device.empty()) return;
  for (int i = 0; i < kSenders; ++i) {
    senders_.push_back(std::make_unique<Sender>());
    Sender* s = senders_.back().get();
    s->thread = std::thread([this, s] {
      NameThread("kv-rdma-repl");
      SenderLoop(s);
    });
  }
  connector_ = std::thread([this] {
    NameThread("kv-rdma-connect");
    ConnectLoop();
  });
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
      metrics_.connect_failures()->Increment();
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
    metrics_.connects()->Increment();
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
  metrics_.fallbacks()->Increment();
}

absl::StatusOr<std::shared_ptr<RdmaReplicaLink>> RdmaReplicaLinks::Connect(
    const v1::ClusterNode& node, absl::Time deadline, bool* no_device) {
  control::ControlSecurity security;
  security.auth_token = options_.peer_secret;
  KV_ASSIGN_OR_RETURN(std::unique_ptr<control::ControlClient> control,
                      control::ControlClient::Dial(node.control_address(), security));
  const std::string name = absl::StrCat("replica-of-", options_.self);
  KV_ASSIGN_OR_RETURN(v1::HandshakeResponse hs,
                      control->Handshake(name, /*wait_for_ready=*/false, deadline));
  if (hs.endpoints().rdma_device().empty()) {
    *no_device = true;
    return absl::UnavailableError(absl::StrCat(node.node_id(), " has no RDMA device"));
  }
  absl::StatusOr<std::shared_ptr<initiator::RdmaContext>> context =
      context_.Get(options_.device, hs.limits().max_value_bytes());
  if (!context.ok()) {
    return absl::UnavailableError(absl::StrCat("opening RDMA device ", options_.device,
                                               " for replication: ", context.status().message()));
  }
  KV_ASSIGN_OR_RETURN(
      std::unique_ptr<ReplicaWriter> writer,
      ReplicaWriter::Connect(*std::move(context), control.get(), hs, name, options_.lease_bytes,
                             options_.connect_timeout, metrics_.ForPeer(node.node_id())));
  return std::make_shared<RdmaReplicaLink>(std::move(control), std::move(writer));
}

}  // namespace server
}  // namespace kvstore
