// Copyright 2026 The kvstore Authors.
//
// The KvClient side of `kvctl bench`. Kept out of the engine so that the
// engine and its tests build without the client library.

#include "client/kvctl/kv_client_bench_target.h"

#include <string>

namespace kvstore {
namespace client {

absl::StatusOr<uint64_t> KvClientBenchTarget::Get(absl::string_view key) {
  if (zero_copy_bytes_ > 0) {
    absl::StatusOr<std::unique_ptr<Buffer>> buffer = AcquireBuffer();
    if (!buffer.ok()) return buffer.status();
    absl::StatusOr<size_t> n = client_->GetInto(key, (*buffer)->registered, 0, zero_copy_bytes_);
    ReleaseBuffer(*std::move(buffer));
    if (!n.ok()) return n.status();
    return *n;
  }
  // The engine only counts bytes; the copy the client returns is the cost
  // of a GET through this API, so it stays inside the timed call.
  absl::StatusOr<std::string> value = client_->Get(key);
  if (!value.ok()) return value.status();
  return value->size();
}

absl::StatusOr<std::unique_ptr<KvClientBenchTarget::Buffer>> KvClientBenchTarget::AcquireBuffer() {
  {
    absl::MutexLock lock(&mu_);
    if (!free_.empty()) {
      std::unique_ptr<Buffer> buffer = std::move(free_.back());
      free_.pop_back();
      return buffer;
    }
  }
  // At most one buffer per bench thread is ever made: each thread returns
  // its buffer before it takes another.
  auto buffer = std::make_unique<Buffer>();
  buffer->memory = std::make_unique<char[]>(zero_copy_bytes_);
  absl::StatusOr<RegisteredBuffer> registered =
      client_->Register(buffer->memory.get(), zero_copy_bytes_);
  if (!registered.ok()) return registered.status();
  buffer->registered = *std::move(registered);
  return buffer;
}

void KvClientBenchTarget::ReleaseBuffer(std::unique_ptr<Buffer> buffer) {
  absl::MutexLock lock(&mu_);
  free_.push_back(std::move(buffer));
}

absl::Status KvClientBenchTarget::Put(absl::string_view key, absl::string_view value) {
  return client_->Put(key, value);
}

}  // namespace client
}  // namespace kvstore
