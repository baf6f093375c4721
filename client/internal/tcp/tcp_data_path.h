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
#include "client/internal/tcp/resp_dial.h"
#include "common/protocol/limits.h"
#include "common/protocol/resp.h"

namespace kvstore {
namespace client {

class RespConnection;

// The DataPath of one server's RESP port: requests are spread round robin
// over a fixed set of connections, each of which reconnects by itself on the
// next request after it was lost.
//
// Thread safety: thread-safe; many requests in flight per connection.
class TcpDataPath final : public DataPath {
 public:
  // Connects `connections` sockets to `address` ("host:port").
  // At least one (a smaller count means one), each attempt bounded by
  // `connect_timeout`; a reconnect later uses the same timeout. With an
  // `auth_token`, every socket (reconnects included) sends AUTH first
  // (resp_dial.h). kUnavailable when the name does not resolve or a socket
  // cannot connect, kUnauthenticated when the server refuses the token (the
  // connections already made are closed). `limits` are the key, value and
  // batch limits checked before anything is sent. `readonly`: every socket
  // sends READONLY after AUTH, so that a cluster backup serves reads of its
  // shards (Options::read_from_replicas; resp_dial.h).
  static absl::StatusOr<std::unique_ptr<TcpDataPath>> Connect(
      const std::string& address, int connections, const Limits& limits,
      absl::Duration connect_timeout, const std::string& auth_token = "", bool readonly = false,
      std::shared_ptr<const RespTls> tls = nullptr);
  // Closes every connection and joins its reader thread.
  // REQUIRES: no call is in flight.
  ~TcpDataPath() override;

  // The DataPath operations, as RESP commands. Every one checks its keys and
  // values against the limits first (kInvalidArgument, nothing sent). Then:
  // kUnavailable when a connection cannot be made or is lost with the
  // request in flight, kUnauthenticated when a reconnect's AUTH was refused
  // (from then on without dialling again), kDeadlineExceeded when no reply came by `deadline`
  // (the connection stays up; the late reply is dropped), kInternal for a
  // malformed or unexpected reply, and for an error reply the code its code
  // word names (resp::RespErrorToStatus).
  //
  // GET; a nil reply is kNotFound.
  absl::StatusOr<std::string> Get(absl::string_view key, absl::Time deadline) override;
  // SET; the value is sent from the caller's buffer, not copied.
  absl::Status Put(absl::string_view key, absl::string_view value, absl::Time deadline) override;
  // DEL; kNotFound when the server removed nothing.
  absl::Status Delete(absl::string_view key, absl::Time deadline) override;
  // EXISTS.
  // SET key value PX ms / PEXPIRE or PERSIST / PTTL.
  absl::Status PutWithTtl(absl::string_view key, absl::string_view value, absl::Duration ttl,
                          absl::Time deadline) override;
  absl::StatusOr<bool> Expire(absl::string_view key, absl::Duration ttl,
                              absl::Time deadline) override;
  absl::StatusOr<absl::Duration> Ttl(absl::string_view key, absl::Time deadline) override;
  absl::StatusOr<bool> Exists(absl::string_view key, absl::Time deadline) override;
  // MGET in batches of at most limits.max_batch_keys keys, one after the
  // other; a nil element is kNotFound. The outer status is that of the first
  // batch that fails as a whole (the results of earlier batches are dropped).
  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> MultiGet(
      absl::Span<const std::string> keys, absl::Time deadline) override;
  // Pipelined SETs on one connection, in batches of at most
  // limits.max_batch_keys pairs; each pair's status is its own reply. After
  // a batch in which any pair failed, later batches are not sent (their
  // pairs carry kNotSentPayload): the connection may be gone.
  absl::StatusOr<std::vector<absl::Status>> MultiPut(
      absl::Span<const std::pair<std::string, std::string>> pairs, absl::Time deadline) override;
  absl::string_view name() const override { return "tcp"; }

 private:
  // Connections are added by Connect().
  TcpDataPath(std::string address, const Limits& limits, absl::Duration connect_timeout);

  // Sends the request made of `parts` (already RESP-encoded pieces,
  // concatenated on the wire) and waits for its reply.
  absl::StatusOr<resp::Reply> Call(const std::vector<absl::string_view>& parts,
                                   absl::Time deadline);

  const std::string address_;
  const Limits limits_;
  const absl::Duration connect_timeout_;
  // Filled by Connect() and never changed after: read without a lock.
  std::vector<std::unique_ptr<RespConnection>> conns_;
  // Round-robin cursor over conns_ (relaxed: it only spreads the load).
  std::atomic<uint64_t> next_{0};
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_TCP_TCP_DATA_PATH_H_
