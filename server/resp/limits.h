// Copyright 2026 The kvstore Authors.
//
// Budgets shared by every loop of one RESP port: the count of open
// connections (RespLimits::max_clients) and the pool bytes held by streamed
// SETs still receiving their value (max_inflight_set_bytes). Owned by
// RespServer, borrowed by its loops. Internal to server/resp.
//
// Thread safety: lock-free; any thread. A budget never goes over its cap:
// TryTake() is a compare-and-swap loop, not an add-then-check.

#ifndef KVSTORE_SERVER_RESP_LIMITS_H_
#define KVSTORE_SERVER_RESP_LIMITS_H_

#include <atomic>
#include <cstdint>
#include <limits>

namespace kvstore {
namespace server {
namespace resp_internal {

class Budget {
 public:
  // cap 0 means unbounded.
  explicit Budget(uint64_t cap) : cap_(cap == 0 ? std::numeric_limits<uint64_t>::max() : cap) {}
  Budget(const Budget&) = delete;
  Budget& operator=(const Budget&) = delete;

  // Takes `n` if that keeps the total within the cap; false (nothing
  // taken) otherwise.
  bool TryTake(uint64_t n) {
    uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (n > cap_ || used > cap_ - n) return false;
    } while (!used_.compare_exchange_weak(used, used + n, std::memory_order_relaxed));
    return true;
  }
  // Gives back what an earlier TryTake(n) took.
  void Give(uint64_t n) { used_.fetch_sub(n, std::memory_order_relaxed); }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t cap() const { return cap_; }

 private:
  const uint64_t cap_;
  std::atomic<uint64_t> used_{0};
};

struct SharedBudgets {
  SharedBudgets(uint64_t max_clients, uint64_t max_inflight_set_bytes)
      : clients(max_clients), inflight_set_bytes(max_inflight_set_bytes) {}
  Budget clients;
  Budget inflight_set_bytes;
};

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_LIMITS_H_
