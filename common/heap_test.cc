// Copyright 2026 The kvstore Authors.
//
// Built twice (common/BUILD.bazel): with glibc's malloc and linked with
// jemalloc, as kvserver is; each checks that memory freed on the heap goes
// back to the kernel when asked, and not before.

#include "common/heap.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kvstore {
namespace {

// VmRSS of this process, in KiB.
uint64_t RssKib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  }
  return 0;
}

// The sanitizers bring their own allocator (.bazelrc: --custom_malloc), and
// it keeps freed memory in quarantine.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KV_SANITIZED_ALLOCATOR 1
#endif

TEST(HeapTest, NamesTheAllocatorThisBinaryLinks) {
#ifdef KV_SANITIZED_ALLOCATOR
  GTEST_SKIP() << "the sanitizer's allocator replaces the one linked";
#endif
#ifdef KV_EXPECT_JEMALLOC
  EXPECT_EQ(CurrentHeapAllocator(), HeapAllocator::kJemalloc);
#else
  EXPECT_EQ(CurrentHeapAllocator(), HeapAllocator::kGlibc);
#endif
}

TEST(HeapTest, FreedMemoryGoesBackToTheKernelWhenAsked) {
#ifdef KV_SANITIZED_ALLOCATOR
  GTEST_SKIP() << "the sanitizer's allocator keeps freed memory in quarantine";
#endif
  // 96 MiB in 32 KiB blocks: below glibc's mmap threshold, so they come
  // from the heap proper and a free() alone does not unmap them. Every
  // other block stays allocated until the end, so that the freed ones are
  // holes the allocators keep unless told otherwise.
  constexpr size_t kBlock = 32 << 10;
  constexpr size_t kBlocks = 3072;
  std::vector<char*> blocks;
  for (size_t i = 0; i < kBlocks; ++i) {
    char* p = static_cast<char*>(malloc(kBlock));
    ASSERT_NE(p, nullptr);
    memset(p, 1, kBlock);  // resident
    blocks.push_back(p);
  }
  const uint64_t loaded = RssKib();
  for (size_t i = 0; i < kBlocks; i += 2) free(blocks[i]);
  const uint64_t freed = RssKib();
  ReleaseFreeHeapMemory();
  const uint64_t released = RssKib();
  std::printf("RSS: %lu KiB loaded, %lu KiB after the frees, %lu KiB after the release\n",
              static_cast<unsigned long>(loaded), static_cast<unsigned long>(freed),
              static_cast<unsigned long>(released));
  // Half the 96 MiB was freed; at least half of that (24 MiB) must go.
  EXPECT_LT(released + (24 << 10), freed);
  for (size_t i = 1; i < kBlocks; i += 2) free(blocks[i]);
}

}  // namespace
}  // namespace kvstore
