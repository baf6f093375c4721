// Copyright 2026 The kvstore Authors.
//
// LeaseManager: the write leases of one RDMA path. A PUT writes its entry
// into a lease (a range of the server's data arena this connection alone may
// WRITE) and commits it. The manager bump-allocates entries from the current
// lease, and a background thread keeps the supply going: it grants the next
// lease once the current one is half used, renews leases before they expire,
// and releases retired leases once their last commit is done. All of it over
// the control plane (control::ControlClient).
//
// Thread safety: thread-safe. Reserve/Finish from any thread; one background
// thread from Start() until Shutdown().

#ifndef KVSTORE_COMMON_RDMA_INITIATOR_LEASE_MANAGER_H_
#define KVSTORE_COMMON_RDMA_INITIATOR_LEASE_MANAGER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/control/control_client.h"
#include "common/metrics/registry.h"
#include "common/rdma/initiator/op_engine.h"

namespace kvstore {
namespace initiator {

// A write lease granted by the server. Guarded by the manager's lock.
struct Lease {
  uint64_t id = 0;
  uint64_t arena_offset = 0;
  uint64_t length = 0;
  uint64_t write_addr = 0;
  uint32_t rkey = 0;
  uint64_t used = 0;  // bytes handed out
  int inflight = 0;   // reserved entries not yet finished
  absl::Time expires;
  bool dead = false;  // the server refused a commit into it, or a renewal
};

// Where one entry goes: its place in the arena and in the server's memory.
struct LeaseSpace {
  std::shared_ptr<Lease> lease;
  uint64_t arena_offset = 0;
  uint64_t remote_addr = 0;
};

// The lease counters, owned by the path owner's registry; incremented when
// the server confirmed.
struct LeaseCounters {
  metrics::Counter* granted = nullptr;
  metrics::Counter* released = nullptr;
  metrics::Counter* renewed = nullptr;
};

class LeaseManager {
 public:
  // Leases of `lease_bytes` (or an entry's size, if larger) for connection
  // `connection_id` of the server epoch and session of `scope`. `control`,
  // `engine` (told when the server is gone or forgot the session) and the
  // counters must outlive the manager.
  LeaseManager(control::ControlClient* control, OpEngine* engine, const LeaseCounters& counters,
               control::SessionScope scope, uint64_t connection_id, std::string client_name,
               uint64_t lease_bytes, absl::Duration lease_ttl, absl::Duration rpc_timeout);
  // Stops the thread if Shutdown() was not called (without releasing).
  ~LeaseManager();
  LeaseManager(const LeaseManager&) = delete;
  LeaseManager& operator=(const LeaseManager&) = delete;

  // Starts the background thread.
  void Start();
  // Stops the thread and, if `release`, gives every lease back (best effort;
  // the server frees them at expiry anyway).
  void Shutdown(bool release);

  // Room for an entry of `size` bytes, granting a lease now if none is
  // usable. Errors: GrantLease's (a kUnavailable one also breaks the path;
  // so does a lost session, control::IsSessionLost(), reported as kUnavailable so
  // that the owner handshakes again and retries),
  // kInternal for a lease without a write key, kUnavailable when no lease
  // could be had in four rounds. Pair every success with Finish(). A grant
  // is bounded by the RPC timeout, not by the operation's deadline.
  absl::StatusOr<LeaseSpace> Reserve(uint64_t size);
  // Ends the commit into `space` with `result`; kAborted means the server
  // refused the lease (expired), so nothing more goes into it.
  void Finish(const LeaseSpace& space, const absl::Status& result);

 private:
  absl::StatusOr<std::shared_ptr<Lease>> Grant(uint64_t bytes);
  // Breaks the path when `s` says the server restarted, is gone or lost
  // the session: no lease of this path can be used again. Returns `s`,
  // with a lost session turned into kUnavailable (the code that makes the
  // owner handshake again).
  absl::Status BreakIfPathLost(absl::Status s);
  void Release(const Lease& l);
  // The background thread's body, and its three chores.
  void Loop();
  void RefillLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RenewLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseDrainedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  control::ControlClient* const control_;
  OpEngine* const engine_;
  const LeaseCounters counters_;
  const control::SessionScope scope_;
  const uint64_t connection_id_;
  const std::string client_name_;
  const uint64_t lease_bytes_;
  const absl::Duration lease_ttl_;
  const absl::Duration rpc_timeout_;

  absl::Mutex mu_;
  std::shared_ptr<Lease> cur_ ABSL_GUARDED_BY(mu_);   // entries go here
  std::shared_ptr<Lease> next_ ABSL_GUARDED_BY(mu_);  // granted ahead of need
  // Replaced leases, released once their in-flight commits are done.
  std::vector<std::shared_ptr<Lease>> retired_ ABSL_GUARDED_BY(mu_);
  bool refill_wanted_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace initiator
}  // namespace kvstore

#endif  // KVSTORE_COMMON_RDMA_INITIATOR_LEASE_MANAGER_H_
