// Copyright 2026 The kvstore Authors.

#include "server/rdma/rdma_service.h"

#include <infiniband/verbs.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/protocol/commit_wire.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace kvstore {
namespace server {

namespace {

// Send-queue work request ids on a connection's own send CQ.
constexpr uint64_t kAckTag = uint64_t{1} << 62;
constexpr uint64_t kBindTag = uint64_t{2} << 62;
constexpr uint64_t kInvalidateTag = uint64_t{3} << 62;
// Probes reuse the invalidate tag space with the top bit of the counter set.
constexpr uint64_t kProbeTag = kInvalidateTag | (uint64_t{1} << 61);
constexpr uint64_t kTagMask = uint64_t{3} << 62;

constexpr int kServerAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;

}  // namespace

// One client queue pair. Members are declared in destruction-safe order:
// the QP (last) goes first, then its buffers' MRs, then its send CQ.
struct RdmaService::Connection {
  uint64_t id = 0;
  std::string owner;
  uint32_t credits = 0;
  std::optional<rdma::CompletionQueue> send_cq;
  std::vector<char> recv_mem;
  std::optional<rdma::MemoryRegion> recv_mr;
  std::vector<char> ack_mem;
  std::optional<rdma::MemoryRegion> ack_mr;
  std::optional<rdma::QueuePair> qp;

  absl::Mutex send_mu;  // posting on qp's send queue and polling send_cq
  uint32_t ack_next ABSL_GUARDED_BY(send_mu) = 0;
  int send_outstanding ABSL_GUARDED_BY(send_mu) = 0;
  uint64_t next_wr ABSL_GUARDED_BY(send_mu) = 0;
  std::atomic<bool> dead{false};
  uint64_t probe_addr = 0;  // client memory for idle probes (rkey 0: none)
  uint32_t probe_rkey = 0;
  std::atomic<int64_t> last_activity_ns{0};  // absl::ToUnixNanos
  void Touch() {
    last_activity_ns.store(absl::ToUnixNanos(absl::Now()), std::memory_order_relaxed);
  }
};

// The write key of one lease. The window is declared after the MR so it is
// deallocated first (ibv_dereg_mr fails while a window is bound on the MR).
struct RdmaService::LeaseKey {
  uint64_t connection_id = 0;
  std::optional<rdma::MemoryRegion> mr;
  std::optional<rdma::MemoryWindow> mw;
};

RdmaService::RdmaService(rdma::Device* device, rdma::ProtectionDomain* pd, MemoryPool* pool,
                         KvStore* store, LeaseTable* leases, const RdmaServiceOptions& options)
    : device_(device),
      pd_(pd),
      pool_(pool),
      store_(store),
      leases_(leases),
      options_(options),
      slot_bytes_(static_cast<uint32_t>((wire::CommitBytes(store->limits().max_key_bytes) + 63) /
                                        64 * 64)) {}

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
  const int depth = static_cast<int>(
      std::min<uint64_t>(32768, uint64_t{options.max_connections} * options.commit_credits));
  KV_ASSIGN_OR_RETURN(auto cq, rdma::CompletionQueue::Create(*device, depth, &*s->channel_));
  s->recv_cq_.emplace(std::move(cq));
  KV_RETURN_IF_ERROR(s->recv_cq_->RequestNotify());
  s->poller_ = std::thread([p = s.get()] { p->PollLoop(); });
  return s;
}

RdmaService::~RdmaService() {
  StopPoller();
  // Every window must be gone before the queue pair it is bound to: a QP
  // destroyed with a bound type-2 window blocks for about a minute.
  absl::flat_hash_map<uint64_t, std::unique_ptr<LeaseKey>> keys;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Connection>> conns;
  {
    absl::MutexLock lock(&mu_);
    keys.swap(lease_keys_);
    conns.swap(conns_);
  }
  keys.clear();
  conns.clear();
  recv_cq_.reset();
  channel_.reset();
}

void RdmaService::StopPoller() {
  if (stop_.exchange(true)) return;
  if (poller_.joinable()) poller_.join();
}

std::shared_ptr<RdmaService::Connection> RdmaService::Find(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = conns_.find(id);
  return it == conns_.end() ? nullptr : it->second;
}

absl::StatusOr<RdmaService::Accepted> RdmaService::Connect(const rdma::QpEndpoint& client,
                                                           std::string owner, uint64_t probe_addr,
                                                           uint32_t probe_rkey) {
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    if (conns_.size() >= options_.max_connections) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "too many RDMA connections (", options_.max_connections, "); use TCP or retry later"));
    }
    id = next_id_++;
  }
  auto c = std::make_shared<Connection>();
  c->id = id;
  c->owner = std::move(owner);
  c->credits = options_.commit_credits;
  c->probe_addr = probe_addr;
  c->probe_rkey = probe_rkey;
  const uint32_t credits = c->credits;
  rdma::QpCaps caps;
  caps.max_send_wr = 2 * credits + 16;
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
  c->ack_mem.assign(size_t{credits} * wire::kAckBytes, 0);
  KV_ASSIGN_OR_RETURN(auto ack_mr,
                      rdma::MemoryRegion::Register(*pd_, c->ack_mem.data(), c->ack_mem.size(),
                                                   IBV_ACCESS_LOCAL_WRITE));
  c->ack_mr.emplace(std::move(ack_mr));
  KV_ASSIGN_OR_RETURN(
      auto qp, rdma::QueuePair::CreateRc(*device_, *pd_, *c->send_cq, *recv_cq_, caps, gid_index_));
  c->qp.emplace(std::move(qp));
  KV_RETURN_IF_ERROR(c->qp->Connect(client, kServerAccess));
  // Receives can be posted from INIT on; the client sends nothing before it
  // has our endpoint, so posting them now is early enough.
  for (uint32_t slot = 0; slot < credits; ++slot) {
    rdma::Sge sge{reinterpret_cast<uint64_t>(c->recv_mem.data()) + uint64_t{slot} * slot_bytes_,
                  slot_bytes_, c->recv_mr->lkey()};
    KV_RETURN_IF_ERROR(c->qp->PostRecv(sge, (id << 16) | slot));
  }
  Accepted out;
  out.connection_id = id;
  out.server = c->qp->local();
  out.commit_credits = credits;
  out.max_commit_bytes = slot_bytes_;
  c->Touch();
  {
    absl::MutexLock lock(&mu_);
    conns_[id] = std::move(c);
  }
  connections_total_++;
  return out;
}

absl::Status RdmaService::Disconnect(uint64_t connection_id) {
  std::shared_ptr<Connection> c = Find(connection_id);
  if (c == nullptr) return absl::NotFoundError(absl::StrCat("no RDMA connection ", connection_id));
  Teardown(std::move(c));
  return absl::OkStatus();
}

void RdmaService::Teardown(std::shared_ptr<Connection> c) {
  c->dead = true;
  std::vector<uint64_t> owned;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [lease_id, key] : lease_keys_) {
      if (key->connection_id == c->id) owned.push_back(lease_id);
    }
  }
  // Ending the leases revokes their windows (RevokeLease) while the QP exists.
  if (!stop_.load()) {
    for (uint64_t lease_id : owned) (void)leases_->Release(lease_id);
  }
  std::vector<std::unique_ptr<LeaseKey>> leftovers;
  {
    absl::MutexLock lock(&mu_);
    for (uint64_t lease_id : owned) {
      auto it = lease_keys_.find(lease_id);
      if (it != lease_keys_.end()) {
        leftovers.push_back(std::move(it->second));
        lease_keys_.erase(it);
      }
    }
    conns_.erase(c->id);
  }
  leftovers.clear();  // windows before the QP (dropped with the last reference to c)
}

absl::Status RdmaService::WaitSend(Connection& c, uint64_t wr_id) {
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  ibv_wc wc[16];
  while (absl::Now() < deadline) {
    int n = c.send_cq->Poll(wc, 16);
    for (int i = 0; i < n; ++i) {
      if ((wc[i].wr_id & kTagMask) == kAckTag) c.send_outstanding--;
      if (wc[i].status != IBV_WC_SUCCESS) c.dead = true;
      if (wc[i].wr_id == wr_id) return rdma::WcStatusToStatus(wc[i]);
    }
    if (n == 0) std::this_thread::yield();
  }
  c.dead = true;
  return absl::DeadlineExceededError("send completion did not arrive");
}

void RdmaService::ReapSends(Connection& c, int min_to_reap) {
  ibv_wc wc[16];
  int reaped = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  for (;;) {
    int n = c.send_cq->Poll(wc, 16);
    for (int i = 0; i < n; ++i) {
      if ((wc[i].wr_id & kTagMask) == kAckTag) c.send_outstanding--;
      if (wc[i].status != IBV_WC_SUCCESS) c.dead = true;
    }
    reaped += n;
    if (reaped >= min_to_reap || c.dead) return;
    if (absl::Now() > deadline) {
      c.dead = true;
      return;
    }
    std::this_thread::yield();
  }
}

void RdmaService::SendAck(Connection& c, uint64_t request_id, const absl::Status& status) {
  if (c.dead) return;
  absl::MutexLock lock(&c.send_mu);
  ReapSends(c, 0);
  if (c.send_outstanding >= static_cast<int>(c.credits)) ReapSends(c, 1);
  if (c.dead) return;
  char* buf = c.ack_mem.data() + size_t{c.ack_next} * wire::kAckBytes;
  const size_t len = wire::EncodeAck(request_id, status, buf);
  rdma::Sge sge{reinterpret_cast<uint64_t>(buf), static_cast<uint32_t>(len), c.ack_mr->lkey()};
  absl::Status s = c.qp->PostSend(absl::MakeConstSpan(&sge, 1), kAckTag | c.ack_next,
                                  /*signaled=*/true, /*inline_data=*/len <= 64);
  if (!s.ok()) {
    LOG(WARNING) << "RDMA connection " << c.id << ": " << s;
    c.dead = true;
    return;
  }
  c.send_outstanding++;
  c.ack_next = (c.ack_next + 1) % c.credits;
}

void RdmaService::HandleCommit(Connection& c, absl::string_view message) {
  c.Touch();
  auto parsed = wire::ParseCommit(message);
  if (!parsed.ok()) {
    commit_errors_++;
    uint64_t request_id = 0;
    if (message.size() >= 16) std::memcpy(&request_id, message.data() + 8, 8);
    SendAck(c, request_id, parsed.status());
    return;
  }
  const wire::CommitRequest& h = parsed->header;
  absl::Status status;
  if (static_cast<wire::CommitOp>(h.op) == wire::CommitOp::kPut) {
    uint64_t owner = 0;
    {
      absl::MutexLock lock(&mu_);
      auto it = lease_keys_.find(h.lease_id);
      if (it != lease_keys_.end()) owner = it->second->connection_id;
    }
    if (owner == 0) {
      status = absl::AbortedError(
          absl::StrCat("lease ", h.lease_id,
                       " is not active (expired, released or never granted): redo the PUT"));
    } else if (owner != c.id) {
      status = absl::PermissionDeniedError(
          absl::StrCat("lease ", h.lease_id, " belongs to another connection"));
    } else {
      status = leases_->Commit(h.lease_id, h.offset, h.size);
    }
    if (status.ok()) commits_++;
  } else {
    status = store_->Delete(parsed->key);
    deletes_++;
  }
  if (!status.ok() && status.code() != absl::StatusCode::kNotFound) commit_errors_++;
  SendAck(c, h.request_id, status);
}

void RdmaService::ProbeIdle() {
  const int64_t cutoff = absl::ToUnixNanos(absl::Now() - options_.idle_probe_after);
  std::vector<std::shared_ptr<Connection>> idle;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, c] : conns_) {
      if (c->dead || c->probe_rkey == 0 ||
          c->last_activity_ns.load(std::memory_order_relaxed) > cutoff) {
        continue;
      }
      bool has_lease = false;
      for (const auto& [lease_id, key] : lease_keys_) {
        if (key->connection_id == id) {
          has_lease = true;
          break;
        }
      }
      if (!has_lease) idle.push_back(c);
    }
  }
  for (auto& c : idle) {
    // An 8-byte RDMA WRITE into the probe word the client registered: it
    // consumes no receive buffer and the client's CPU never sees it; a live
    // client's NIC acknowledges it. A dead client never does: the QP fails,
    // its receives flush into the poller, which tears the connection down.
    probes_++;
    c->Touch();
    absl::MutexLock lock(&c->send_mu);
    ReapSends(*c, 0);
    if (c->dead) continue;
    rdma::Sge sge{reinterpret_cast<uint64_t>(c->ack_mem.data()), 8, c->ack_mr->lkey()};
    absl::Status s = c->qp->PostWrite(absl::MakeConstSpan(&sge, 1), c->probe_addr, c->probe_rkey,
                                      kProbeTag | c->next_wr++, /*signaled=*/true);
    if (!s.ok()) c->dead = true;
  }
}

void RdmaService::PollLoop() {
  ibv_wc wcs[32];
  absl::Time next_probe = absl::Now() + absl::Seconds(1);
  while (!stop_.load(std::memory_order_relaxed)) {
    if (absl::Now() >= next_probe) {
      ProbeIdle();
      next_probe = absl::Now() + std::min(options_.idle_probe_after / 2, absl::Seconds(5));
    }
    int n = recv_cq_->Poll(wcs, 32);
    if (n == 0) {
      // Sleep on the completion channel: no CPU while only GETs are running.
      auto woke = recv_cq_->WaitForEvent(absl::Milliseconds(200));
      if (woke.ok() && *woke) wakeups_++;
      continue;
    }
    std::vector<std::shared_ptr<Connection>> dead;
    for (int i = 0; i < n; ++i) {
      const uint64_t conn_id = wcs[i].wr_id >> 16;
      const uint32_t slot = static_cast<uint32_t>(wcs[i].wr_id & 0xffff);
      std::shared_ptr<Connection> c = Find(conn_id);
      if (c == nullptr) continue;
      if (wcs[i].status != IBV_WC_SUCCESS) {
        if (!c->dead.exchange(true) || wcs[i].status != IBV_WC_WR_FLUSH_ERR) {
          VLOG(1) << "RDMA connection " << conn_id << " failed: " << rdma::WcStatusToStatus(wcs[i]);
        }
        dead.push_back(c);
        continue;
      }
      char* buf = c->recv_mem.data() + size_t{slot} * slot_bytes_;
      HandleCommit(*c, absl::string_view(buf, std::min<uint32_t>(wcs[i].byte_len, slot_bytes_)));
      rdma::Sge sge{reinterpret_cast<uint64_t>(buf), slot_bytes_, c->recv_mr->lkey()};
      if (!c->qp->PostRecv(sge, wcs[i].wr_id).ok()) c->dead = true;
      if (c->dead) dead.push_back(c);
    }
    for (auto& c : dead) {
      if (Find(c->id) != nullptr) {
        LOG(INFO) << "RDMA connection " << c->id << " (" << c->owner << ") closed";
        reaped_++;
        Teardown(c);
      }
    }
  }
}

absl::StatusOr<std::pair<uint32_t, uint64_t>> RdmaService::BindLease(uint64_t connection_id,
                                                                     const LeaseInfo& lease) {
  std::shared_ptr<Connection> c = Find(connection_id);
  if (c == nullptr || c->dead) {
    return absl::UnavailableError(
        absl::StrCat("no live RDMA connection ", connection_id, ": connect the queue pair again"));
  }
  auto key = std::make_unique<LeaseKey>();
  key->connection_id = connection_id;
  char* base = pool_->data() + lease.chunk.offset;
  // The chunk's own MR bounds every write through the window to the chunk.
  KV_ASSIGN_OR_RETURN(auto mr,
                      rdma::MemoryRegion::Register(*pd_, base, lease.chunk.length,
                                                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND));
  key->mr.emplace(std::move(mr));
  KV_ASSIGN_OR_RETURN(auto mw, rdma::MemoryWindow::Alloc(*pd_));
  key->mw.emplace(std::move(mw));
  uint32_t rkey;
  {
    absl::MutexLock lock(&c->send_mu);
    const uint64_t wr_id = kBindTag | c->next_wr++;
    KV_ASSIGN_OR_RETURN(rkey,
                        c->qp->PostBindMw(*key->mw, *key->mr, reinterpret_cast<uint64_t>(base),
                                          lease.chunk.length, IBV_ACCESS_REMOTE_WRITE, wr_id));
    absl::Status s = WaitSend(*c, wr_id);
    if (!s.ok()) {
      key->mw->RollbackBind();
      return absl::UnavailableError(
          absl::StrCat("binding the lease's write key failed: ", s.message()));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    lease_keys_[lease.lease_id] = std::move(key);
  }
  c->Touch();
  bound_++;
  return std::make_pair(rkey, reinterpret_cast<uint64_t>(base));
}

void RdmaService::RevokeLease(const LeaseInfo& lease) {
  std::unique_ptr<LeaseKey> key;
  {
    absl::MutexLock lock(&mu_);
    auto it = lease_keys_.find(lease.lease_id);
    if (it == lease_keys_.end()) return;
    key = std::move(it->second);
    lease_keys_.erase(it);
  }
  std::shared_ptr<Connection> c = Find(key->connection_id);
  if (c != nullptr && !c->dead && key->mw->bound()) {
    absl::MutexLock lock(&c->send_mu);
    const uint64_t wr_id = kInvalidateTag | c->next_wr++;
    absl::Status s = c->qp->PostLocalInvalidate(*key->mw, wr_id);
    if (s.ok()) s = WaitSend(*c, wr_id);
    if (!s.ok()) LOG(WARNING) << "invalidating the key of lease " << lease.lease_id << ": " << s;
  }
  key.reset();  // deallocates the window, then deregisters the chunk's MR
  revoked_++;
}

uint64_t RdmaService::LeaseConnection(uint64_t lease_id) const {
  absl::MutexLock lock(&mu_);
  auto it = lease_keys_.find(lease_id);
  return it == lease_keys_.end() ? 0 : it->second->connection_id;
}

RdmaServiceCounters RdmaService::counters() const {
  RdmaServiceCounters out;
  {
    absl::MutexLock lock(&mu_);
    out.connections_active = conns_.size();
  }
  out.connections_total = connections_total_;
  out.commits = commits_;
  out.commit_errors = commit_errors_;
  out.deletes = deletes_;
  out.lease_keys_bound = bound_;
  out.lease_keys_revoked = revoked_;
  out.poller_wakeups = wakeups_;
  out.idle_probes = probes_;
  out.connections_reaped = reaped_;
  return out;
}

}  // namespace server
}  // namespace kvstore
