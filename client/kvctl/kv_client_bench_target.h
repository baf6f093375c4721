// Copyright 2026 The kvstore Authors.
//
// KvClientBenchTarget: lets `kvctl bench` drive a KvClient through the
// BenchTarget interface of the (client-independent) bench engine.

#ifndef KVSTORE_CLIENT_KVCTL_KV_CLIENT_BENCH_TARGET_H_
#define KVSTORE_CLIENT_KVCTL_KV_CLIENT_BENCH_TARGET_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "client/kv_client.h"
#include "client/kvctl/bench_runner.h"

namespace kvstore {
namespace client {

// Forwards GET and PUT to a KvClient, returning its statuses unchanged (so
// kNotFound still counts as a miss).
//
// Zero-copy mode (zero_copy_bytes > 0): GETs use KvClient::GetInto into a
// registered buffer of that many bytes, one per concurrent GET, registered
// on first use and reused (registration pins pages: far too slow per GET).
// A value larger than the buffer is an error (kOutOfRange).
//
// Ownership: does not own `client`, which must outlive the target; owns the
// registered buffers.
// Thread safety: KvClient is thread-safe, so one instance serves every
// bench thread; the buffer free list has its own lock.
class KvClientBenchTarget : public BenchTarget {
 public:
  // `client` must not be null. zero_copy_bytes: 0 for Get() copies, else
  // the capacity of each GetInto buffer.
  explicit KvClientBenchTarget(KvClient* client, uint64_t zero_copy_bytes = 0)
      : client_(client), zero_copy_bytes_(zero_copy_bytes) {}

  // KvClient::Get() (or GetInto in zero-copy mode); returns the value's
  // size (the value is dropped).
  absl::StatusOr<uint64_t> Get(absl::string_view key) override;
  // KvClient::Put().
  absl::Status Put(absl::string_view key, absl::string_view value) override;

 private:
  // Caller memory and its registration; the memory outlives the handle.
  struct Buffer {
    std::unique_ptr<char[]> memory;
    RegisteredBuffer registered;
  };
  // A free buffer, or a newly registered one when none is free.
  absl::StatusOr<std::unique_ptr<Buffer>> AcquireBuffer();
  void ReleaseBuffer(std::unique_ptr<Buffer> buffer);

  KvClient* const client_;
  const uint64_t zero_copy_bytes_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Buffer>> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_KVCTL_KV_CLIENT_BENCH_TARGET_H_
