// Copyright 2026 The kvstore Authors.
//
// RdmaService: the server side of the RDMA data path (docs/architecture.md
// §8.2-8.4).
//
// What a client can touch, and with which key:
//   * the data arena and the index arena: READ only, through the region
//     rkeys of the handshake (MemoryPool registers them without remote
//     write, so a WRITE through them fails with a remote access error);
//   * its write leases: WRITE only, through a per-lease key. Each lease chunk
//     is registered as an MR of its own (LOCAL_WRITE | MW_BIND, no remote
//     access) and a type-2 memory window with REMOTE_WRITE is bound over the
//     whole chunk on the client's queue pair. The MR bounds the range on
//     every device (rxe checks a window's range against its MR only), the
//     window ties the key to one queue pair and is invalidated when the lease
//     ends, so a stale or foreign key fails remotely and changes nothing.
//
// The write key is part of the lease record: BindLease() makes it as a
// LeaseWriteKey (server/storage/lease_table.h), LeaseTable::Grant() stores it
// in the lease, and LeaseTable revokes it when the lease ends, before the
// chunk goes back to the store. The service keeps no table of keys: which
// connection holds which lease is asked of the LeaseTable.
//
// Fencing (docs/architecture.md §19.5): the server's FencePage is registered
// READ-only and listed in the handshake as the REGION_KIND_FENCE region;
// one-sided readers READ it with their bucket READs and refuse what they
// read when it says fenced, lapsed or another map epoch. FenceAll() is the
// server's own half: every client queue pair is moved to the error state
// (in-flight and later READs of those clients fail) and no queue pair is
// connected until Unfence().
//
// Commits arrive as SENDs (common/protocol/commit_wire.h) on the client's
// queue pair and are handled by one poller thread that sleeps on a
// completion channel: GETs never wake it, so a GET-only load costs the
// server no CPU. The poller validates and publishes through
// LeaseTable::CommitFrom / KvStore::Delete and acknowledges with a SEND.
//
// Lifetimes: the device, PD, pool and store outlive the service. The
// LeaseTable is used until StopPoller(); it must be destroyed after
// StopPoller() and before the service (its destructor revokes the write keys,
// which need the service's counters and their connections' queue pairs).
// KvServer::Shutdown() does exactly that.
//
// Locking (lock order top to bottom):
//   * LeaseTable's locks (none of them is held while a lease's write key
//     is revoked, which takes the connection's send mutex below);
//   * Connection::send_mu: posting on one QP's send queue and polling its
//     send CQ; held for one post or one poll at a time, never across the
//     wait for a bind or invalidation (<= 5 s), so acks go out meanwhile;
//   * RdmaService::mu_: the connection table and the fenced flag. A leaf:
//     never held while calling the LeaseTable or taking a send mutex.
//   * RdmaService::workers_mu_, then a CommitQueue's own lock: held to
//     queue or drop commits only, never while a commit runs.
//
// Thread safety: all public methods are thread-safe.

#ifndef KVSTORE_SERVER_RDMA_RDMA_SERVICE_H_
#define KVSTORE_SERVER_RDMA_RDMA_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics/registry.h"
#include "common/protocol/commit_wire.h"
#include "common/protocol/limits.h"
#include "common/rdma/completion_queue.h"
#include "common/rdma/device.h"
#include "common/rdma/gid.h"
#include "common/rdma/memory_window.h"
#include "common/rdma/queue_pair.h"
#include "server/metrics/request_metrics.h"
#include "server/rdma/commit_queue.h"
#include "server/rdma/commit_rights.h"
#include "server/rdma/rdma_sizing.h"
#include "server/rdma/replica_commit_sink.h"
#include "server/routing/fence_page.h"
#include "server/storage/kv_store.h"
#include "server/storage/lease_table.h"
#include "server/storage/memory_pool.h"

namespace kvstore {
namespace server {

struct RdmaServiceOptions {
  // Commit messages a client may have in flight per connection.
  uint32_t commit_credits = 64;
  uint32_t max_connections = 256;
  // Source GID: the RoCE v2 GID of this IPv4 address ("" = the first one).
  std::string gid_ipv4;
  // A connection with no lease and no commit for this long gets a probe (an
  // 8-byte RDMA WRITE); if its client is gone the probe fails and the
  // connection is torn down. RC gives no other sign of a peer that died
  // silently.
  absl::Duration idle_probe_after = absl::Seconds(30);
  // Where the service registers kvstore_rdma_* and the rdma request series
  // (not owned; must outlive the service). Null: a private registry.
  metrics::Registry* registry = nullptr;
  // The fence words readers check (not owned; must outlive the service).
  // Registered READ-only by Start(); null: no fence region is published and
  // readers skip the check (as with a server that predates fencing).
  FencePage* fence_page = nullptr;
};

class RdmaService {
 public:
  // Finds the GID, creates the completion channel and the shared receive CQ
  // and starts the poller. kInvalidArgument for commit_credits outside
  // [1, 4096] or larger than the device's CQ (PlanRecvCq; fewer connections
  // than max_connections are accepted when max_connections x credits
  // receives would not fit it); the GID lookup's error when options.gid_ipv4 names no RoCE v2
  // GID; a verbs error when a CQ or channel cannot be created or the fence
  // page cannot be registered. The pointers
  // are not owned; see the lifetimes above.
  static absl::StatusOr<std::unique_ptr<RdmaService>> Start(rdma::Device* device,
                                                            rdma::ProtectionDomain* pd,
                                                            MemoryPool* pool, KvStore* store,
                                                            LeaseTable* leases,
                                                            const RdmaServiceOptions& options);
  // Stops the poller and destroys every connection (a QP goes with the last
  // reference to its connection). REQUIRES: every write key BindLease() made
  // has been revoked (the LeaseTable is gone).
  ~RdmaService();
  RdmaService(const RdmaService&) = delete;
  RdmaService& operator=(const RdmaService&) = delete;

  // What Connect() tells the client (ConnectQpResponse).
  struct Accepted {
    // Never 0; names the connection in GrantLease, Renew/Release, commits.
    uint64_t connection_id = 0;
    rdma::QpEndpoint server;
    uint32_t commit_credits = 0;
    uint32_t max_commit_bytes = 0;
    // Takes kReplicaPutBatch commits (set_announce_replica_batches).
    bool replica_batch_commits = true;
  };
  // Creates a queue pair for `client` and connects it; `owner` names the
  // client in logs. `probe_addr`/`probe_rkey`: 8 bytes of client memory for
  // idle probes (0: this connection is never probed). `rights`: what its
  // commits may do (the session's principal; a commit beyond them is acked
  // PERMISSION_DENIED and changes nothing).
  // kResourceExhausted when max_connections are open; kUnavailable while
  // fenced (FenceAll() until Unfence()); a verbs error when the QP, its CQ
  // or its buffers cannot be set up.
  absl::StatusOr<Accepted> Connect(const rdma::QpEndpoint& client, std::string owner,
                                   uint64_t probe_addr = 0, uint32_t probe_rkey = 0,
                                   CommitRights rights = {/*write=*/true, /*replicate=*/false});
  // Ends a connection and every lease held by it. kNotFound if unknown.
  absl::Status Disconnect(uint64_t connection_id);

  // True while connection `connection_id` is in the table and not dead
  // (a reaped or failed one is not live): what keeps a session alive.
  bool IsLive(uint64_t connection_id);

  // Makes the write key of `lease` (being granted by LeaseTable::Grant, as
  // its KeyMaker): registers the chunk as an MR of its own, allocates a
  // memory window and binds it over the chunk on `connection_id`'s queue
  // pair, waiting for the bind (at most 5 s). The key's holder is that
  // connection. kUnavailable "no live RDMA connection N ..." or "binding the
  // lease's write key failed: ..."; a verbs error from the registration or
  // allocation. Nothing is left behind on failure.
  absl::StatusOr<std::unique_ptr<LeaseWriteKey>> BindLease(uint64_t connection_id,
                                                           const LeaseInfo& lease);

  // Stops handling commits and idle probes; after it returns the service no
  // longer calls the LeaseTable, which may then be destroyed. Idempotent.
  void StopPoller();

  // Where replica commits go (cluster mode: the ReplicaInstaller; null, the
  // default: they are refused with kFailedPrecondition). Not owned; must
  // outlive StopPoller(). Set before the node takes any role.
  // Also moves commit handling off the poller thread (cluster mode): client
  // commits go to a CommitQueue of kCommitWorkers threads because the
  // replicator makes them wait for backups; replica commits to a second
  // CommitQueue of kReplicaWorkers threads that never wait for another
  // node. Each queue has a lane per connection (a connection's commits stay
  // in order; lanes take turns, so one sender's backlog or slow commits do
  // not hold up another's, and one primary's replication cannot delay
  // another's), bounded by the connection's commit credits: a connection
  // with more commits waiting than that is failed (kvstore_rdma_credit_
  // violations_total). The poller only receives, so two nodes that
  // replicate to each other never wait on each other's poller.
  // `offload_commits` false (a cluster with R=1: no write waits for a
  // backup) keeps client commits on the poller, saving a thread hand-off;
  // replica commits still get their queue.
  // `start_commits` (with offload_commits): a client's PUT or DELETE commit
  // is first offered to the write hook's started path (LeaseTable::
  // StartCommitFrom, KvStore::StartDelete) on the poller, when nothing of
  // its connection is queued: the round's
  // end acks it, and no worker waits for it. Declined (a busy key, a
  // migration, a syncing replica, ...), it takes its lane.
  void set_replica_sink(ReplicaCommitSink* sink, bool offload_commits = true,
                        bool start_commits = false);
  static constexpr int kCommitWorkers = 4;
  static constexpr int kReplicaWorkers = 2;
  // Whether connections accepted from now on are told that this server
  // takes kReplicaPutBatch commits (ConnectQpResponse.replica_batch_commits;
  // default true). False answers as a server older than the op would, so
  // that a primary's per-write fallback can be tested; batch commits that
  // still arrive are installed either way.
  void set_announce_replica_batches(bool on) { announce_batches_.store(on); }

  // Fences (architecture §19.5): marks every connection dead, moves its
  // queue pair to the error state (the client's work requests then fail,
  // it sees a broken path), ends the leases it holds, and drops it; then
  // refuses Connect() until Unfence(). Returns how many connections were
  // fenced. Idempotent; counts kvstore_rdma_fences_total once per call
  // that found the service unfenced. A Connect() racing with it either
  // is fenced here or refused: none survives.
  int FenceAll();
  // Accepts Connect() again. Queue pairs fenced earlier stay gone: clients
  // connect new ones.
  void Unfence();
  bool fenced() const;

  // Where readers READ the fence words: the page's registration, READ-only.
  struct FenceRegion {
    uint64_t addr = 0;
    uint32_t rkey = 0;
    uint64_t length = 0;  // fence::kFenceBytes: what the handshake lists
  };
  // Set when options.fence_page was; fixed by Start().
  const std::optional<FenceRegion>& fence_region() const { return fence_region_; }

  // The GID and port of the server's queue pairs, for the handshake. Fixed
  // by Start().
  const rdma::Gid& gid() const { return gid_; }
  uint8_t port() const { return device_->port(); }
  // The registry holding the service's series (options.registry or its own).
  const metrics::Registry& registry() const { return *registry_; }

 private:
  struct Connection;
  class LeaseWindow;

  RdmaService(rdma::Device* device, rdma::ProtectionDomain* pd, MemoryPool* pool, KvStore* store,
              LeaseTable* leases, const RdmaServiceOptions& options);
  // The CQ, buffers and QP of a new connection, not yet connected or
  // published.
  absl::StatusOr<std::shared_ptr<Connection>> NewConnection(uint64_t id);
  void PollLoop();
  // Handles one completion of the shared receive CQ. Returns the connection
  // when it has to be torn down, else null.
  std::shared_ptr<Connection> HandleReceive(const ibv_wc& wc);
  // Runs one commit message and acks it (rdma_service_commits.cc).
  // `counted`: a client commit Dispatch() counted in conn->unanswered,
  // given back just before its ack is posted.
  void HandleCommit(const std::shared_ptr<Connection>& conn, absl::string_view message,
                    bool counted = false);
  // What every commit ends with: counts a refusal, acks `status` under
  // `request_id` and records a PUT's or DELETE's latency from `start`.
  void FinishCommit(Connection& c, wire::CommitOp op, uint64_t request_id,
                    const absl::Status& status, absl::Time start, uint16_t batch_applied = 0);
  // The started path of a client PUT or DELETE commit (set_replica_sink's
  // start_commits), on the poller, for a commit Dispatch() counted. True
  // when the commit is handled (started, or refused and acked); false when
  // it must take its lane, still counted (neither a PUT nor a DELETE, or
  // declined).
  bool StartClientCommit(const std::shared_ptr<Connection>& conn, absl::string_view message);
  // A started commit ended (its ack is out): counted out of
  // started_in_flight_.
  void EndStartedCommit();
  // A kReplicaPut / kReplicaDelete, handed to the replica sink.
  absl::Status HandleReplicaCommit(Connection& c, const wire::ParsedCommit& parsed);
  // A kReplicaPutBatch: its writes as HandleReplicaCommit() takes each, in
  // order, up to the first refused (whose status it returns); *applied is
  // how many were installed.
  absl::Status HandleReplicaBatch(Connection& c, const wire::ParsedCommit& parsed,
                                  uint16_t* applied);
  // A replica put's lease range checked (holder, liveness, range) and
  // handed with `commit` (its entry filled in) to `sink`.
  absl::Status InstallReplicaPut(Connection& c, ReplicaCommitSink& sink, ReplicaCommit& commit,
                                 uint64_t lease_id, uint64_t offset, uint64_t size);
  // Commit workers (rdma_service_workers.cc). Dispatch() queues a copy of
  // `message` on the connection's lane of the client or the replica
  // CommitQueue and returns true; false without workers (single-node mode,
  // or client commits with offload_commits false: the poller handles them
  // itself). A connection with more client commits unanswered than its
  // credits, or more replica commits waiting, is marked dead (the poller
  // then tears it down), and true is returned.
  bool Dispatch(const std::shared_ptr<Connection>& conn, absl::string_view message);
  // Marks `c` dead for exceeding its credits (`why`), counted once.
  void FailForCredits(Connection& c, absl::string_view why);
  // Drops the commits of a torn-down connection that no worker started.
  void DropQueuedCommits(uint64_t connection_id);
  void StopWorkers();
  // `batch_applied`: a kReplicaPutBatch's count (wire::CommitAck).
  void SendAck(Connection& c, uint64_t request_id, const absl::Status& status,
               uint16_t batch_applied = 0);
  std::shared_ptr<Connection> Find(uint64_t id);
  // Marks `c` dead, ends the leases it holds (unless stopping) and drops it
  // from the table.
  void Teardown(std::shared_ptr<Connection> c);
  // Teardown() for the poller: `c` leaves the table at once and its leases
  // are ended on the reaper thread. Ending a lease waits for its commits'
  // replication rounds, and a poller waiting for a round stops every other
  // commit and replica install of its node meanwhile.
  void Reap(std::shared_ptr<Connection> c);
  // The reaper thread: ends the leases of the connections Reap() queued.
  void ReapLoop();
  void ProbeIdle();
  // Moves `c`'s queue pair to the error state (FenceAll()).
  static void FailQueuePair(Connection& c);
  // Registers options_.fence_page READ-only; Start() only.
  absl::Status RegisterFencePage();
  // Registers the service's series; constructor only.
  void RegisterMetrics();

  // Declared first: the Counter*s below point into it, so it dies last.
  std::unique_ptr<metrics::Registry> own_registry_;
  metrics::Registry* const registry_;
  rdma::Device* const device_;
  rdma::ProtectionDomain* const pd_;
  MemoryPool* const pool_;
  KvStore* const store_;
  LeaseTable* const leases_;
  std::atomic<ReplicaCommitSink*> replica_sink_{nullptr};
  std::atomic<bool> announce_batches_{true};
  const RdmaServiceOptions options_;
  const uint32_t slot_bytes_;  // one commit receive buffer
  // options_.max_connections, or fewer when the receive CQ cannot hold them
  // (PlanRecvCq); set by Start() before the service is used.
  uint32_t max_connections_ = 0;
  int gid_index_ = 0;
  rdma::Gid gid_{};

  // The receive CQ shared by every connection, polled by poller_.
  std::optional<rdma::CompletionChannel> channel_;
  std::optional<rdma::CompletionQueue> recv_cq_;

  // The fence page's MR (READ-only) and what the handshake says of it.
  std::optional<rdma::MemoryRegion> fence_mr_;
  std::optional<FenceRegion> fence_region_;

  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Connect() calls past the cap check and not yet in conns_: they count
  // against max_connections_ too, so concurrent Connects cannot together
  // exceed it (the receive CQ is sized for exactly that many).
  uint32_t connecting_ ABSL_GUARDED_BY(mu_) = 0;
  bool fenced_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Connection>> conns_ ABSL_GUARDED_BY(mu_);

  std::atomic<bool> stop_{false};
  std::thread poller_;
  // Connections Reap() dropped whose leases are still to be ended, and the
  // thread that ends them (started before the poller, stopped after it).
  absl::Mutex reap_mu_;
  std::deque<uint64_t> reap_ ABSL_GUARDED_BY(reap_mu_);
  bool reap_stop_ ABSL_GUARDED_BY(reap_mu_) = false;
  std::thread reaper_;
  // Started by set_replica_sink(): kCommitWorkers threads for client
  // commits, kReplicaWorkers for replica commits, each queue with a lane
  // per connection. Guarded by workers_mu_ until StopWorkers().
  absl::Mutex workers_mu_;
  std::unique_ptr<CommitQueue> client_queue_ ABSL_GUARDED_BY(workers_mu_);
  std::unique_ptr<CommitQueue> replica_queue_ ABSL_GUARDED_BY(workers_mu_);
  std::atomic<bool> has_workers_{false};
  bool offload_commits_ ABSL_GUARDED_BY(workers_mu_) = true;
  bool start_commits_ ABSL_GUARDED_BY(workers_mu_) = false;
  // Client commits started and not yet ended: StopWorkers() waits for them,
  // as it waits for the workers' running commits.
  absl::Mutex started_mu_;
  int started_in_flight_ ABSL_GUARDED_BY(started_mu_) = 0;
  // Owned by *registry_; bumped where the event happens.
  metrics::Counter* connections_total_;
  metrics::Counter* commit_errors_;
  metrics::Counter* commit_refused_rights_;
  metrics::Counter* bound_;
  metrics::Counter* revoked_;
  metrics::Counter* wakeups_;
  metrics::Counter* probes_;
  metrics::Counter* reaped_;
  metrics::Counter* fences_;
  metrics::Counter* credit_violations_;
  metrics::Counter* commits_started_;
  metrics::Counter* replica_batches_;
  metrics::Counter* replica_batch_writes_;
  RequestMetrics puts_;     // PUT commits (transport="rdma", op="put")
  RequestMetrics deletes_;  // DELETE commits (op="delete")
  // kvstore_rdma_connections reads conns_ under mu_; declared last so it is
  // unregistered before either goes.
  metrics::CallbackHandle connections_gauge_;
  // kvstore_rdma_commits_waiting{queue=client|replica} (cluster mode).
  metrics::CallbackHandle waiting_gauges_[2];
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RDMA_RDMA_SERVICE_H_
