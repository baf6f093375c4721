// Copyright 2026 The kvstore Authors.

#include "common/protocol/xxh3_copy.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "xxhash.h"

namespace kvstore {
namespace xxh3 {
namespace {

class CopyAndHashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CopyAndHashAvailable()) GTEST_SKIP() << "no AVX2 on this CPU: callers copy, then hash";
    const uint32_t seed = std::random_device{}();
    std::printf("seed %u\n", seed);
    rng_.seed(seed);
  }

  std::string Random(size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng_());
    return s;
  }

  // Hashes `len` bytes whose tail from `from` on comes from an unaligned
  // source, and compares hash and bytes with memcpy + libxxhash.
  void Check(size_t len, size_t from, size_t run_misalign, size_t src_misalign) {
    const std::string want = Random(len);
    std::vector<char> run(len + 64 + 8, '\x5a');
    char* r = run.data() + run_misalign;
    std::memcpy(r, want.data(), from);
    std::vector<char> src(len - from + 64);
    std::memcpy(src.data() + src_misalign, want.data() + from, len - from);
    const uint64_t got = CopyAndHash(r, len, from, src.data() + src_misalign);
    ASSERT_EQ(got, XXH3_64bits(want.data(), len))
        << "len " << len << " from " << from << " misaligned " << run_misalign << "/"
        << src_misalign;
    ASSERT_EQ(std::string(r, len), want) << "len " << len << " from " << from;
    // Nothing written past the run.
    for (size_t i = 0; i < 8; ++i) ASSERT_EQ(r[len + i], '\x5a') << "len " << len;
  }

  std::mt19937 rng_;
};

TEST_F(CopyAndHashTest, EqualsCopyThenXxh3ForEveryLengthAroundTheStripesAndBlocks) {
  // Every length up to three blocks and a bit, each with the copied part
  // starting at several places: inside the first stripe, on a stripe
  // boundary, in the last stripe, at the end (nothing to copy).
  for (size_t len = kShortInputMax + 1; len <= 3 * 1024 + 200; ++len) {
    for (size_t from : {size_t{0}, size_t{1}, size_t{40}, size_t{64}, size_t{200}, len / 2,
                        len - 65, len - 64, len - 1, len}) {
      Check(len, from, len % 8, (len / 8) % 32);
    }
  }
}

TEST_F(CopyAndHashTest, EqualsCopyThenXxh3ForLargeRandomRuns) {
  for (int i = 0; i < 300; ++i) {
    const size_t len = kShortInputMax + 1 + rng_() % (1 << 20);
    Check(len, rng_() % (len + 1), rng_() % 8, rng_() % 32);
  }
  // The sizes of the store's usual entries: a 16-byte key, 4 KiB and 1 MiB values.
  Check(24 + 16 + 4096, 24 + 16, 8, 3);
  Check(24 + 16 + (1 << 20), 24 + 16, 8, 0);
}

}  // namespace
}  // namespace xxh3
}  // namespace kvstore
