// Copyright 2026 The kvstore Authors.
//
// DataPath: the client's transport interface, one implementation per way of
// reaching a server's data (TcpDataPath: RESP2 over TCP; RdmaDataPath: verbs).
// KvClient picks one per server at Connect() time and forwards every data
// operation to it, so a new transport slots in without touching the public
// API. The interface is operation-level, not byte-level: over TCP the server
// CPU executes the operation, over RDMA the client executes it with
// one-sided READs and WRITE + commit; each keeps its hot loop inside.
//
// Implementations are thread-safe and allow many operations in flight.

#ifndef KVSTORE_CLIENT_INTERNAL_DATA_PATH_H_
#define KVSTORE_CLIENT_INTERNAL_DATA_PATH_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace kvstore {
namespace client {

class DataPath {
 public:
  virtual ~DataPath() = default;

  virtual absl::StatusOr<std::string> Get(absl::string_view key, absl::Time deadline) = 0;
  virtual absl::Status Put(absl::string_view key, absl::string_view value, absl::Time deadline) = 0;
  virtual absl::Status Delete(absl::string_view key, absl::Time deadline) = 0;
  virtual absl::StatusOr<bool> Exists(absl::string_view key, absl::Time deadline) = 0;
  virtual absl::StatusOr<std::vector<absl::StatusOr<std::string>>> MultiGet(
      absl::Span<const std::string> keys, absl::Time deadline) = 0;
  virtual absl::Status MultiPut(absl::Span<const std::pair<std::string, std::string>> pairs,
                                absl::Time deadline) = 0;

  // "tcp" or "rdma".
  virtual absl::string_view name() const = 0;
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_DATA_PATH_H_
