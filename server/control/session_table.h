// Copyright 2026 The kvstore Authors.
//
// SessionTable: who may end what on the control plane (docs/security.md).
//
// Handshake opens a session: a random 64-bit id (from the kernel's CSPRNG,
// never 0) the client names in every ConnectQp, DisconnectQp and lease RPC.
// The RDMA connections a session made belong to it alone; leases belong to
// the connection their write key is bound on (LeaseTable's holder rule), and
// so to the same session. Nobody else can disconnect them, renew them or
// release them; a guessed id is a 1 in 2^64 shot.
//
// Quotas per session (queue pairs, live leases, live lease bytes) bound
// what one client can pin; max_sessions bounds the table itself.
//
// Expiry: a session expires once it has gone `ttl` without an RPC naming it
// AND has no live queue pair. Sweep() takes expired sessions out of the
// table (a later RPC naming one gets "no live session") and returns their
// connections, which the caller disconnects (ending the leases bound on
// them). A client that only GETs over a live queue pair keeps its session;
// a dead client's queue pair fails its idle probe and is reaped by the RDMA
// service, and its session then expires.
//
// Errors: a kSessionLost refusal (common/cluster/refusal.h; "no live
// session ... handshake again") for an unknown or expired id;
// kResourceExhausted at max_sessions.
//
// Locking: mu_ (the table) is a leaf except that Sweep() runs the caller's
// `live` callback with no lock held. A Session's own mutex (Session::mu) is
// taken after the table's lookup returned, never with mu_ held. The control
// service holds Session::mu across LeaseTable and RdmaService calls (quota
// check and grant, quota check and connect); those never call back into the
// service, so Session::mu sits above all of their locks.
//
// Thread safety: thread-safe.

#ifndef KVSTORE_SERVER_CONTROL_SESSION_TABLE_H_
#define KVSTORE_SERVER_CONTROL_SESSION_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/auth/credentials.h"
#include "common/metrics/registry.h"

namespace kvstore {
namespace server {

struct SessionOptions {
  // A session with no RPC for this long and no live queue pair expires.
  absl::Duration ttl = absl::Seconds(60);
  // Sessions open at once (Handshake fails with kResourceExhausted beyond).
  // A session is a few hundred bytes; the cap is high so that clients that
  // handshake and never come back (kvctl in a loop: each run is a session
  // that lives one TTL) do not lock others out: 65536 per 60 s TTL is
  // about 1000 handshakes a second.
  size_t max_sessions = 65536;
  // Per session: queue pairs, live leases and the bytes of live leases.
  size_t max_qps = 16;
  size_t max_leases = 64;
  uint64_t max_lease_bytes = 256ull << 20;
};

class SessionTable {
 public:
  // One open session. Held by shared_ptr so an RPC in progress keeps it
  // readable even if Sweep() takes it out of the table meanwhile.
  struct Session {
    Session(uint64_t id, std::string peer, auth::Identity who)
        : id(id), peer(std::move(peer)), who(std::move(who)) {}
    const uint64_t id;
    const std::string peer;  // for logs
    // Who opened it (Handshake's credential): its queue pairs carry this
    // principal's rights (a replica commit needs a peer's), and only the
    // same user may add queue pairs or leases to it.
    const auth::Identity who;
    // Serializes the session's ConnectQp and GrantLease (their quota check
    // and the act), and guards the members below.
    absl::Mutex mu;
    // Set by Sweep() when the session expired: no more connections.
    bool closed ABSL_GUARDED_BY(mu) = false;
    // The RDMA connections this session made (some may have been reaped
    // by the RDMA service since; the caller prunes them).
    absl::flat_hash_set<uint64_t> connections ABSL_GUARDED_BY(mu);
  };

  // What Sweep() took out of the table.
  struct Expired {
    uint64_t id = 0;
    std::string peer;
    std::vector<uint64_t> connections;
  };

  // `registry` (not owned, must outlive the table) gets
  // kvstore_sessions_active, kvstore_sessions_opened_total and
  // kvstore_sessions_expired_total.
  SessionTable(SessionOptions options, metrics::Registry* registry);
  SessionTable(const SessionTable&) = delete;
  SessionTable& operator=(const SessionTable&) = delete;

  // Opens a session for `peer`, opened by `who`, and returns its id
  // (random, never 0). kResourceExhausted when max_sessions are open.
  absl::StatusOr<uint64_t> Open(std::string peer,
                                auth::Identity who = {"default", auth::Role::kAdmin});

  // The live session `id`, marked as used now. A kSessionLost refusal ("no
  // live session N (expired or never opened): handshake again") otherwise.
  absl::StatusOr<std::shared_ptr<Session>> Use(uint64_t id);

  // Takes out every session idle for ttl at `now` none of whose
  // connections `live` says is alive, marks it closed and returns it.
  // `live` runs without any table lock held.
  std::vector<Expired> Sweep(absl::Time now, const std::function<bool(uint64_t)>& live);

  size_t size() const;
  const SessionOptions& options() const { return options_; }

 private:
  struct Entry {
    std::shared_ptr<Session> session;
    absl::Time last_used;
  };

  const SessionOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> sessions_ ABSL_GUARDED_BY(mu_);

  metrics::Counter* opened_;
  metrics::Counter* expired_;
  // Reads sessions_ under mu_; declared last so it goes first.
  metrics::CallbackHandle active_gauge_;
};

// 8 random bytes from getrandom(2), never 0. CHECK-fails if the kernel's
// CSPRNG cannot be read (a server must not fall back to guessable ids).
uint64_t RandomSessionId();

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CONTROL_SESSION_TABLE_H_
