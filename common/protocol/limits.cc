// Copyright 2026 The kvstore Authors.

#include "common/protocol/limits.h"

#include "absl/strings/str_cat.h"

namespace kvstore {

absl::Status Limits::KeyLengthError(uint64_t key_len) const {
  // Empty keys are refused on every path, like ParseCommit refuses a
  // zero-length delete key.
  if (key_len == 0) return absl::InvalidArgumentError("key is empty");
  if (key_len > max_key_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("key is ", key_len, " bytes, over the limit max_key_bytes=", max_key_bytes));
  }
  return absl::OkStatus();
}

// Empty values are valid: only a length over the bound gets here.
absl::Status Limits::ValueLengthError(uint64_t value_len) const {
  return absl::InvalidArgumentError(absl::StrCat(
      "value is ", value_len, " bytes, over the limit max_value_bytes=", max_value_bytes));
}

absl::Status Limits::Validate() const {
  // The ceilings guarantee that the largest key plus the largest value still
  // fits one slot's size field (kMaxEntryBytes).
  if (max_key_bytes == 0 || max_key_bytes > kCeilingKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_key_bytes must be in [1, ", kCeilingKeyBytes, "]"));
  }
  if (max_value_bytes > kCeilingValueBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_value_bytes must be at most ", kCeilingValueBytes));
  }
  // A batch limit of 0 would reject every MGET/MSET.
  if (max_batch_keys == 0) return absl::InvalidArgumentError("max_batch_keys must be positive");
  return absl::OkStatus();
}

}  // namespace kvstore
