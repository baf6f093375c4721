// Copyright 2026 The kvstore Authors.
//
// KvClientBenchTarget: lets `kvctl bench` drive a KvClient through the
// BenchTarget interface of the (client-independent) bench engine.

#ifndef KVSTORE_CLIENT_KVCTL_KV_CLIENT_BENCH_TARGET_H_
#define KVSTORE_CLIENT_KVCTL_KV_CLIENT_BENCH_TARGET_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/kv_client.h"
#include "client/kvctl/bench_runner.h"

namespace kvstore {
namespace client {

// Forwards GET and PUT to a KvClient, returning its statuses unchanged (so
// kNotFound still counts as a miss).
//
// Ownership: does not own `client`, which must outlive the target.
// Thread safety: KvClient is thread-safe, so one instance serves every
// bench thread.
class KvClientBenchTarget : public BenchTarget {
 public:
  // `client` must not be null.
  explicit KvClientBenchTarget(KvClient* client) : client_(client) {}

  // KvClient::Get(); returns the value's size (the value is dropped).
  absl::StatusOr<uint64_t> Get(absl::string_view key) override;
  // KvClient::Put().
  absl::Status Put(absl::string_view key, absl::string_view value) override;

 private:
  KvClient* const client_;
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_KVCTL_KV_CLIENT_BENCH_TARGET_H_
