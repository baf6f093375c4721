// Copyright 2026 The kvstore Authors.

#include "client/internal/cluster/slow_read_path.h"

namespace kvstore {
namespace client {

absl::StatusOr<std::string> SlowReadPath::Get(absl::string_view key, absl::Time deadline) {
  return control_->Get(key, deadline);
}

absl::StatusOr<bool> SlowReadPath::Exists(absl::string_view key, absl::Time deadline) {
  // The API has no EXISTS; a GET of the value answers it (slow, and rare:
  // only during a slot's handoff).
  absl::StatusOr<std::string> v = control_->Get(key, deadline);
  if (v.ok()) return true;
  if (absl::IsNotFound(v.status())) return false;
  return v.status();
}

absl::StatusOr<std::vector<absl::StatusOr<std::string>>> SlowReadPath::MultiGet(
    absl::Span<const std::string> keys, absl::Time deadline) {
  std::vector<absl::StatusOr<std::string>> out;
  out.reserve(keys.size());
  for (const std::string& key : keys) out.push_back(control_->Get(key, deadline));
  return out;
}

}  // namespace client
}  // namespace kvstore
