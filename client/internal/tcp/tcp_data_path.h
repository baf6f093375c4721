// Copyright 2026 The kvstore Authors.
//
// TcpDataPath: the DataPath over the server's RESP2 port. A few TCP
// connections, each carrying many pipelined requests: senders append their
// request under the connection's send lock and enqueue a waiter; one reader
// thread per connection parses replies in order and completes the waiters.
// PUT values are sent with writev straight from the caller's buffer.
// An error reply becomes the Status its code word names
// (resp::RespErrorToStatus: "OOM ..." is kResourceExhausted, "ERR ..."
// kInvalidArgument, ...); the message text is never inspected.
//
// Zero copy (Register/GetInto/PutFrom) and broken() are the DataPath
// defaults: plain memory and copies, never broken. The path counts nothing
// itself: KvClient counts its requests per transport.
//
// Thread safety: thread-safe; many requests in flight per connection.

#ifndef KVSTORE_CLIENT_INTERNAL_TCP_TCP_DATA_PATH_H_
#define KVSTORE_CLIENT_INTERNAL_TCP_TCP_DATA_PATH_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/internal/data_path.h"
#include "common/protocol/limits.h"
#include "common/protocol/resp.h"

namespace kvstore {
namespace client {

class RespConnection;

class TcpDataPath final : public DataPath {
 public:
  // Connects `connections` sockets to `address` ("host:port").
  static absl::StatusOr<std::unique_ptr<TcpDataPath>> Connect(const std::string& address,
                                                              int connections, const Limits& limits,
                                                              absl::Duration connect_timeout);
  ~TcpDataPath() override;

  absl::StatusOr<std::string> Get(absl::string_view key, absl::Time deadline) override;
  absl::Status Put(absl::string_view key, absl::string_view value, absl::Time deadline) override;
  absl::Status Delete(absl::string_view key, absl::Time deadline) override;
  absl::StatusOr<bool> Exists(absl::string_view key, absl::Time deadline) override;
  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> MultiGet(
      absl::Span<const std::string> keys, absl::Time deadline) override;
  absl::Status MultiPut(absl::Span<const std::pair<std::string, std::string>> pairs,
                        absl::Time deadline) override;
  absl::string_view name() const override { return "tcp"; }

 private:
  TcpDataPath(std::string address, const Limits& limits, absl::Duration connect_timeout);

  // Sends the request made of `parts` (already RESP-encoded pieces,
  // concatenated on the wire) and waits for its reply.
  absl::StatusOr<resp::Reply> Call(const std::vector<absl::string_view>& parts,
                                   absl::Time deadline);

  const std::string address_;
  const Limits limits_;
  const absl::Duration connect_timeout_;
  std::vector<std::unique_ptr<RespConnection>> conns_;
  std::atomic<uint64_t> next_{0};
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_TCP_TCP_DATA_PATH_H_
