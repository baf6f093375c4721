// Copyright 2026 The kvstore Authors.
//
// RdmaService's fencing (split from rdma_service.cc by job): the READ-only
// registration of the fence page, and FenceAll()/Unfence(), the server's own
// half of fencing (docs/architecture.md §19.5).

#include <infiniband/verbs.h>

#include <memory>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "glog/logging.h"
#include "server/rdma/rdma_connection.h"
#include "server/rdma/rdma_service.h"

namespace kvstore {
namespace server {

// READ only: a reader can learn the fence words but never change them.
absl::Status RdmaService::RegisterFencePage() {
  if (options_.fence_page == nullptr) return absl::OkStatus();
  KV_ASSIGN_OR_RETURN(rdma::MemoryRegion mr,
                      rdma::MemoryRegion::Register(*pd_, options_.fence_page->data(),
                                                   FencePage::kPageBytes, IBV_ACCESS_REMOTE_READ));
  fence_region_ = FenceRegion{mr.addr(), mr.rkey(), fence::kFenceBytes};
  fence_mr_.emplace(std::move(mr));
  return absl::OkStatus();
}

// ERR, not a teardown alone: the QP's destruction may wait for the last
// lease window to let go of the connection, and a destroyed QP's client
// only learns of it when its next work request times out. In ERR the
// responder drops the client's requests at once and its receives flush.
void RdmaService::FailQueuePair(Connection& c) {
  absl::MutexLock lock(&c.send_mu);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  if (const int rc = ibv_modify_qp(c.qp->get(), &attr, IBV_QP_STATE); rc != 0) {
    LOG(WARNING) << "fencing RDMA connection " << c.id << ": ibv_modify_qp(ERR) failed, errno "
                 << rc << "; tearing it down anyway";
  }
}

// The flag is set under mu_ as the table is emptied, and Connect()
// publishes under mu_ only when the flag is clear: a connection is either
// taken here or refused. Taken out of the table first, so the poller, which
// sees their receives flush, finds nothing left to reap.
int RdmaService::FenceAll() {
  std::vector<std::shared_ptr<Connection>> victims;
  {
    absl::MutexLock lock(&mu_);
    if (!fenced_) fences_->Increment();
    fenced_ = true;
    victims.reserve(conns_.size());
    for (auto& [id, c] : conns_) victims.push_back(std::move(c));
    conns_.clear();
  }
  for (auto& c : victims) {
    // Dead first: nothing more is posted on it (acks, binds, probes).
    c->dead = true;
    FailQueuePair(*c);
    // Ends its leases (revoking their windows without an invalidate).
    Teardown(c);
  }
  if (!victims.empty()) {
    LOG(WARNING) << "RDMA service fenced: " << victims.size()
                 << " client queue pair(s) moved to the error state; none accepted until unfenced";
  }
  return static_cast<int>(victims.size());
}

void RdmaService::Unfence() {
  absl::MutexLock lock(&mu_);
  if (fenced_) LOG(INFO) << "RDMA service unfenced: accepting queue pairs again";
  fenced_ = false;
}

bool RdmaService::fenced() const {
  absl::MutexLock lock(&mu_);
  return fenced_;
}

}  // namespace server
}  // namespace kvstore
