// Copyright 2026 The kvstore Authors.

#include "server/rdma/rdma_connection.h"

#include <thread>

namespace kvstore {
namespace server {

using rdma_internal::kSendTimeout;

absl::Status RdmaService::Connection::WaitSend(uint64_t wr_id) {
  const absl::Time deadline = absl::Now() + kSendTimeout;
  for (;;) {
    {
      absl::MutexLock lock(&send_mu);
      ReapSends();
      auto it = finished.find(wr_id);
      if (it != finished.end()) {
        const ibv_wc wc = it->second;
        finished.erase(it);
        return rdma::WcStatusToStatus(wc);
      }
      if (absl::Now() >= deadline) {
        dead = true;
        return absl::DeadlineExceededError("send completion did not arrive");
      }
    }
    // Binds and invalidations complete in microseconds: spin, politely.
    std::this_thread::yield();
  }
}

void RdmaService::Connection::ReapSends() {
  ibv_wc wc[16];
  for (;;) {
    const int n = send_cq->Poll(wc, 16);
    for (int i = 0; i < n; ++i) Account(wc[i]);
    if (n < 16) return;
  }
}

}  // namespace server
}  // namespace kvstore
