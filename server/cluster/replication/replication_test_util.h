// Copyright 2026 The kvstore Authors.
//
// Test fixture for replication: in-process kvserver nodes, each with a real
// KvStore whose write hook is a real Replicator, a real ReplicaInstaller and
// the real KvCluster service on a real gRPC server on 127.0.0.1. Only the
// etcd side is faked: FakeMapStore holds the one cluster map and installs
// every edit in every node's ClusterState (the etcd-backed ShardMapEditor is
// membership's, tested there).

#ifndef KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICATION_TEST_UTIL_H_
#define KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICATION_TEST_UTIL_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/server.h"
#include "server/cluster/cluster_service.h"
#include "server/cluster/membership/shard_map_editor.h"
#include "server/cluster/migration/migration_driver.h"
#include "server/cluster/migration/slot_importer.h"
#include "server/cluster/peer/peer_client.h"
#include "server/cluster/peer/peer_listener.h"
#include "server/cluster/replication/replica_installer.h"
#include "server/cluster/replication/replicator.h"
#include "server/cluster/replication/shard_reconciler.h"
#include "server/cluster/replication/shard_seqs.h"
#include "server/storage/kv_store.h"
#include "server/storage/memory_pool.h"

namespace kvstore {
namespace server {
namespace testing {

// The cluster map "in etcd". Thread-safe.
class FakeMapStore {
 public:
  // Installs `map` with the next epoch in every registered state except
  // those in `skip` (their nodes lag behind until Catch-up()).
  void Set(v1::ClusterMap map, std::vector<ClusterState*> skip = {});
  // Edits the current map; `edit` returns an error to abort. Fails with
  // `fail_edits` when that is set.
  absl::Status Edit(const std::function<absl::Status(v1::ClusterMap&)>& edit);
  // Installs the current map in every state (the laggards catch up).
  void CatchUp();
  v1::ClusterMap Current();
  void Register(ClusterState* state);
  void set_fail_edits(absl::Status s);
  // Runs before each edit (e.g. to check what was published by then).
  void set_on_edit(std::function<void()> fn);

 private:
  void InstallLocked(const std::vector<ClusterState*>& skip) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Mutex mu_;
  v1::ClusterMap map_ ABSL_GUARDED_BY(mu_);
  std::vector<ClusterState*> states_ ABSL_GUARDED_BY(mu_);
  absl::Status fail_edits_ ABSL_GUARDED_BY(mu_);
  std::function<void()> on_edit_ ABSL_GUARDED_BY(mu_);
};

// ShardMapEditor over a FakeMapStore, with the checks the etcd one makes.
class FakeEditor : public ShardMapEditor {
 public:
  FakeEditor(FakeMapStore* maps, std::string self) : maps_(maps), self_(std::move(self)) {}
  absl::Status RemoveReplica(uint32_t shard_id, absl::string_view node_id) override;
  // Checks only that the node is syncing (the incarnation and epoch
  // checks are MapStore's, tested on etcd).
  absl::Status MarkInSync(uint32_t shard_id, absl::string_view node_id, uint64_t incarnation,
                          uint64_t copy_shard_epoch) override;
  // As MapStore's: this node must lead the migration's source shard, whose
  // epoch is bumped (the flip bumps the target's too); BeginHandoff needs the
  // target's shard epoch unchanged since the copy began.
  absl::Status BeginHandoff(uint32_t migration_id, uint64_t target_shard_epoch) override;
  absl::Status CompleteMigration(uint32_t migration_id) override;

 private:
  // Edits migration `id` with `change`; OK without a change when `gone_ok`
  // and the migration is gone.
  absl::Status EditMigration(
      uint32_t id, bool gone_ok,
      const std::function<absl::Status(v1::ClusterMap&, int index, v1::Shard* source)>& change);
  FakeMapStore* maps_;
  std::string self_;
};

// The real service with test seams around Replicate: `before` runs first
// (an error: the write is refused, never installed; it may block), `after`
// runs once the real Replicate installed it and replaces an OK answer with
// its error (the backup holds the write, the primary hears a failure: a
// lost answer).
class TestClusterService : public ClusterService {
 public:
  using ClusterService::ClusterService;
  using Before = std::function<absl::Status(const v1::ReplicateRequest&)>;
  void set_before(Before fn) {
    absl::MutexLock lock(&mu_);
    before_ = std::move(fn);
  }
  void set_after(Before fn) {
    absl::MutexLock lock(&mu_);
    after_ = std::move(fn);
  }

 protected:
  // Both Replicate and the replication stream come here. The hooks see a
  // copy of the write as a message (a hook may keep it).
  absl::Status InstallWrite(const ReplicateWrite& write, absl::Time deadline) override;

 private:
  absl::Mutex mu_;
  Before before_ ABSL_GUARDED_BY(mu_);
  Before after_ ABSL_GUARDED_BY(mu_);
};

// A gate a backup's hook (set_before / set_after) waits at or signals
// through. Copies share one gate, and a hook captures its copy by value:
// a delivery that reaches the hook after the test body returned (on a
// loaded machine a backup may read a batch the primary already gave up on)
// then finds the gate still there, open, where a captured local
// absl::Notification would be destroyed (a hang, or a crash). Open() may
// be called any number of times. Thread-safe.
class HookGate {
 public:
  void Open() const {
    absl::MutexLock lock(&state_->mu);
    if (!state_->open.HasBeenNotified()) state_->open.Notify();
  }
  void Wait() const { state_->open.WaitForNotification(); }
  bool IsOpen() const { return state_->open.HasBeenNotified(); }

 private:
  struct State {
    absl::Mutex mu;  // one Notify() even when hooks race to Open()
    absl::Notification open;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// The cluster secret every test node shares, and the credentials with only it.
inline constexpr char kTestClusterSecret[] = "test-cluster-secret-0123456789";
inline auth::Credentials TestCredentials() {
  auth::Credentials c;
  c.peer_secret = kTestClusterSecret;
  return c;
}

struct NodeOptions {
  absl::Duration replication_timeout = absl::Seconds(2);
  // ReplicatorOptions::lease_ttl: how long writes are held after a demoted
  // former primary is dropped.
  absl::Duration lease_ttl = absl::Seconds(3);
  // ReplicatorOptions::min_insync_replicas.
  uint32_t min_insync_replicas = 1;
  bool sync_thread = true;
  // ShardReconcilerOptions::settle_idle (else only a write repairs keys
  // whose write ended unknown).
  bool settle_idle = true;
  // The migration driver's thread (else tests call driver().Step()).
  bool migration_thread = false;
  // Every node's credentials: the cluster secret lets the nodes call each
  // other (peer RPCs need it); the client tokens are empty (open) unless a
  // test sets them.
  auth::Credentials credentials = TestCredentials();
  // Makes the node's ShardMapEditor (e.g. an etcd MapStore); empty: a
  // FakeEditor over the FakeMapStore.
  std::function<std::unique_ptr<ShardMapEditor>(ClusterState*)> make_editor;
  // Serve a peer socket (as kvserver's --replication_port): the maps name
  // it, and primaries stream writes to this node over it, not gRPC.
  bool peer_socket = false;
};

// One kvserver's replication stack.
class Node {
 public:
  Node(std::string id, FakeMapStore* maps, const NodeOptions& options);
  ~Node();

  const std::string& id() const { return id_; }
  int port() const { return port_; }
  // "127.0.0.1:<port>" of the peer socket; empty without
  // NodeOptions::peer_socket.
  const std::string& replication_address() const { return replication_address_; }
  absl::Status Put(absl::string_view key, absl::string_view value);
  // Put() through KvStore::StartCommit, as the RESP loop commits a SET:
  // false when the store declined (nothing done; the entry's space is
  // released); otherwise `done` runs once with the commit's status, on
  // whichever thread ends the write.
  bool StartPut(absl::string_view key, absl::string_view value,
                std::function<void(absl::Status)> done);
  absl::Status Delete(absl::string_view key) { return store_->Delete(key); }
  // The value, or "<NOT_FOUND>" etc.
  std::string Value(absl::string_view key);
  // Stops serving gRPC and the peer socket (a dead node, as its peers see
  // it).
  void Kill();

  KvStore& store() { return *store_; }
  ClusterState& state() { return state_; }
  ReplicaInstaller& installer() { return *installer_; }
  SlotImporter& importer() { return *importer_; }
  MigrationDriver& driver() { return *driver_; }
  TestClusterService& service() { return *service_; }
  metrics::Registry& registry() { return registry_; }
  // A stub whose calls carry `token` as their bearer token (unless a call
  // sets its own): by default the cluster secret, as another node calls;
  // "" for none.
  std::unique_ptr<v1::KvCluster::Stub> NewStub(const std::string& token = kTestClusterSecret) const;

 private:
  const std::string id_;
  metrics::Registry registry_;
  ClusterState state_;
  ShardSeqs seqs_;
  FakeEditor editor_;
  std::unique_ptr<ShardMapEditor> custom_editor_;  // NodeOptions::make_editor
  std::unique_ptr<PeerClient> peers_;              // before everything that calls peers
  std::unique_ptr<MemoryPool> pool_;
  std::unique_ptr<Replicator> replicator_;
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<ReplicaInstaller> installer_;
  std::unique_ptr<ShardReconciler> reconciler_;
  std::unique_ptr<SlotImporter> importer_;
  std::unique_ptr<MigrationDriver> driver_;
  std::unique_ptr<TestClusterService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::unique_ptr<PeerListener> peer_listener_;
  std::string replication_address_;
  absl::Mutex writer_mu_;  // held across a whole Put()
  std::unique_ptr<KvStore::Writer> writer_ ABSL_GUARDED_BY(writer_mu_);
  // StartPut()'s: its callback runs on a gRPC thread, which must never wait
  // for a Put() (it may be what that Put() waits for).
  absl::Mutex start_writer_mu_;
  std::unique_ptr<KvStore::Writer> start_writer_ ABSL_GUARDED_BY(start_writer_mu_);
};

// A map of one shard holding every slot: `replicas` (primary first) and
// `syncing` are indexes into `nodes`; every node is listed in the map.
v1::ClusterMap OneShardMap(const std::vector<Node*>& nodes, std::vector<int> replicas,
                           std::vector<int> syncing, uint64_t shard_epoch = 1);

// Two shards: shard 0 owns slots 0-8191 (replicas `s0`, primary first),
// shard 1 owns 8192-16383 (`s1`); with `state` other than UNSPECIFIED,
// migration 1 moves slots 0-`last_moved_slot` from shard 0 to shard 1.
v1::ClusterMap TwoShardMap(const std::vector<Node*>& nodes, std::vector<int> s0,
                           std::vector<int> s1, v1::MigrationState state, uint32_t last_moved_slot);

}  // namespace testing
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICATION_TEST_UTIL_H_
