// Copyright 2026 The kvstore Authors.
//
// SlowReadPath: reads of one request through the server's CPU (the gRPC
// KvControl.Get), for keys whose slot is in a HANDOFF migration (§19.9).
//
// Why. A one-sided RDMA READ trusts the index of the node it reads. Once a
// slot is in HANDOFF the target primary may already accept writes of it that
// the source's index will never see, so the cluster client must not READ
// such a slot at the source (nor at the target, whose map still names the
// source as owner until the flip). The slow path asks the server, which
// answers by the newest map it has: the source refuses kTryAgain (handoff
// under way) or kAsk (go to the target), the target serves once it accepted the
// handoff. COPYING slots are still the source's alone and are READ as ever.
// A TCP path needs none of this (the server CPU routes every RESP command),
// so the cluster client wraps only RDMA paths (cluster_client.cc).
//
// Reads (Get, Exists, MultiGet, GetInto by the DataPath default: Get and a
// copy) go to ControlClient::Get, one key per call; writes go to the wrapped
// path unchanged (their commits are checked by the server's write hook).
//
// Thread safety: as the wrapped path and ControlClient (thread-safe). Both
// pointees must outlive the object; it is made per attempt.

#ifndef KVSTORE_CLIENT_INTERNAL_CLUSTER_SLOW_READ_PATH_H_
#define KVSTORE_CLIENT_INTERNAL_CLUSTER_SLOW_READ_PATH_H_

#include <string>
#include <utility>
#include <vector>

#include "client/internal/data_path.h"
#include "common/control/control_client.h"

namespace kvstore {
namespace client {

class SlowReadPath final : public DataPath {
 public:
  SlowReadPath(control::ControlClient* control, DataPath* writes)
      : control_(control), writes_(writes) {}

  absl::StatusOr<std::string> Get(absl::string_view key, absl::Time deadline) override;
  absl::StatusOr<bool> Exists(absl::string_view key, absl::Time deadline) override;
  // One Get per key; a key's own error stays its own (kAsk, kTryAgain, ...).
  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> MultiGet(
      absl::Span<const std::string> keys, absl::Time deadline) override;

  absl::Status Put(absl::string_view key, absl::string_view value, absl::Time deadline) override {
    return writes_->Put(key, value, deadline);
  }
  absl::Status Delete(absl::string_view key, absl::Time deadline) override {
    return writes_->Delete(key, deadline);
  }
  absl::StatusOr<std::vector<absl::Status>> MultiPut(
      absl::Span<const std::pair<std::string, std::string>> pairs, absl::Time deadline) override {
    return writes_->MultiPut(pairs, deadline);
  }
  absl::Status PutFrom(absl::string_view key, const RegisteredBuffer& buffer, size_t offset,
                       size_t length, absl::Time deadline) override {
    return writes_->PutFrom(key, buffer, offset, length, deadline);
  }
  absl::StatusOr<RegisteredBuffer> Register(void* data, size_t size) override {
    return writes_->Register(data, size);
  }
  bool broken() const override { return writes_->broken(); }
  absl::string_view name() const override { return writes_->name(); }

 private:
  control::ControlClient* const control_;
  DataPath* const writes_;
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_CLUSTER_SLOW_READ_PATH_H_
