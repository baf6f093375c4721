// Copyright 2026 The kvstore Authors.

#include "server/storage/eviction.h"

#include <algorithm>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/byte_size.h"

namespace kvstore {
namespace server {

namespace {

constexpr struct {
  EvictionPolicy policy;
  absl::string_view name;
} kPolicies[] = {
    {EvictionPolicy::kNoEviction, "noeviction"},    {EvictionPolicy::kAllKeysLru, "allkeys-lru"},
    {EvictionPolicy::kAllKeysLfu, "allkeys-lfu"},   {EvictionPolicy::kVolatileLru, "volatile-lru"},
    {EvictionPolicy::kVolatileLfu, "volatile-lfu"}, {EvictionPolicy::kVolatileTtl, "volatile-ttl"},
};

}  // namespace

absl::string_view PolicyName(EvictionPolicy p) {
  for (const auto& e : kPolicies) {
    if (e.policy == p) return e.name;
  }
  return "noeviction";
}

std::optional<EvictionPolicy> ParsePolicy(absl::string_view name) {
  std::string n = absl::AsciiStrToLower(name);
  std::replace(n.begin(), n.end(), '_', '-');
  for (const auto& e : kPolicies) {
    if (e.name == n) return e.policy;
  }
  return std::nullopt;
}

absl::StatusOr<uint64_t> ParseMaxMemory(absl::string_view text, uint64_t pool_bytes) {
  const absl::Status bad = absl::InvalidArgumentError(
      absl::StrCat("maxmemory '", text.substr(0, 64),
                   "' is neither 0, a size (768M, 2G, 100mb) nor a percentage of the pool (75%)"));
  if (absl::EndsWith(text, "%")) {
    uint32_t percent;
    if (!absl::SimpleAtoi(text.substr(0, text.size() - 1), &percent) || percent == 0 ||
        percent > 100) {
      return bad;
    }
    return pool_bytes * percent / 100;
  }
  // "100mb", Redis's spelling, parses as "100MB" does.
  absl::StatusOr<uint64_t> v = ParseByteSize(text);
  if (!v.ok()) return bad;
  return *v;
}

AccessCounts::AccessCounts(uint64_t units)
    : units_(units), words_(new std::atomic<uint64_t>[(units + 31) / 32]()) {}

void AccessCounts::Touch(uint64_t offset_units) {
  if (offset_units >= units_) return;
  std::atomic<uint64_t>& w = words_[offset_units / 32];
  const int shift = static_cast<int>(offset_units % 32) * 2;
  uint64_t old = w.load(std::memory_order_relaxed);
  // Already saturated: no write, so hot keys cost a load, not a CAS.
  while (((old >> shift) & 3) != 3 &&
         !w.compare_exchange_weak(old, old + (uint64_t{1} << shift), std::memory_order_relaxed)) {
  }
}

uint32_t AccessCounts::TakeOne(uint64_t offset_units, bool frequency) {
  if (offset_units >= units_) return 0;
  std::atomic<uint64_t>& w = words_[offset_units / 32];
  const int shift = static_cast<int>(offset_units % 32) * 2;
  uint64_t old = w.load(std::memory_order_relaxed);
  for (;;) {
    const uint32_t count = static_cast<uint32_t>((old >> shift) & 3);
    if (count == 0) return 0;
    const uint64_t next = frequency ? old - (uint64_t{1} << shift) : old & ~(uint64_t{3} << shift);
    if (w.compare_exchange_weak(old, next, std::memory_order_relaxed)) return count;
  }
}

uint32_t AccessCounts::Peek(uint64_t offset_units) const {
  if (offset_units >= units_) return 0;
  const uint64_t w = words_[offset_units / 32].load(std::memory_order_relaxed);
  return static_cast<uint32_t>((w >> (static_cast<int>(offset_units % 32) * 2)) & 3);
}

void AccessCounts::Clear(uint64_t first_unit, uint64_t n_units) {
  // Runs start and end on segment boundaries, which are multiples of 32
  // units (segments are multiples of 64 KiB): whole words.
  const uint64_t end = std::min(units_, first_unit + n_units);
  for (uint64_t u = first_unit; u < end; u += 32) {
    words_[u / 32].store(0, std::memory_order_relaxed);
  }
}

void AccessCounts::Set(uint64_t offset_units, uint32_t count) {
  if (offset_units >= units_) return;
  std::atomic<uint64_t>& w = words_[offset_units / 32];
  const int shift = static_cast<int>(offset_units % 32) * 2;
  const uint64_t bits = uint64_t{std::min<uint32_t>(count, 3)} << shift;
  uint64_t old = w.load(std::memory_order_relaxed);
  while (!w.compare_exchange_weak(old, (old & ~(uint64_t{3} << shift)) | bits,
                                  std::memory_order_relaxed)) {
  }
}

}  // namespace server
}  // namespace kvstore
