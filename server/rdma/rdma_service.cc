// Copyright 2026 The kvstore Authors.
//
// Two classes, one job each (Connection, a client's queue pair, is in
// rdma_connection.h; fencing in rdma_service_fence.cc):
//   * LeaseWindow: the write key of one lease (a LeaseWriteKey), owned by
//     the lease's record in the LeaseTable;
//   * RdmaService: the connection table, the commit poller and idle probes.

#include "server/rdma/rdma_service.h"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/protocol/commit_wire.h"
#include "common/status_macros.h"
#include "common/sync/thread_name.h"
#include "glog/logging.h"
#include "server/rdma/rdma_connection.h"

namespace kvstore {
namespace server {

namespace {

using rdma_internal::kAckTag;
using rdma_internal::kBindTag;
using rdma_internal::kInvalidateTag;
using rdma_internal::kProbeTag;

// What the server's QPs allow. What a client can actually reach is decided
// by the rkeys it holds (docs/architecture.md §9), not by these flags.
constexpr int kServerAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;

absl::Status FencedError() {
  return absl::UnavailableError("the server is fenced: no RDMA connections until it is unfenced");
}

}  // namespace

// ---------------------------------------------------------------------------
// LeaseWindow

// The write key of one lease: a type-2 memory window with REMOTE_WRITE over
// the lease's chunk, bound on its holder's queue pair, over an MR that covers
// only the chunk. Made by BindLease(), owned by the lease's record in the
// LeaseTable, which calls Revoke() when the lease ends; see LeaseWriteKey for
// the contract. Holds its connection, so the QP outlives the window.
class RdmaService::LeaseWindow final : public LeaseWriteKey {
 public:
  // Registers [base, base + length) as an MR of its own, allocates a window
  // and binds it over the MR on c's QP. Errors as RdmaService::BindLease().
  static absl::StatusOr<std::unique_ptr<LeaseWindow>> Bind(RdmaService* service,
                                                           std::shared_ptr<Connection> c,
                                                           char* base, uint64_t length);
  // Revokes the window if LeaseTable never did (it always does).
  ~LeaseWindow() override {
    if (!revoked_) Revoke();
  }

  // Invalidates the window on its QP (skipped on a dead connection, whose
  // QP accepts no more work), then deallocates it and deregisters the MR,
  // in that order (ibv_dereg_mr fails while a window is bound on the MR).
  void Revoke() override;

 private:
  LeaseWindow(RdmaService* service, std::shared_ptr<Connection> c, rdma::MemoryRegion mr,
              rdma::MemoryWindow mw)
      : LeaseWriteKey(mw.rkey(), c->id),
        service_(service),
        connection_(std::move(c)),
        mr_(std::move(mr)),
        mw_(std::move(mw)) {}

  RdmaService* const service_;  // for the counters; outlives every window
  // Released by Revoke(); the window is declared after the MR so that it is
  // deallocated first.
  std::shared_ptr<Connection> connection_;
  std::optional<rdma::MemoryRegion> mr_;
  std::optional<rdma::MemoryWindow> mw_;
  // LeaseTable serializes Revoke() and the destructor; no lock needed.
  bool revoked_ = false;
};

absl::StatusOr<std::unique_ptr<RdmaService::LeaseWindow>> RdmaService::LeaseWindow::Bind(
    RdmaService* service, std::shared_ptr<Connection> c, char* base, uint64_t length) {
  // The chunk's own MR bounds every write through the window to the chunk.
  // Declared before the window: on an early return the window goes first.
  KV_ASSIGN_OR_RETURN(rdma::MemoryRegion mr,
                      rdma::MemoryRegion::Register(*service->pd_, base, length,
                                                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND));
  KV_ASSIGN_OR_RETURN(rdma::MemoryWindow mw, rdma::MemoryWindow::Alloc(*service->pd_));
  {
    uint64_t wr_id;
    {
      absl::MutexLock lock(&c->send_mu);
      wr_id = kBindTag | c->next_wr++;
      KV_RETURN_IF_ERROR(c->qp
                             ->PostBindMw(mw, mr, reinterpret_cast<uint64_t>(base), length,
                                          IBV_ACCESS_REMOTE_WRITE, wr_id)
                             .status());
    }
    absl::Status s = c->WaitSend(wr_id);
    if (!s.ok()) {
      // The window's bookkeeping says bound; the device says not.
      mw.RollbackBind();
      return absl::UnavailableError(
          absl::StrCat("binding the lease's write key failed: ", s.message()));
    }
  }
  // mw.rkey() is the key the bind installed, the one the client must use.
  return std::unique_ptr<LeaseWindow>(
      new LeaseWindow(service, std::move(c), std::move(mr), std::move(mw)));
}

void RdmaService::LeaseWindow::Revoke() {
  if (revoked_) return;
  revoked_ = true;
  Connection& c = *connection_;
  if (!c.dead && mw_->bound()) {
    uint64_t wr_id;
    absl::Status s;
    {
      absl::MutexLock lock(&c.send_mu);
      wr_id = kInvalidateTag | c.next_wr++;
      s = c.qp->PostLocalInvalidate(*mw_, wr_id);
    }
    if (s.ok()) s = c.WaitSend(wr_id);
    // Not fatal: deallocating the window below revokes it as well.
    if (!s.ok()) LOG(WARNING) << "invalidating write key " << rkey() << ": " << s;
  }
  mw_.reset();
  mr_.reset();
  // May be the last reference: the QP goes now, with no window bound on it.
  connection_.reset();
  service_->revoked_->Increment();
}

// ---------------------------------------------------------------------------
// RdmaService: start, stop, connections

RdmaService::RdmaService(rdma::Device* device, rdma::ProtectionDomain* pd, MemoryPool* pool,
                         KvStore* store, LeaseTable* leases, const RdmaServiceOptions& options)
    : own_registry_(options.registry == nullptr ? std::make_unique<metrics::Registry>() : nullptr),
      registry_(options.registry != nullptr ? options.registry : own_registry_.get()),
      device_(device),
      pd_(pd),
      pool_(pool),
      store_(store),
      leases_(leases),
      options_(options),
      // A commit names its key, so a receive buffer holds the largest key.
      slot_bytes_(static_cast<uint32_t>((wire::CommitBytes(store->limits().max_key_bytes) + 63) /
                                        64 * 64)) {
  RegisterMetrics();
}

absl::StatusOr<std::unique_ptr<RdmaService>> RdmaService::Start(rdma::Device* device,
                                                                rdma::ProtectionDomain* pd,
                                                                MemoryPool* pool, KvStore* store,
                                                                LeaseTable* leases,
                                                                const RdmaServiceOptions& options) {
  if (options.commit_credits == 0 || options.commit_credits > 4096) {
    return absl::InvalidArgumentError("commit_credits must be in [1, 4096]");
  }
  std::unique_ptr<RdmaService> s(new RdmaService(device, pd, pool, store, leases, options));
  auto gid_index = rdma::FindRoceV2GidIndex(*device, device->port(), options.gid_ipv4);
  if (!gid_index.ok()) {
    // Not RoCE (InfiniBand): GID 0 with the port's LID.
    if (!options.gid_ipv4.empty()) return gid_index.status();
    LOG(WARNING) << "no RoCE v2 GID on " << device->name() << " (" << gid_index.status()
                 << "); using GID index 0";
    s->gid_index_ = 0;
  } else {
    s->gid_index_ = *gid_index;
  }
  KV_ASSIGN_OR_RETURN(s->gid_, rdma::QueryGid(*device, device->port(), s->gid_index_));
  KV_ASSIGN_OR_RETURN(auto channel, rdma::CompletionChannel::Create(*device));
  s->channel_.emplace(std::move(channel));
  // Room for every receive every connection can have posted: an overflow
  // would put every queue pair on the CQ in error. Fewer connections are
  // accepted when the device's CQ cannot hold them all.
  const uint32_t max_cqe = device->limits().max_cqe != 0 ? device->limits().max_cqe : 32767;
  KV_ASSIGN_OR_RETURN(RecvCqPlan plan,
                      PlanRecvCq(options.max_connections, options.commit_credits, max_cqe));
  if (plan.max_connections < options.max_connections) {
    LOG(WARNING) << "RDMA connections limited to " << plan.max_connections << " (not "
                 << options.max_connections << "): " << options.commit_credits
                 << " commit credits each must fit the device's " << max_cqe
                 << "-entry completion queue";
  }
  s->max_connections_ = plan.max_connections;
  KV_ASSIGN_OR_RETURN(auto cq, rdma::CompletionQueue::Create(*device, plan.depth, &*s->channel_));
  s->recv_cq_.emplace(std::move(cq));
  KV_RETURN_IF_ERROR(s->recv_cq_->RequestNotify());
  KV_RETURN_IF_ERROR(s->RegisterFencePage());
  s->reaper_ = std::thread([p = s.get()] {
    NameThread("kv-rdma-reap");
    p->ReapLoop();
  });
  s->poller_ = std::thread([p = s.get()] {
    NameThread("kv-rdma-poll");
    p->PollLoop();
  });
  return s;
}

RdmaService::~RdmaService() {
  StopPoller();
  // Every window holds its connection, so a live one would keep a QP (and
  // through it recv_cq_) alive past this point.
  DCHECK_EQ(bound_->Value(), revoked_->Value())
      << "write keys still alive: destroy the LeaseTable before the RdmaService";
  absl::flat_hash_map<uint64_t, std::shared_ptr<Connection>> conns;
  {
    absl::MutexLock lock(&mu_);
    conns.swap(conns_);
  }
  // The QPs go before the receive CQ they all use.
  conns.clear();
  recv_cq_.reset();
  channel_.reset();
}

void RdmaService::StopPoller() {
  if (stop_.exchange(true)) return;
  if (poller_.joinable()) poller_.join();
  {
    absl::MutexLock lock(&reap_mu_);
    reap_stop_ = true;
  }
  if (reaper_.joinable()) reaper_.join();
  StopWorkers();
}

std::shared_ptr<RdmaService::Connection> RdmaService::Find(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = conns_.find(id);
  return it == conns_.end() ? nullptr : it->second;
}

absl::StatusOr<RdmaService::Accepted> RdmaService::Connect(const rdma::QpEndpoint& client,
                                                           std::string owner, uint64_t probe_addr,
                                                           uint32_t probe_rkey,
                                                           CommitRights rights) {
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    if (fenced_) return FencedError();
    // The place is taken here, under the same lock as the check, and held
    // through the setup below until the connection is published or fails.
    if (conns_.size() + connecting_ >= max_connections_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "too many RDMA connections (", max_connections_, "); use TCP or retry later"));
    }
    ++connecting_;
    id = next_id_++;
  }
  // Gives the place back on every path; the success path publishes the
  // connection in the same critical section.
  bool published = false;
  absl::Cleanup give_back = [this, &published] {
    if (published) return;
    absl::MutexLock lock(&mu_);
    --connecting_;
  };
  KV_ASSIGN_OR_RETURN(std::shared_ptr<Connection> c, NewConnection(id));
  c->owner = std::move(owner);
  c->rights = rights;
  c->probe_addr = probe_addr;
  c->probe_rkey = probe_rkey;
  // Finite RNR retries: an ack to a client that posts no receive fails the
  // connection instead of being retried forever (rdma_sizing.h).
  KV_RETURN_IF_ERROR(c->qp->Connect(client, kServerAccess, ServerQpTimeouts()));
  // Receives can be posted from INIT on; the client sends nothing before it
  // has our endpoint, so posting them now is early enough. The work request
  // id carries the connection and the slot, for the shared receive CQ.
  for (uint32_t slot = 0; slot < c->credits; ++slot) {
    rdma::Sge sge{reinterpret_cast<uint64_t>(c->recv_mem.data()) + uint64_t{slot} * slot_bytes_,
                  slot_bytes_, c->recv_mr->lkey()};
    KV_RETURN_IF_ERROR(c->qp->PostRecv(sge, (id << 16) | slot));
  }
  Accepted out;
  out.connection_id = id;
  out.server = c->qp->local();
  out.commit_credits = c->credits;
  out.max_commit_bytes = slot_bytes_;
  out.replica_batch_commits = announce_batches_.load();
  c->Touch();
  {
    absl::MutexLock lock(&mu_);
    // Checked again where the connection is published: a FenceAll() that
    // ran meanwhile did not see it, so it must not get in.
    if (fenced_) return FencedError();
    --connecting_;
    published = true;
    conns_[id] = std::move(c);
  }
  connections_total_->Increment();
  return out;
}

absl::StatusOr<std::shared_ptr<RdmaService::Connection>> RdmaService::NewConnection(uint64_t id) {
  auto c = std::make_shared<Connection>();
  c->id = id;
  c->credits = options_.commit_credits;
  c->ack_slots = AckRingSlots(c->credits);
  const uint32_t credits = c->credits;
  rdma::QpCaps caps;
  // The ack ring plus binds, invalidations and probes in flight.
  caps.max_send_wr = SendQueueDepth(credits);
  caps.max_recv_wr = credits;
  caps.max_send_sge = 1;
  caps.max_recv_sge = 1;
  caps.max_inline = 64;
  KV_ASSIGN_OR_RETURN(auto send_cq,
                      rdma::CompletionQueue::Create(*device_, caps.max_send_wr, nullptr));
  c->send_cq.emplace(std::move(send_cq));
  c->recv_mem.assign(size_t{credits} * slot_bytes_, 0);
  KV_ASSIGN_OR_RETURN(auto recv_mr,
                      rdma::MemoryRegion::Register(*pd_, c->recv_mem.data(), c->recv_mem.size(),
                                                   IBV_ACCESS_LOCAL_WRITE));
  c->recv_mr.emplace(std::move(recv_mr));
  c->ack_mem.assign(size_t{c->ack_slots} * wire::kAckBytes, 0);
  KV_ASSIGN_OR_RETURN(auto ack_mr,
                      rdma::MemoryRegion::Register(*pd_, c->ack_mem.data(), c->ack_mem.size(),
                                                   IBV_ACCESS_LOCAL_WRITE));
  c->ack_mr.emplace(std::move(ack_mr));
  KV_ASSIGN_OR_RETURN(
      auto qp, rdma::QueuePair::CreateRc(*device_, *pd_, *c->send_cq, *recv_cq_, caps, gid_index_));
  c->qp.emplace(std::move(qp));
  return c;
}

absl::Status RdmaService::Disconnect(uint64_t connection_id) {
  std::shared_ptr<Connection> c = Find(connection_id);
  if (c == nullptr) return absl::NotFoundError(absl::StrCat("no RDMA connection ", connection_id));
  Teardown(std::move(c));
  return absl::OkStatus();
}

bool RdmaService::IsLive(uint64_t connection_id) {
  std::shared_ptr<Connection> c = Find(connection_id);
  return c != nullptr && !c->dead;
}

void RdmaService::Teardown(std::shared_ptr<Connection> c) {
  // Dead first: the leases' windows are then deallocated without an
  // invalidate on a QP that is going away.
  c->dead = true;
  // After StopPoller() the LeaseTable may be gone; its destructor (or that
  // of the lease) revokes the windows still bound on this connection.
  if (!stop_.load()) leases_->ReleaseHeldBy(c->id);
  // Its waiting commits would only be refused (their leases are gone) and
  // hold the connection's buffers meanwhile.
  DropQueuedCommits(c->id);
  absl::MutexLock lock(&mu_);
  conns_.erase(c->id);
  // The QP is destroyed with the last reference to c: ours, or a window's.
}

void RdmaService::Reap(std::shared_ptr<Connection> c) {
  c->dead = true;
  DropQueuedCommits(c->id);
  {
    absl::MutexLock lock(&mu_);
    conns_.erase(c->id);
  }
  // Its leases (and through their windows the queue pair) live on until
  // the reaper has ended them.
  absl::MutexLock lock(&reap_mu_);
  reap_.push_back(c->id);
}

void RdmaService::ReapLoop() {
  for (;;) {
    uint64_t id;
    {
      absl::MutexLock lock(&reap_mu_);
      reap_mu_.Await(absl::Condition(
          +[](RdmaService* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->reap_mu_) {
            return s->reap_stop_ || !s->reap_.empty();
          },
          this));
      if (reap_.empty()) return;  // stopping, and nothing is left
      id = reap_.front();
      reap_.pop_front();
    }
    // Stopping: the LeaseTable's destructor ends the leases, as Teardown()
    // leaves them then.
    if (!stop_.load()) leases_->ReleaseHeldBy(id);
  }
}

absl::StatusOr<std::unique_ptr<LeaseWriteKey>> RdmaService::BindLease(uint64_t connection_id,
                                                                      const LeaseInfo& lease) {
  std::shared_ptr<Connection> c = Find(connection_id);
  if (c == nullptr || c->dead) {
    return absl::UnavailableError(
        absl::StrCat("no live RDMA connection ", connection_id, ": connect the queue pair again"));
  }
  KV_ASSIGN_OR_RETURN(
      std::unique_ptr<LeaseWindow> window,
      LeaseWindow::Bind(this, c, pool_->data() + lease.chunk.offset, lease.chunk.length));
  c->Touch();
  bound_->Increment();
  return std::unique_ptr<LeaseWriteKey>(std::move(window));
}

// ---------------------------------------------------------------------------
// RdmaService: the poller

void RdmaService::PollLoop() {
  ibv_wc wcs[32];
  absl::Time next_probe = absl::Now() + absl::Seconds(1);
  while (!stop_.load(std::memory_order_relaxed)) {
    if (absl::Now() >= next_probe) {
      ProbeIdle();
      next_probe = absl::Now() + std::min(options_.idle_probe_after / 2, absl::Seconds(5));
    }
    const int n = recv_cq_->Poll(wcs, 32);
    if (n == 0) {
      // Sleep on the completion channel: no CPU while only GETs are running.
      auto woke = recv_cq_->WaitForEvent(absl::Milliseconds(200));
      if (woke.ok() && *woke) wakeups_->Increment();
      continue;
    }
    std::vector<std::shared_ptr<Connection>> dead;
    for (int i = 0; i < n; ++i) {
      std::shared_ptr<Connection> c = HandleReceive(wcs[i]);
      if (c != nullptr) dead.push_back(std::move(c));
    }
    // After the batch: a connection may appear more than once in it.
    for (auto& c : dead) {
      if (Find(c->id) != nullptr) {
        LOG(INFO) << "RDMA connection " << c->id << " (" << c->owner << ") closed";
        reaped_->Increment();
        Reap(c);
      }
    }
  }
}

std::shared_ptr<RdmaService::Connection> RdmaService::HandleReceive(const ibv_wc& wc) {
  // Connect() packed the connection id and the buffer slot into wr_id.
  const uint64_t conn_id = wc.wr_id >> 16;
  const uint32_t slot = static_cast<uint32_t>(wc.wr_id & 0xffff);
  std::shared_ptr<Connection> c = Find(conn_id);
  if (c == nullptr) return nullptr;  // torn down already; a flushed receive
  if (wc.status != IBV_WC_SUCCESS) {
    // After any QP error every posted receive flushes: log the first only.
    if (!c->dead.exchange(true) || wc.status != IBV_WC_WR_FLUSH_ERR) {
      VLOG(1) << "RDMA connection " << conn_id << " failed: " << rdma::WcStatusToStatus(wc);
    }
    return c;
  }
  char* buf = c->recv_mem.data() + size_t{slot} * slot_bytes_;
  const absl::string_view message(buf, std::min<uint32_t>(wc.byte_len, slot_bytes_));
  // In cluster mode a commit may wait for backups: a worker thread takes it
  // (rdma_service_workers.cc), so this thread keeps receiving.
  if (!Dispatch(c, message)) HandleCommit(c, message);
  // The buffer is free again once the commit is handled (the ack is a copy).
  rdma::Sge sge{reinterpret_cast<uint64_t>(buf), slot_bytes_, c->recv_mr->lkey()};
  if (!c->qp->PostRecv(sge, wc.wr_id).ok()) c->dead = true;
  return c->dead ? c : nullptr;
}

void RdmaService::ProbeIdle() {
  const int64_t cutoff = absl::ToUnixNanos(absl::Now() - options_.idle_probe_after);
  // Connections holding a lease are not probed: a live client renews its
  // leases, and a dead one's expire first. Asked before taking mu_ (leaf).
  const absl::flat_hash_set<uint64_t> holders = leases_->KeyHolders();
  std::vector<std::shared_ptr<Connection>> idle;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, c] : conns_) {
      if (c->dead || c->probe_rkey == 0 || holders.contains(id) ||
          c->last_activity_ns.load(std::memory_order_relaxed) > cutoff) {
        continue;
      }
      idle.push_back(c);
    }
  }
  for (auto& c : idle) {
    // An 8-byte RDMA WRITE into the probe word the client registered: it
    // consumes no receive buffer and the client's CPU never sees it; a live
    // client's NIC acknowledges it. A dead client never does: the QP fails,
    // its receives flush into the poller, which tears the connection down.
    probes_->Increment();
    c->Touch();
    absl::MutexLock lock(&c->send_mu);
    c->ReapSends();
    if (c->dead) continue;
    rdma::Sge sge{reinterpret_cast<uint64_t>(c->ack_mem.data()), 8, c->ack_mr->lkey()};
    absl::Status s = c->qp->PostWrite(absl::MakeConstSpan(&sge, 1), c->probe_addr, c->probe_rkey,
                                      kProbeTag | c->next_wr++, /*signaled=*/true);
    if (!s.ok()) c->dead = true;
  }
}

}  // namespace server
}  // namespace kvstore
