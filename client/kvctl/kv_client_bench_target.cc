// Copyright 2026 The kvstore Authors.
//
// The KvClient side of `kvctl bench`. Kept out of the engine so that the
// engine and its tests build without the client library.

#include "client/kvctl/kv_client_bench_target.h"

#include <string>

namespace kvstore {
namespace client {

absl::StatusOr<uint64_t> KvClientBenchTarget::Get(absl::string_view key) {
  // The engine only counts bytes; the copy the client returns is the cost
  // of a GET through this API, so it stays inside the timed call.
  absl::StatusOr<std::string> value = client_->Get(key);
  if (!value.ok()) return value.status();
  return value->size();
}

absl::Status KvClientBenchTarget::Put(absl::string_view key, absl::string_view value) {
  return client_->Put(key, value);
}

}  // namespace client
}  // namespace kvstore
