// Copyright 2026 The kvstore Authors.

#include "common/protocol/xxh3_copy.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// Only for XXH3_kSecret, the default secret as the library defines it: the
// hash must equal the library's. Inlined, so nothing here clashes with the
// linked libxxhash.
#define XXH_INLINE_ALL
#include "xxhash.h"

namespace kvstore {
namespace xxh3 {

namespace {

// XXH3's long-input loop: eight 64-bit accumulators take one 64-byte stripe
// at a time, each stripe keyed by the secret 8 bytes further on; after 16
// stripes (a block) the accumulators are scrambled; the last stripe of the
// input is always taken whole (it may overlap the one before); the
// accumulators are then folded into one word.
constexpr size_t kStripe = 64;
constexpr size_t kSecretSize = sizeof(XXH3_kSecret);
constexpr size_t kStripesPerBlock = (kSecretSize - kStripe) / 8;
constexpr size_t kBlock = kStripe * kStripesPerBlock;
constexpr size_t kScrambleSecret = kSecretSize - kStripe;
constexpr size_t kLastStripeSecret = kSecretSize - kStripe - 7;
constexpr size_t kMergeSecret = 11;
static_assert(kSecretSize == 192 && kBlock == 1024, "XXH3's default secret is 192 bytes");

constexpr uint64_t kPrime32_1 = 0x9E3779B1U;
constexpr uint64_t kPrime32_2 = 0x85EBCA77U;
constexpr uint64_t kPrime32_3 = 0xC2B2AE3DU;
constexpr uint64_t kPrime64_1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime64_2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kPrime64_3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kPrime64_4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kPrime64_5 = 0x27D4EB2F165667C5ULL;

uint64_t Read64(const void* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

uint64_t Fold64(uint64_t a, uint64_t b) {
  const unsigned __int128 product = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(product) ^ static_cast<uint64_t>(product >> 64);
}

uint64_t Merge(const uint64_t acc[8], const uint8_t* secret, uint64_t start) {
  uint64_t h = start;
  for (int i = 0; i < 4; ++i) {
    h += Fold64(acc[2 * i] ^ Read64(secret + 16 * i), acc[2 * i + 1] ^ Read64(secret + 16 * i + 8));
  }
  h ^= h >> 37;
  h *= 0x165667919E3779F9ULL;
  h ^= h >> 32;
  return h;
}

#if defined(__x86_64__)

#define KV_AVX2 __attribute__((target("avx2"), always_inline)) inline

// One stripe at `in` into the accumulators (two 4-lane halves): each lane
// adds the product of the low and high halves of its input word XOR the
// secret's, and its neighbour's input word. The neighbour words are summed
// into `sum` and added once per run of stripes (AddNeighbours): swapping
// neighbours is a permutation of lanes, so the swap of a sum is the sum of
// the swaps, and between two scrambles only the total counts. With `out`,
// the stripe is stored there too: that is the copy.
template <bool kCopy>
KV_AVX2 void Stripe(__m256i acc[2], __m256i sum[2], const char* in, char* out,
                    const uint8_t* secret) {
  for (int j = 0; j < 2; ++j) {
    const __m256i data = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 32 * j));
    if (kCopy) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * j), data);
    const __m256i key = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(secret + 32 * j));
    const __m256i keyed = _mm256_xor_si256(data, key);
    const __m256i product = _mm256_mul_epu32(keyed, _mm256_srli_epi64(keyed, 32));
    acc[j] = _mm256_add_epi64(acc[j], product);
    sum[j] = _mm256_add_epi64(sum[j], data);
    // Kept in registers, one add a stripe: left free, the compiler
    // reassociates an unrolled run's sums into trees and spills them.
    __asm__("" : "+x"(acc[j]), "+x"(sum[j]));
  }
}

// `n` consecutive stripes, copied, in straight-line code.
template <int n>
KV_AVX2 void CopyStripes(__m256i acc[2], __m256i sum[2], const char* in, char* out,
                         const uint8_t* secret) {
#pragma GCC unroll 8
  for (int i = 0; i < n; ++i) {
    Stripe<true>(acc, sum, in + i * kStripe, out + i * kStripe, secret + 8 * i);
  }
}

// The neighbour words of the stripes summed into `sum`, swapped into place.
KV_AVX2 void AddNeighbours(__m256i acc[2], const __m256i sum[2]) {
  for (int j = 0; j < 2; ++j) {
    acc[j] = _mm256_add_epi64(acc[j], _mm256_shuffle_epi32(sum[j], _MM_SHUFFLE(1, 0, 3, 2)));
  }
}

KV_AVX2 void Scramble(__m256i acc[2], const uint8_t* secret) {
  const __m256i prime = _mm256_set1_epi32(static_cast<int>(kPrime32_1));
  for (int j = 0; j < 2; ++j) {
    const __m256i key = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(secret + 32 * j));
    __m256i a = _mm256_xor_si256(acc[j], _mm256_srli_epi64(acc[j], 47));
    a = _mm256_xor_si256(a, key);
    // A 64-bit lane times a 32-bit constant, from two 32x32 products.
    const __m256i low = _mm256_mul_epu32(a, prime);
    const __m256i high = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), prime);
    acc[j] = _mm256_add_epi64(low, _mm256_slli_epi64(high, 32));
  }
}

// `count` stripes from `*offset` on, keyed from the secret's start: those
// that start at or after `copy_from` come from `src` (whose byte 0 is run
// byte `from`) and are stored into the run; earlier ones are in the run.
KV_AVX2 void Stripes(__m256i acc[2], char* run, size_t* offset, size_t count, size_t copy_from,
                     size_t from, const char* src) {
  __m256i sum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  const uint8_t* secret = XXH3_kSecret;
  const uint8_t* const secret_end = secret + 8 * count;
  for (; secret < secret_end && *offset < copy_from; secret += 8, *offset += kStripe) {
    Stripe<false>(acc, sum, run + *offset, nullptr, secret);
  }
  const char* in = src + (*offset - from);
  char* out = run + *offset;
  size_t left = static_cast<size_t>(secret_end - secret) / 8;
  *offset += kStripe * left;
  // Eight stripes a turn (half a block), then four, two and one: the loop's
  // own arithmetic costs about a third of a stripe each time round, and a
  // value's first block has one stripe fewer to copy (the entry's header
  // and key start it).
  for (; left >= 8; left -= 8, secret += 64, in += 8 * kStripe, out += 8 * kStripe) {
    CopyStripes<8>(acc, sum, in, out, secret);
  }
  if (left & 4) {
    CopyStripes<4>(acc, sum, in, out, secret);
    secret += 32, in += 4 * kStripe, out += 4 * kStripe;
  }
  if (left & 2) {
    CopyStripes<2>(acc, sum, in, out, secret);
    secret += 16, in += 2 * kStripe, out += 2 * kStripe;
  }
  if (left & 1) CopyStripes<1>(acc, sum, in, out, secret);
  AddNeighbours(acc, sum);
}

__attribute__((target("avx2"))) uint64_t CopyAndHashAvx2(char* run, size_t len, size_t from,
                                                         const char* src) {
  // Stripes from the first stripe boundary at or after `from` are copied as
  // they are hashed; the value bytes before that boundary go first, and
  // those after the last whole stripe before the final (overlapping) one.
  const size_t copy_from = std::min(len, (from + kStripe - 1) / kStripe * kStripe);
  std::memcpy(run + from, src, copy_from - from);
  __m256i acc[2] = {
      _mm256_set_epi64x(static_cast<int64_t>(kPrime64_3), static_cast<int64_t>(kPrime64_2),
                        static_cast<int64_t>(kPrime64_1), static_cast<int64_t>(kPrime32_3)),
      _mm256_set_epi64x(static_cast<int64_t>(kPrime32_1), static_cast<int64_t>(kPrime64_5),
                        static_cast<int64_t>(kPrime32_2), static_cast<int64_t>(kPrime64_4)),
  };
  const size_t blocks = (len - 1) / kBlock;
  size_t offset = 0;
  for (size_t b = 0; b < blocks; ++b) {
    Stripes(acc, run, &offset, kStripesPerBlock, copy_from, from, src);
    Scramble(acc, XXH3_kSecret + kScrambleSecret);
  }
  Stripes(acc, run, &offset, ((len - 1) - kBlock * blocks) / kStripe, copy_from, from, src);
  const size_t copied = std::max(offset, copy_from);
  std::memcpy(run + copied, src + (copied - from), len - copied);
  __m256i last[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  Stripe<false>(acc, last, run + len - kStripe, nullptr, XXH3_kSecret + kLastStripeSecret);
  AddNeighbours(acc, last);
  alignas(32) uint64_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc[0]);
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes + 4), acc[1]);
  return Merge(lanes, XXH3_kSecret + kMergeSecret, len * kPrime64_1);
}

#undef KV_AVX2

#endif  // __x86_64__

}  // namespace

bool CopyAndHashAvailable() {
#if defined(__x86_64__)
  static const bool kAvx2 = __builtin_cpu_supports("avx2");
  return kAvx2;
#else
  return false;
#endif
}

uint64_t CopyAndHash(char* run, size_t len, size_t from, const char* src) {
#if defined(__x86_64__)
  return CopyAndHashAvx2(run, len, from, src);
#else
  std::memcpy(run + from, src, len - from);
  return XXH3_64bits(run, len);
#endif
}

}  // namespace xxh3
}  // namespace kvstore
