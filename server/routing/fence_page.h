// Copyright 2026 The kvstore Authors.
//
// FencePage: the server's fence words (common/protocol/fence.h) in a page of
// their own, which the RDMA service registers read-only as the
// REGION_KIND_FENCE region so one-sided readers can check them.
//
// Single-node mode publishes {0, kNoExpiry} once. In cluster mode the
// membership layer renews valid_until after every counted lease renewal
// (membership.h) to a moment before the lease can expire, writes the
// applied map epoch, and Fence()s
// when it can no longer prove its lease (readers then refuse its data even
// if this process is frozen right after: valid_until stops moving).
//
// Thread safety: thread-safe; each word is one aligned atomic store.

#ifndef KVSTORE_SERVER_ROUTING_FENCE_PAGE_H_
#define KVSTORE_SERVER_ROUTING_FENCE_PAGE_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "common/protocol/fence.h"

namespace kvstore {
namespace server {

class FencePage {
 public:
  // A page holding {0, kNoExpiry}: single-node mode, never expires.
  FencePage();
  ~FencePage();
  FencePage(const FencePage&) = delete;
  FencePage& operator=(const FencePage&) = delete;

  void set_map_epoch(uint64_t epoch);
  // Unix milliseconds until which readers may trust this server's data.
  void set_valid_until_ms(uint64_t unix_ms);
  // valid_until = 0: readers refuse everything read with it.
  void Fence() { set_valid_until_ms(0); }

  fence::FenceWords words() const;
  // The page to register: kPageBytes, page-aligned, the words at offset 0.
  void* data() { return page_; }
  static constexpr uint64_t kPageBytes = 4096;

 private:
  void* page_;
  std::atomic<uint64_t>* epoch_;
  std::atomic<uint64_t>* valid_until_;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_ROUTING_FENCE_PAGE_H_
