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
// Every operation KvClient needs is a virtual here, so KvClient never asks
// which transport it holds. The zero-copy calls and broken() have defaults
// that suit a transport without registered memory (TCP): copies through
// Get/Put, never broken. A path counts nothing of its own in this interface:
// an implementation that counts (RDMA) is given the client's
// metrics::Registry when it is built.
//
// Errors: the codes of kv_client.h. A Status carrying kNotSentPayload failed
// before the request left the client, so even a non-idempotent operation may
// be retried.
//
// Thread safety: implementations are thread-safe and allow many operations
// in flight.

#ifndef KVSTORE_CLIENT_INTERNAL_DATA_PATH_H_
#define KVSTORE_CLIENT_INTERNAL_DATA_PATH_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/registered_buffer.h"

namespace kvstore {
namespace client {

// Payload type URL on a Status whose operation was never sent to the server
// (it failed locally first), so retrying it cannot repeat its effect.
inline constexpr char kNotSentPayload[] = "type.kvstore/not-sent";

// Marks `s` as failed before its request left this client (kNotSentPayload).
absl::Status NotSent(absl::Status s);

class DataPath {
 public:
  virtual ~DataPath() = default;

  // The value of `key`; kNotFound when absent.
  virtual absl::StatusOr<std::string> Get(absl::string_view key, absl::Time deadline) = 0;
  // Stores key -> value, replacing any earlier value.
  virtual absl::Status Put(absl::string_view key, absl::string_view value, absl::Time deadline) = 0;
  // kNotFound when the key was absent.
  virtual absl::Status Delete(absl::string_view key, absl::Time deadline) = 0;
  // Whether `key` is present.
  virtual absl::StatusOr<bool> Exists(absl::string_view key, absl::Time deadline) = 0;
  // One result per key, in order; the outer status fails only when the
  // batch could not be attempted.
  virtual absl::StatusOr<std::vector<absl::StatusOr<std::string>>> MultiGet(
      absl::Span<const std::string> keys, absl::Time deadline) = 0;
  // Stores each pair, in order (a key given twice keeps its last value).
  // The outer status fails only when no pair was sent (a pair over a limit:
  // every pair is checked first). Otherwise one status per pair, in order:
  // OK (stored), the error a Put of that pair alone would have met (a
  // server's refusal or answer, or a transport error after it was sent:
  // then it may have been stored), or an error carrying kNotSentPayload for
  // a pair that never left this client (certainly not stored).
  virtual absl::StatusOr<std::vector<absl::Status>> MultiPut(
      absl::Span<const std::pair<std::string, std::string>> pairs, absl::Time deadline) = 0;

  // --- Expiry (see KvClient) ---------------------------------------------------
  // Default: kUnimplemented (a path that cannot reach the server's CPU).
  virtual absl::Status PutWithTtl(absl::string_view key, absl::string_view value,
                                  absl::Duration ttl, absl::Time deadline);
  virtual absl::StatusOr<bool> Expire(absl::string_view key, absl::Duration ttl,
                                      absl::Time deadline);
  virtual absl::StatusOr<absl::Duration> Ttl(absl::string_view key, absl::Time deadline);

  // --- Zero copy (see KvClient) ----------------------------------------------
  // Registers [data, data+size). Default: kInvalidArgument for an empty
  // buffer, otherwise a handle that merely describes the memory (lkey 0).
  virtual absl::StatusOr<RegisteredBuffer> Register(void* data, size_t size);
  // Reads key's value into buffer[offset, offset+capacity) and returns its
  // length: kInvalidArgument for a range outside the buffer, kOutOfRange
  // (naming the size) when the value does not fit. Default: Get() + copy.
  virtual absl::StatusOr<size_t> GetInto(absl::string_view key, const RegisteredBuffer& buffer,
                                         size_t offset, size_t capacity, absl::Time deadline);
  // Stores buffer[offset, offset+length) under key; kInvalidArgument for a
  // range outside the buffer. Default: Put() of that range.
  virtual absl::Status PutFrom(absl::string_view key, const RegisteredBuffer& buffer, size_t offset,
                               size_t length, absl::Time deadline);

  // --- State ---------------------------------------------------------------
  // True once the path can serve nothing more (an RDMA queue pair error, a
  // server restart) and the owner should handshake again and build a new
  // one. Default: never (a TCP path reconnects its sockets itself).
  virtual bool broken() const { return false; }

  // The cluster map epoch the caller routes by (0: single-node). A path that
  // reads server memory one-sidedly checks it against the server's fence
  // words (common/protocol/fence.h) and fails a read with
  // kFailedPrecondition on a mismatch, kUnavailable when the server is fenced
  // or its lease lapsed. Default: ignored (the server CPU routes TCP
  // requests itself).
  virtual void SetMapEpoch(uint64_t epoch) {}

  // "tcp" or "rdma".
  virtual absl::string_view name() const = 0;
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_DATA_PATH_H_
