// Copyright 2026 The kvstore Authors.
//
// EtcdClient: the parts of etcd v3 that kvstore's cluster plane uses (KV,
// transactions, leases, watches), over gRPC stubs generated from the .proto
// files Debian's golang-etcd-server-dev ships. Only servers use it: clients
// learn the cluster map from servers, never from etcd.
//
// Endpoints are tried in order; a call that fails with UNAVAILABLE moves to
// the next endpoint for the next call (and counts in endpoint_changes()), and that endpoint's gRPC
// channel is replaced by a fresh one (so the client reaches a restarted etcd at once, also when
// calls kept failing during the outage). Every call is bounded by EtcdOptions::rpc_timeout.
//
// Keepalives and watches carry etcd's require-leader metadata
// (`hasleader: true`): a member cut off from its quorum answers them with
// an error instead of holding them open and silent, so the client moves on.
//
// Errors: kUnauthenticated when etcd refuses the user or password (the
// message says so; never retried); kUnavailable when no endpoint answers
// (naming them, a refused TLS handshake among them) or a call
// times out (kDeadlineExceeded is mapped to kUnavailable: etcd is "not
// reachable now"); kNotFound from KeepAliveOnce() for an expired or revoked
// lease; kInvalidArgument for an empty key; other etcd errors with their
// gRPC code mapped one-to-one and etcd's message.
//
// Thread safety: thread-safe; one client per process is enough. A Watch
// runs on a thread of its own and calls its callback from that thread.

#ifndef KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_ETCD_CLIENT_H_
#define KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_ETCD_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kvstore {
namespace server {
namespace etcd {

struct EtcdOptions {
  // "host:port" (an "http://" or "https://" prefix is accepted and dropped;
  // "https://" needs ca_file).
  std::vector<std::string> endpoints;
  absl::Duration rpc_timeout = absl::Seconds(2);
  // TLS (docs/security.md): with ca_file every endpoint is dialled over TLS
  // and must present a certificate that CA signed, naming the endpoint's
  // host; cert_file and key_file (both or neither) are this client's
  // certificate, for an etcd started with --client-cert-auth. The files are
  // read again every tls_reload_interval (renewed certificates need no
  // restart).
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  absl::Duration tls_reload_interval = absl::Seconds(60);
  // etcd authentication: with a user, the client calls Authenticate with
  // user and password and sends the token etcd returns on every call,
  // authenticating again when etcd says the token is no longer valid
  // (expired, or the auth store changed).
  std::string user;
  std::string password;
};

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

// One comparison of a transaction (etcd Compare). For a key that does not
// exist, create_revision, mod_revision and version compare as 0.
struct Compare {
  enum class Target { kCreateRevision, kModRevision, kVersion, kValue, kLease };
  enum class Op { kEqual, kNotEqual, kGreater, kLess };
  std::string key;
  Target target = Target::kModRevision;
  Op op = Op::kEqual;
  int64_t number = 0;  // for every target but kValue
  std::string value;   // for kValue
};

// One operation of a transaction branch.
struct TxnOp {
  enum class Kind { kPut, kDelete, kGet };
  Kind kind = Kind::kPut;
  std::string key;
  std::string value;  // kPut
  int64_t lease = 0;  // kPut: 0 for none
};

struct TxnResult {
  bool succeeded = false;  // the compares held and the success branch ran
  int64_t revision = 0;    // the store revision after the transaction
  // The key-values of kGet operations of the branch that ran, in order
  // (absent keys are left out).
  std::vector<KeyValue> gets;
};

// Whether `status` is etcd's answer to a call made under a lease that no
// longer exists (expired or revoked): a put or txn naming it, not the
// keepalive (which answers kNotFound of its own).
inline bool IsLeaseNotFound(const absl::Status& status) {
  return absl::IsNotFound(status) && absl::StrContains(status.message(), "lease not found");
}

struct WatchEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  KeyValue kv;  // for kDelete only key and mod_revision are set
};

// A running watch. Destroying it cancels the stream and joins its thread;
// it must not be destroyed from inside its own callback.
class WatchHandle {
 public:
  virtual ~WatchHandle() = default;
  // Asks etcd to confirm that the watch is alive: when it does, the
  // callback gets an empty batch (a progress notice; etcd 3.4 does not
  // order it with events still in flight). A watch that stays silent after
  // this is broken although its stream looks open (a half-open connection,
  // a member that lost its leader): its owner should drop it and watch
  // again. Safe from any thread but the callback's; does not wait for the
  // answer.
  virtual void RequestProgress() = 0;
};

class EtcdClient {
 public:
  // Checks that an endpoint answers (a Status/Range call within
  // rpc_timeout). kInvalidArgument for no endpoints; kUnavailable naming
  // every endpoint tried.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Connect(const EtcdOptions& options);
  virtual ~EtcdClient() = default;

  // Leases. GrantLease returns the lease id; ttl is rounded up to seconds
  // (etcd's unit) and etcd may raise it to its minimum.
  virtual absl::StatusOr<int64_t> GrantLease(absl::Duration ttl) = 0;
  virtual absl::Status RevokeLease(int64_t lease) = 0;
  // One keepalive round trip; returns the TTL etcd granted from now.
  // kNotFound when the lease has expired or was revoked.
  virtual absl::StatusOr<absl::Duration> KeepAliveOnce(int64_t lease) = 0;

  // KV. Get: nullopt when absent. GetPrefix: every key starting with
  // `prefix`, sorted, and the store revision the read saw (for a Watch that
  // follows it without a gap). Put and Delete return the new revision.
  virtual absl::StatusOr<std::optional<KeyValue>> Get(absl::string_view key) = 0;
  virtual absl::StatusOr<std::vector<KeyValue>> GetPrefix(absl::string_view prefix,
                                                          int64_t* revision) = 0;
  virtual absl::StatusOr<int64_t> Put(absl::string_view key, absl::string_view value,
                                      int64_t lease = 0) = 0;
  virtual absl::StatusOr<int64_t> Delete(absl::string_view key) = 0;
  virtual absl::StatusOr<TxnResult> Txn(const std::vector<Compare>& compares,
                                        const std::vector<TxnOp>& success,
                                        const std::vector<TxnOp>& failure) = 0;

  // Streams the events on keys starting with `prefix` from `start_revision`
  // (inclusive; 0: from now) to `on_events`, a batch at a time, on the
  // current endpoint (see endpoint_changes()). When the stream breaks (etcd
  // restarted, compaction, network, a member without a leader)
  // `on_events` gets the error once and the watch ends: the caller re-reads
  // with GetPrefix and watches again from the revision that read returned.
  // An empty batch answers WatchHandle::RequestProgress().
  virtual absl::StatusOr<std::unique_ptr<WatchHandle>> Watch(
      absl::string_view prefix, int64_t start_revision,
      std::function<void(absl::StatusOr<std::vector<WatchEvent>>)> on_events) = 0;

  // How many times calls moved to another endpoint so far. A watch stays
  // on the endpoint it was opened on; its owner compares this before and
  // after to know when to watch again where the calls now go.
  virtual uint64_t endpoint_changes() const = 0;

 protected:
  EtcdClient() = default;
};

}  // namespace etcd
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_ETCD_CLIENT_H_
