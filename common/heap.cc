// Copyright 2026 The kvstore Authors.

#include "common/heap.h"

#include <malloc.h>

#include <cstddef>

// jemalloc's control interface, present only when jemalloc is linked (or
// preloaded); Debian's libjemalloc exports it unprefixed.
extern "C" int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen)
    __attribute__((weak));

namespace kvstore {

HeapAllocator CurrentHeapAllocator() {
  return mallctl != nullptr ? HeapAllocator::kJemalloc : HeapAllocator::kGlibc;
}

void ReleaseFreeHeapMemory() {
  if (mallctl != nullptr) {
    // 4096 is MALLCTL_ARENAS_ALL: every arena. The thread caches are
    // flushed first, or their freed blocks would stay out of the purge.
    (void)mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0);
    (void)mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0);
    return;
  }
  malloc_trim(0);
}

}  // namespace kvstore
