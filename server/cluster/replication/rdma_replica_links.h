// Copyright 2026 The kvstore Authors.
//
// RdmaReplicaLinks: a primary's RDMA connections to the backups it
// replicates to (architecture §19.3). When this node has an RDMA device and
// a backup publishes RDMA regions, the primary is an RDMA client of that
// backup: it handshakes with the backup's KvControl service (the cluster's
// shared token) and sends each replicated write through a ReplicaWriter
// (replica_writer.h): an RDMA WRITE of the committed entry plus a replica
// commit, installed in place by the backup's poller.
//
// Get() returns a node's link when one is up; otherwise it asks the
// connector thread to make one and returns null, and the replicator sends
// that write with the Replicate RPC. So a write never waits for a connect,
// and the first writes to a new backup go by gRPC. A connect that fails (a
// refused handshake, a device that cannot be opened) is tried again after
// `retry_after`, and so is a link that Drop() dropped after its queue pair
// broke or its session was lost; a backup without RDMA is asked again only
// after 12 times that. A node that comes back with another incarnation or
// address gets a new link.
//
// Thread safety: thread-safe. Lock order: a node's entry, then mu_; the
// connector holds neither while it connects.

#ifndef KVSTORE_SERVER_CLUSTER_REPLICATION_RDMA_REPLICA_LINKS_H_
#define KVSTORE_SERVER_CLUSTER_REPLICATION_RDMA_REPLICA_LINKS_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics/registry.h"
#include "common/protocol/commit_wire.h"
#include "common/rdma/initiator/shared_context.h"
#include "proto/kv_cluster.pb.h"
#include "server/cluster/replication/replica_link_metrics.h"

namespace kvstore {
namespace control {
class ControlClient;
}  // namespace control

namespace server {

class ReplicaWriter;

struct RdmaReplicaLinksOptions {
  // This node's RDMA device name (as KvServer opened it); empty: no RDMA
  // here, Get() always returns null.
  std::string device;
  // The cluster secret (every node shares it), the bearer token of the
  // link's control session: the backup accepts replica commits only on
  // queue pairs of a peer's session. Empty: none (tests).
  std::string peer_secret;
  // Bounds the handshake and ConnectQp of a new link.
  absl::Duration connect_timeout = absl::Seconds(2);
  // Lease size on the backup (as client::Options::lease_bytes).
  uint64_t lease_bytes = 4 << 20;
  // After a failed connect or a dropped link, gRPC is used for this long.
  absl::Duration retry_after = absl::Seconds(5);
  // Names this node to the backups (its owner string in their logs).
  std::string self;
};

// One backup's connection. Thread-safe (the writer is).
//
// Writes go two ways: Send() on the caller's thread, which waits for the
// ack (the replicator's waiting path), or Start(), which queues the write
// for the link's own sender thread and returns (Replicator::StartWrite:
// the started path of a RESP SET, a gRPC Put or Delete, an RDMA client
// commit). The sender takes what is queued as a batch: its PUTs go as
// WRITEs and one batch commit in one doorbell (ReplicaWriter::PutBatch;
// WRITE + commit pairs to a backup that predates batch commits), its
// DELETEs one commit each, all posted before the first ack is awaited
// (ReplicaWriter::DeleteBatch), and each write's `done` runs with its ack. So
// under load a round trip carries many writes, and no thread of a shared
// pool waits for them; idle, a write goes at once.
class RdmaReplicaLink {
 public:
  RdmaReplicaLink(std::unique_ptr<control::ControlClient> control,
                  std::unique_ptr<ReplicaWriter> writer);
  // Stops the sender: the writes still queued get kUnavailable, the batch
  // on its way its acks (or its deadline). Not from the sender's thread
  // (a `done` must not drop the last reference to its link).
  ~RdmaReplicaLink();
  // A replicated write: `entry` empty is a delete of `key`. The backup's
  // ack status (its replication refusals included) or the transport's
  // error (see failed()).
  absl::Status Send(absl::string_view key, absl::string_view entry, const wire::ReplicaCommit& tag,
                    absl::Time deadline);
  // Send() without waiting: `done` runs once, on the link's sender thread,
  // with what Send() would have returned, or kUnavailable when the link is
  // closed first. `key`, `entry` and the tag's node id must stay valid
  // until `done` runs. Writes are sent in the order they were started.
  void Start(absl::string_view key, absl::string_view entry, const wire::ReplicaCommit& tag,
             absl::Time deadline, std::function<void(absl::Status)> done);
  // Writes of one sender batch, at most.
  static constexpr size_t kMaxBatch = 32;
  // True when `status` (from Send) means the link itself failed (queue pair
  // broken, session lost, no answer in time) rather than the backup
  // refusing the write: the caller drops it and may send the write by gRPC.
  bool failed(const absl::Status& status) const;

 private:
  struct Started {
    absl::string_view key, entry;
    wire::ReplicaCommit tag;
    absl::Time deadline;
    std::function<void(absl::Status)> done;
  };
  // The sender thread: batches what Start() queued until the destructor.
  void SendLoop();
  // Sends one batch and runs its writes' `done`s.
  void SendBatch(std::vector<Started>& batch);

  // Destroyed in reverse: the writer before the control client it uses.
  std::unique_ptr<control::ControlClient> control_;
  std::unique_ptr<ReplicaWriter> writer_;
  absl::Mutex mu_;
  std::deque<Started> started_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread sender_;  // started by the constructor, joined by the destructor
};

class RdmaReplicaLinks {
 public:
  // `registry` (the server's; not owned) gets the kvstore_replication_rdma_*
  // series of ReplicaLinkMetrics, per backup for its links' leases. Starts
  // the connector thread (none without a device); the destructor stops it.
  RdmaReplicaLinks(RdmaReplicaLinksOptions options, metrics::Registry* registry);
  ~RdmaReplicaLinks();
  RdmaReplicaLinks(const RdmaReplicaLinks&) = delete;
  RdmaReplicaLinks& operator=(const RdmaReplicaLinks&) = delete;

  // The link to `node` when it is up; null otherwise (a connect is started
  // in the background unless one is running or failed within retry_after).
  std::shared_ptr<RdmaReplicaLink> Get(const v1::ClusterNode& node);
  // Forgets `link` (if it is still `node_id`'s): counted as a fallback;
  // gRPC is used to that node for retry_after.
  void Drop(const std::string& node_id, const std::shared_ptr<RdmaReplicaLink>& link);

  // Counters, for the replicator's accounting.
  metrics::Counter* sent() const { return metrics_.writes(); }

  // One backup's send within SendAll(): its link in, its status out.
  struct Send {
    std::shared_ptr<RdmaReplicaLink> link;
    absl::Status status;
  };
  // Sends one write (`entry` empty: a delete of `key`) over every link of
  // `sends` at once: the first on the calling thread, the others on the
  // sender threads (kSenders), so R=3 waits for the slower of two acks, not
  // their sum. Returns when every send has its status.
  void SendAll(std::vector<Send>& sends, absl::string_view key, absl::string_view entry,
               const wire::ReplicaCommit& tag, absl::Time deadline);
  static constexpr int kSenders = 2;

 private:
  struct Entry {
    absl::Mutex mu;
    std::string address ABSL_GUARDED_BY(mu);
    uint64_t incarnation ABSL_GUARDED_BY(mu) = 0;
    std::shared_ptr<RdmaReplicaLink> link ABSL_GUARDED_BY(mu);
    absl::Time retry_at ABSL_GUARDED_BY(mu) = absl::InfinitePast();
    bool connecting ABSL_GUARDED_BY(mu) = false;
    bool said_no_device ABSL_GUARDED_BY(mu) = false;  // logged once per incarnation
  };
  std::shared_ptr<Entry> EntryOf(const std::string& node_id);
  // The connector thread: connects the queued nodes one at a time.
  void ConnectLoop();
  // A sender thread: runs the tasks SendAll() queues for it.
  struct Sender {
    absl::Mutex mu;
    std::deque<std::function<void()>> tasks ABSL_GUARDED_BY(mu);
    bool stop ABSL_GUARDED_BY(mu) = false;
    std::thread thread;
  };
  void SenderLoop(Sender* s);
  // Handshake, open the device if needed, connect. kUnavailable with the
  // reason when RDMA cannot be used to `node`; *no_device set when the
  // reason is that `node` has no RDMA device.
  absl::StatusOr<std::shared_ptr<RdmaReplicaLink>> Connect(const v1::ClusterNode& node,
                                                           absl::Time deadline, bool* no_device);

  const RdmaReplicaLinksOptions options_;
  // The device, opened by the first connect and shared by every link.
  initiator::SharedContext context_;
  const ReplicaLinkMetrics metrics_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::ClusterNode> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::vector<std::unique_ptr<Sender>> senders_;  // with a device only
  std::thread connector_;                         // last: started once everything above exists
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_REPLICATION_RDMA_REPLICA_LINKS_H_
