// Copyright 2026 The kvstore Authors.

#include "server/routing/fence_page.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace kvstore {
namespace server {

static_assert(sizeof(std::atomic<uint64_t>) == 8 && std::atomic<uint64_t>::is_always_lock_free,
              "fence words are read remotely as plain 8-byte words");

FencePage::FencePage() {
  page_ = std::aligned_alloc(kPageBytes, kPageBytes);
  if (page_ == nullptr) throw std::bad_alloc();
  std::memset(page_, 0, kPageBytes);
  epoch_ = new (page_) std::atomic<uint64_t>(0);
  valid_until_ = new (static_cast<char*>(page_) + 8) std::atomic<uint64_t>(fence::kNoExpiry);
}

FencePage::~FencePage() { std::free(page_); }

void FencePage::set_map_epoch(uint64_t epoch) { epoch_->store(epoch, std::memory_order_release); }

void FencePage::set_valid_until_ms(uint64_t unix_ms) {
  valid_until_->store(unix_ms, std::memory_order_release);
}

fence::FenceWords FencePage::words() const {
  return {epoch_->load(std::memory_order_acquire), valid_until_->load(std::memory_order_acquire)};
}

}  // namespace server
}  // namespace kvstore
