// Copyright 2026 The kvstore Authors.
//
// The kvstore C++ client: the only public API of the project.
//
//   auto client = kvstore::client::KvClient::Connect(options);
//   if (!client.ok()) ...;
//   absl::Status s = (*client)->Put("user:1", "alice");
//   absl::StatusOr<std::string> v = (*client)->Get("user:1");
//
// Results are absl::Status / absl::StatusOr with these codes:
//   kNotFound           key absent (Get, Delete)
//   kInvalidArgument    empty key, or key/value over a limit (the message names
//                       the limit); empty values are fine
//   kResourceExhausted  server pool or index full; deleting frees space
//   kUnavailable        server unreachable, or the requested transport is
//                       not available (TransportMode::kRdma without a device)
//   kDeadlineExceeded   Options::op_timeout passed
//   kUnknown            cluster mode: a write whose outcome is unknown ("outcome
//                       unknown: ..."): it was sent and not certainly refused,
//                       so it may or may not have been applied, and may still
//                       appear later; it is not sent again (cluster_client.h).
//                       A single-node client reports the same situation (the
//                       connection broke after the request was sent) as
//                       kUnavailable or kDeadlineExceeded.
//
// Thread safety: a KvClient is thread-safe; share one per process. Many
// operations may be in flight on one connection at a time (pipelined).
// With an Abseil built without NDEBUG (Debian's), absl::Mutex tracks every
// lock in a global deadlock graph; a program that wants the fastest GETs
// calls absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore)
// at start, as kvctl and kvserver do (a library should not decide that for
// its whole process).
//
// Metrics: each KvClient counts into a registry of its own; metrics() returns
// a copy of every series, keyed in Prometheus series syntax (labels sorted by
// name), for example
//   kvstore_client_requests_total{op="get",transport="rdma"}            42
//   kvstore_client_request_duration_seconds_count{op="get",transport="rdma"}
//   kvstore_client_request_duration_sum_micros{op="get",transport="rdma"}
//   kvstore_client_request_duration_p50_micros{...} / _p99_micros{...}
//   kvstore_client_reconnects_total                                     0
//   kvstore_client_cluster_map_refreshes_total / _redirects_total /
//   _retries_total, kvstore_client_cluster_map_epoch  (cluster mode; 0 otherwise)
// (see docs/operations.md for the full list).

#ifndef KVSTORE_CLIENT_KV_CLIENT_H_
#define KVSTORE_CLIENT_KV_CLIENT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "client/options.h"
#include "client/registered_buffer.h"

namespace kvstore {
namespace client {

// One page of a key listing. `cursor` is 0 when the listing is complete.
struct ScanPage {
  std::vector<std::string> keys;
  uint64_t cursor = 0;
};

// What the server reports about itself (kvctl stat).
struct ServerStats {
  std::map<std::string, std::string> info;   // version, epoch, transports, ...
  std::map<std::string, uint64_t> counters;  // ops, bytes, pool and index usage, ...
};

class KvClient {
 public:
  // Asks the seed servers (Options::servers, in order) for the cluster map.
  // A seed that hands one out makes this a cluster client: keys are routed
  // to their shard's node, batches split by node, and stale maps refreshed
  // with bounded retries (client/cluster_client.h says what is retried, a
  // PUT of unknown outcome included). A server in single-node mode (or one
  // without the cluster service) is used alone, as before: Connect
  // handshakes over its control plane and opens the data connections chosen
  // by Options::transport. Security options are checked first
  // (kInvalidArgument, see options.h); a server that refuses the token, or
  // needs one, fails it with kUnauthenticated.
  static absl::StatusOr<std::unique_ptr<KvClient>> Connect(const Options& options);

  virtual ~KvClient() = default;
  KvClient(const KvClient&) = delete;
  KvClient& operator=(const KvClient&) = delete;

  virtual absl::StatusOr<std::string> Get(absl::string_view key) = 0;
  // Stores key -> value, replacing any earlier value.
  virtual absl::Status Put(absl::string_view key, absl::string_view value) = 0;
  // kNotFound if the key was absent.
  virtual absl::Status Delete(absl::string_view key) = 0;
  virtual absl::StatusOr<bool> Exists(absl::string_view key) = 0;

  // --- Expiry ----------------------------------------------------------------
  // Times are reckoned on the server's clock: `ttl` is how long from when the
  // server stores it (whole milliseconds, at least 1). An expired key is
  // absent to every read, one-sided RDMA GETs included. Over RDMA these
  // calls go through the server's CPU (the control plane).
  // Put() with a time to live.
  virtual absl::Status PutWithTtl(absl::string_view key, absl::string_view value,
                                  absl::Duration ttl) = 0;
  // Sets the key's time to live; false when the key is absent.
  virtual absl::StatusOr<bool> Expire(absl::string_view key, absl::Duration ttl) = 0;
  // Removes the key's expiry; false when absent or it had none.
  absl::StatusOr<bool> Persist(absl::string_view key) {
    return Expire(key, absl::InfiniteDuration());
  }
  // The key's time to live: absl::InfiniteDuration() when it has no
  // expiry; kNotFound when absent.
  virtual absl::StatusOr<absl::Duration> Ttl(absl::string_view key) = 0;

  // One result per key, in order; absent keys give kNotFound entries. The
  // outer status fails only when the whole batch could not be attempted.
  virtual absl::StatusOr<std::vector<absl::StatusOr<std::string>>> MultiGet(
      absl::Span<const std::string> keys) = 0;
  // Stores every pair, not atomically: one outcome per pair, in the
  // caller's order (a key given twice keeps its last value). The outer
  // status fails only when no pair was sent (kInvalidArgument: a key or
  // value over a limit, every pair being checked first). Each pair's status
  // is what a Put of that pair alone would have returned:
  //   OK        stored;
  //   kUnknown  cluster mode: its outcome is unknown (see Put): it may or
  //             may not have been stored and may still appear later; it
  //             was not sent again. A later pair of the same key that was
  //             not stored yet is then not sent either (it could land
  //             before the earlier one) and is kUnknown too;
  //   other     not stored: a node's answer (kResourceExhausted, ...) or
  //             the refusal the client gave up on (kUnavailable naming the
  //             attempts). A single-node client, like its Put, reports a
  //             connection lost after the pair was sent as kUnavailable or
  //             kDeadlineExceeded: that pair may have been stored.
  // In cluster mode a pair is sent again only when it was certainly not
  // stored (never sent, or refused with no effect): pairs already stored
  // are never written twice, so a retry cannot undo another client's later
  // write of the same key.
  virtual absl::StatusOr<std::vector<absl::Status>> MultiPutEach(
      absl::Span<const std::pair<std::string, std::string>> pairs) = 0;
  // MultiPutEach summed up: OK when every pair was stored. Otherwise the
  // status of the first pair (in the caller's order) whose outcome is
  // unknown, or if none, of the first pair that failed (code and payloads
  // kept), its message naming that pair and how many pairs were not stored
  // or are unknown. Every pair without an error was stored; MultiPutEach
  // says which pairs those are.
  absl::Status MultiPut(absl::Span<const std::pair<std::string, std::string>> pairs);

  // Lists keys starting after `cursor` (0 to begin); at most `count` keys
  // per page, only keys starting with `prefix`.
  virtual absl::StatusOr<ScanPage> Scan(uint64_t cursor, uint32_t count,
                                        absl::string_view prefix) = 0;
  virtual absl::StatusOr<ServerStats> Stats() = 0;

  // --- Zero copy -------------------------------------------------------------
  // Registers [data, data+size) for zero-copy GetInto/PutFrom. Registration
  // is slow (it pins pages): do it once for long-lived buffers.
  virtual absl::StatusOr<RegisteredBuffer> Register(void* data, size_t size) = 0;
  // Reads key's value straight into buffer[offset, offset+capacity) and
  // returns its length. kOutOfRange (naming the size) when it does not fit.
  virtual absl::StatusOr<size_t> GetInto(absl::string_view key, const RegisteredBuffer& buffer,
                                         size_t offset, size_t capacity) = 0;
  // Stores buffer[offset, offset+length) under key without copying it.
  virtual absl::Status PutFrom(absl::string_view key, const RegisteredBuffer& buffer, size_t offset,
                               size_t length) = 0;

  // The largest value the server accepts, as its handshake said; a Put of a
  // longer value fails kInvalidArgument without being sent. Lets a caller
  // that streams a value in (kvctl put from stdin) stop reading early.
  // Thread-safe.
  virtual uint64_t max_value_bytes() const = 0;

  // "rdma" or "tcp": the data path in use.
  virtual std::string transport_name() const = 0;
  // Every client series, cumulative since Connect() and across reconnects
  // (see the file comment for the keys). Histograms appear as _count,
  // _sum_micros, _p50_micros and _p99_micros entries (percentiles are bucket
  // upper bounds: "at most"). Thread-safe; it takes only the registry's own
  // lock, which operations never take, so it does not slow them down. Each
  // value is read atomically, but not all at one instant: entries may be
  // microseconds apart under load. Not for the hot path: it builds a map of
  // about fifty strings.
  virtual std::map<std::string, uint64_t> metrics() const = 0;

 protected:
  KvClient() = default;
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_KV_CLIENT_H_
