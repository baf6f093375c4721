// Copyright 2026 The kvstore Authors.

#include "common/protocol/fence.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/cluster/refusal.h"

namespace kvstore {
namespace fence {

FenceWords Decode(const void* bytes) {
  FenceWords w;
  std::memcpy(&w.map_epoch, bytes, 8);
  std::memcpy(&w.valid_until_ms, static_cast<const char*>(bytes) + 8, 8);
  return w;
}

void Encode(const FenceWords& words, void* bytes) {
  std::memcpy(bytes, &words.map_epoch, 8);
  std::memcpy(static_cast<char*>(bytes) + 8, &words.valid_until_ms, 8);
}

absl::Status Check(const FenceWords& words, uint64_t reader_map_epoch, int64_t now_unix_ms) {
  using cluster::Refusal;
  if (words.valid_until_ms == 0) return cluster::ToStatus(Refusal::ClusterDown("server is fenced"));
  if (words.valid_until_ms != kNoExpiry) {
    const int64_t until = static_cast<int64_t>(words.valid_until_ms);
    if (now_unix_ms + kClockSkewMarginMs >= until) {
      return cluster::ToStatus(Refusal::ClusterDown(absl::StrCat(
          "server's lease lapsed ", now_unix_ms - until, " ms ago (frozen or cut off from etcd)")));
    }
  }
  if (reader_map_epoch != words.map_epoch) {
    return cluster::ToStatus(Refusal::StaleShardEpoch(absl::StrCat(
        "cluster map epoch mismatch: server ", words.map_epoch, ", reader ", reader_map_epoch)));
  }
  return absl::OkStatus();
}

ExpiryVerdict JudgeExpiry(uint64_t expires_at_ms, int64_t reader_now_ms) {
  if (expires_at_ms == 0) return ExpiryVerdict::kLive;
  // Signed arithmetic: an expiry of at most layout::kMaxExpiresAtMs (48
  // bits) and a reader clock near now cannot overflow.
  const int64_t at = static_cast<int64_t>(expires_at_ms);
  if (reader_now_ms + kClockSkewMarginMs < at) return ExpiryVerdict::kLive;
  if (reader_now_ms - kClockSkewMarginMs >= at) return ExpiryVerdict::kExpired;
  return ExpiryVerdict::kUncertain;
}

}  // namespace fence
}  // namespace kvstore
