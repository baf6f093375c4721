// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/replication_test_util.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/auth/token.h"
#include "common/grpc_status.h"
#include "common/protocol/layout.h"
#include "glog/logging.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/client_interceptor.h"
#include "server/cluster/replication/replica_socket.h"

namespace kvstore {
namespace server {
namespace testing {

void FakeMapStore::Register(ClusterState* state) {
  absl::MutexLock lock(&mu_);
  states_.push_back(state);
}

void FakeMapStore::set_fail_edits(absl::Status s) {
  absl::MutexLock lock(&mu_);
  fail_edits_ = std::move(s);
}

void FakeMapStore::set_on_edit(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  on_edit_ = std::move(fn);
}

v1::ClusterMap FakeMapStore::Current() {
  absl::MutexLock lock(&mu_);
  return map_;
}

void FakeMapStore::InstallLocked(const std::vector<ClusterState*>& skip) {
  auto view = cluster::ClusterMapView::Build(map_);
  CHECK(view.ok()) << view.status();
  for (ClusterState* s : states_) {
    if (std::find(skip.begin(), skip.end(), s) == skip.end()) s->Update(*view);
  }
}

void FakeMapStore::Set(v1::ClusterMap map, std::vector<ClusterState*> skip) {
  absl::MutexLock lock(&mu_);
  map.set_epoch(map_.epoch() + 1);
  map_ = std::move(map);
  InstallLocked(skip);
}

void FakeMapStore::CatchUp() {
  absl::MutexLock lock(&mu_);
  InstallLocked({});
}

absl::Status FakeMapStore::Edit(const std::function<absl::Status(v1::ClusterMap&)>& edit) {
  absl::MutexLock lock(&mu_);
  if (on_edit_) on_edit_();
  if (!fail_edits_.ok()) return fail_edits_;
  v1::ClusterMap next = map_;
  if (absl::Status s = edit(next); !s.ok()) return s;
  next.set_epoch(map_.epoch() + 1);
  map_ = std::move(next);
  InstallLocked({});
  return absl::OkStatus();
}

namespace {

v1::Shard* FindShard(v1::ClusterMap& m, uint32_t id) {
  for (v1::Shard& s : *m.mutable_shards()) {
    if (s.shard_id() == id) return &s;
  }
  return nullptr;
}

bool Erase(google::protobuf::RepeatedPtrField<std::string>* ids, absl::string_view id, int from) {
  for (int i = from; i < ids->size(); ++i) {
    if ((*ids)[i] == id) {
      ids->erase(ids->begin() + i);
      return true;
    }
  }
  return false;
}

}  // namespace

absl::Status FakeEditor::RemoveReplica(uint32_t shard_id, absl::string_view node_id) {
  return maps_->Edit([&](v1::ClusterMap& m) {
    v1::Shard* s = FindShard(m, shard_id);
    if (s == nullptr || s->replicas().empty() || s->replicas(0) != self_) {
      return absl::FailedPreconditionError("not the primary");
    }
    if (!Erase(s->mutable_replicas(), node_id, 1) && !Erase(s->mutable_syncing(), node_id, 0)) {
      return absl::FailedPreconditionError("not a replica");
    }
    s->set_shard_epoch(s->shard_epoch() + 1);
    return absl::OkStatus();
  });
}

absl::Status FakeEditor::MarkInSync(uint32_t shard_id, absl::string_view node_id, uint64_t,
                                    uint64_t) {
  return maps_->Edit([&](v1::ClusterMap& m) {
    v1::Shard* s = FindShard(m, shard_id);
    if (s == nullptr || s->replicas().empty() || s->replicas(0) != self_) {
      return absl::FailedPreconditionError("not the primary");
    }
    if (!Erase(s->mutable_syncing(), node_id, 0)) {
      return absl::FailedPreconditionError("not syncing");
    }
    s->add_replicas(std::string(node_id));
    s->set_shard_epoch(s->shard_epoch() + 1);
    return absl::OkStatus();
  });
}

absl::Status FakeEditor::EditMigration(
    uint32_t id, bool gone_ok,
    const std::function<absl::Status(v1::ClusterMap&, int, v1::Shard*)>& change) {
  return maps_->Edit([&](v1::ClusterMap& m) {
    for (int i = 0; i < m.migrations_size(); ++i) {
      if (m.migrations(i).id() != id) continue;
      v1::Shard* source = FindShard(m, m.migrations(i).source_shard());
      if (source == nullptr || source->replicas().empty() || source->replicas(0) != self_) {
        return absl::FailedPreconditionError("not the primary of the source shard");
      }
      if (absl::Status s = change(m, i, source); !s.ok()) return s;
      source->set_shard_epoch(source->shard_epoch() + 1);
      return absl::OkStatus();
    }
    return gone_ok ? absl::CancelledError("gone") : absl::FailedPreconditionError("no migration");
  });
}

absl::Status FakeEditor::BeginHandoff(uint32_t migration_id, uint64_t target_shard_epoch) {
  return EditMigration(migration_id, false, [&](v1::ClusterMap& m, int i, v1::Shard*) {
    v1::Migration* mig = m.mutable_migrations(i);
    if (mig->state() != v1::MIGRATION_COPYING && mig->state() != v1::MIGRATION_HANDOFF) {
      return absl::FailedPreconditionError("not copying");
    }
    const v1::Shard* target = FindShard(m, mig->target_shard());
    if (mig->state() == v1::MIGRATION_COPYING &&
        (target == nullptr || target->shard_epoch() != target_shard_epoch)) {
      return absl::FailedPreconditionError("the target shard changed during the copy; copy again");
    }
    mig->set_state(v1::MIGRATION_HANDOFF);
    return absl::OkStatus();
  });
}

absl::Status FakeEditor::CompleteMigration(uint32_t migration_id) {
  absl::Status s =
      EditMigration(migration_id, true, [](v1::ClusterMap& m, int i, v1::Shard* source) {
        const v1::Migration mig = m.migrations(i);
        if (mig.state() != v1::MIGRATION_HANDOFF) {
          return absl::FailedPreconditionError("not in HANDOFF");
        }
        v1::Shard* target = FindShard(m, mig.target_shard());
        if (target == nullptr) return absl::FailedPreconditionError("no target shard");
        cluster::MoveSlots(mig.slots(), source, target);
        target->set_shard_epoch(target->shard_epoch() + 1);
        m.mutable_migrations()->erase(m.mutable_migrations()->begin() + i);
        return absl::OkStatus();
      });
  return absl::IsCancelled(s) ? absl::OkStatus() : s;
}

absl::Status TestClusterService::InstallWrite(const ReplicateWrite& write, absl::Time deadline) {
  Before before, after;
  {
    absl::MutexLock lock(&mu_);
    before = before_;
    after = after_;
  }
  if (before || after) {
    const v1::ReplicateRequest request = RequestOf(write);
    if (before) {
      if (absl::Status s = before(request); !s.ok()) return s;
    }
    absl::Status installed = ClusterService::InstallWrite(write, deadline);
    if (installed.ok() && after) {
      if (absl::Status s = after(request); !s.ok()) return s;
    }
    return installed;
  }
  return ClusterService::InstallWrite(write, deadline);
}

Node::Node(std::string id, FakeMapStore* maps, const NodeOptions& options)
    : id_(std::move(id)), state_(id_), editor_(maps, id_) {
  MemoryPoolOptions po;
  po.data_bytes = 64 << 20;
  po.index_bytes = 1 << 20;
  auto pool = MemoryPool::Create(po);
  CHECK(pool.ok()) << pool.status();
  pool_ = *std::move(pool);
  PeerClientOptions pco;
  pco.peer_secret = options.credentials.peer_secret;
  peers_ = std::make_unique<PeerClient>(pco);
  ReplicatorOptions ro;
  ro.replication_timeout = options.replication_timeout;
  ro.lease_ttl = options.lease_ttl;
  ro.min_insync_replicas = options.min_insync_replicas;
  ShardMapEditor* editor = &editor_;
  if (options.make_editor) {
    custom_editor_ = options.make_editor(&state_);
    editor = custom_editor_.get();
  }
  replicator_ = std::make_unique<Replicator>(&state_, editor, &seqs_, peers_.get(), &registry_, ro);
  KvStoreOptions so;
  so.segment_bytes = 1 << 20;
  so.registry = &registry_;
  so.write_hook = replicator_.get();
  auto store = KvStore::Create(pool_.get(), so);
  CHECK(store.ok()) << store.status();
  store_ = *std::move(store);
  ReplicaInstallerOptions io;
  io.min_backoff = absl::Milliseconds(20);
  io.max_backoff = absl::Milliseconds(200);
  if (!options.sync_thread) io.sync_poll_interval = absl::ZeroDuration();
  installer_ = std::make_unique<ReplicaInstaller>(store_.get(), &state_, &seqs_, peers_.get(),
                                                  &registry_, io);
  replicator_->set_store(store_.get());
  ShardReconcilerOptions ro2;
  ro2.attempt_timeout = options.replication_timeout;
  ro2.poll_interval = absl::Milliseconds(5);
  ro2.settle_idle = options.settle_idle;
  ro2.min_backoff = absl::Milliseconds(20);
  ro2.max_backoff = absl::Milliseconds(200);
  reconciler_ = std::make_unique<ShardReconciler>(store_.get(), &state_, replicator_.get(), &seqs_,
                                                  peers_.get(), &registry_, ro2);
  importer_ = std::make_unique<SlotImporter>(store_.get(), &state_, replicator_.get(), &registry_);
  MigrationDriverOptions mo;
  mo.poll_interval = options.migration_thread ? absl::Milliseconds(10) : absl::ZeroDuration();
  mo.min_backoff = absl::Milliseconds(20);
  mo.max_backoff = absl::Milliseconds(200);
  mo.batch_bytes = 64 << 10;  // several batches per copy
  driver_ = std::make_unique<MigrationDriver>(store_.get(), &state_, replicator_.get(), editor,
                                              peers_.get(), &registry_, mo);
  ClusterServiceDeps deps;
  deps.state = &state_;
  deps.importer = importer_.get();
  deps.store = store_.get();
  deps.replicator = replicator_.get();
  deps.installer = installer_.get();
  deps.credentials = options.credentials;
  deps.registry = &registry_;
  deps.sync_chunk_bytes = 256 << 10;
  service_ = std::make_unique<TestClusterService>(deps);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  builder.SetMaxReceiveMessageSize(-1);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  CHECK(server_ != nullptr && port_ > 0);
  if (options.peer_socket) {
    PeerListenerOptions lo;
    lo.secret = options.credentials.peer_secret;
    absl::flat_hash_map<std::string, PeerListener::Handler> handlers;
    TestClusterService* service = service_.get();
    handlers[std::string(kReplicatePurpose)] = ReplicaSocketHandler(
        [service](const ReplicateBatchView& b, absl::Time t) { return service->ApplyBatch(b, t); });
    auto listener = PeerListener::Start(lo, &registry_, std::move(handlers));
    CHECK(listener.ok()) << listener.status();
    peer_listener_ = *std::move(listener);
    replication_address_ = absl::StrCat("127.0.0.1:", peer_listener_->port());
  }
  maps->Register(&state_);
}

Node::~Node() {
  driver_.reset();
  reconciler_.reset();
  Kill();
  installer_.reset();
  {
    absl::MutexLock lock(&writer_mu_);
    writer_.reset();
  }
  {
    absl::MutexLock lock(&start_writer_mu_);
    start_writer_.reset();
  }
  store_.reset();
}

void Node::Kill() {
  if (peer_listener_ != nullptr) peer_listener_->Stop();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now());
    server_.reset();
  }
}

absl::Status Node::Put(absl::string_view key, absl::string_view value) {
  absl::MutexLock lock(&writer_mu_);
  if (writer_ == nullptr) writer_ = store_->NewWriter();
  return store_->Put(writer_.get(), key, value);
}

bool Node::StartPut(absl::string_view key, absl::string_view value,
                    std::function<void(absl::Status)> done) {
  Reservation r;
  {
    absl::MutexLock lock(&start_writer_mu_);
    if (start_writer_ == nullptr) start_writer_ = store_->NewWriter();
    absl::StatusOr<Reservation> reserved = start_writer_->Reserve(key.size(), value.size());
    if (!reserved.ok()) return false;
    r = *std::move(reserved);
  }
  layout::EncodeEntry(r.ptr, key, value, store_->Version(), 0);
  // Not under start_writer_mu_: `done` may run before StartCommit returns.
  const bool started = store_->StartCommit(r.offset, r.size, /*verify_checksum=*/false,
                                           [this, r, done](absl::Status s) mutable {
                                             {
                                               absl::MutexLock lock(&start_writer_mu_);
                                               start_writer_->Done(r);
                                             }
                                             done(std::move(s));
                                           });
  if (!started) {
    absl::MutexLock lock(&start_writer_mu_);
    start_writer_->Done(r);
  }
  return started;
}

std::string Node::Value(absl::string_view key) {
  auto v = store_->Get(key);
  if (!v.ok()) return absl::StrCat("<", absl::StatusCodeToString(v.status().code()), ">");
  return std::string(v->value());
}

namespace {

// Adds "authorization: Bearer <token>" to every call that has none (gRPC
// sends no call credentials on an insecure channel; the servers check the
// header alone).
class BearerInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit BearerInterceptor(std::string header) : header_(std::move(header)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      std::multimap<std::string, std::string>* md = methods->GetSendInitialMetadata();
      if (md->find("authorization") == md->end()) md->emplace("authorization", header_);
    }
    methods->Proceed();
  }

 private:
  const std::string header_;
};

class BearerInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerInterceptorFactory(std::string header) : header_(std::move(header)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new BearerInterceptor(header_);
  }

 private:
  const std::string header_;
};

}  // namespace

std::unique_ptr<v1::KvCluster::Stub> Node::NewStub(const std::string& token) const {
  const std::string address = absl::StrCat("127.0.0.1:", port_);
  if (token.empty()) {
    return v1::KvCluster::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> factories;
  factories.push_back(std::make_unique<BearerInterceptorFactory>(auth::BearerHeader(token)));
  return v1::KvCluster::NewStub(grpc::experimental::CreateCustomChannelWithInterceptors(
      address, grpc::InsecureChannelCredentials(), grpc::ChannelArguments(), std::move(factories)));
}

v1::ClusterMap OneShardMap(const std::vector<Node*>& nodes, std::vector<int> replicas,
                           std::vector<int> syncing, uint64_t shard_epoch) {
  v1::ClusterMap m;
  m.set_replication_factor(static_cast<uint32_t>(replicas.size()));
  m.set_cluster_name("test");
  m.set_controller(nodes[0]->id());
  for (size_t i = 0; i < nodes.size(); ++i) {
    v1::ClusterNode* n = m.add_nodes();
    n->set_node_id(nodes[i]->id());
    n->set_incarnation(100 + i);
    n->set_control_address(absl::StrCat("127.0.0.1:", nodes[i]->port()));
    n->set_resp_address(absl::StrCat("127.0.0.1:", 7000 + i));
    n->set_replication_address(nodes[i]->replication_address());
  }
  v1::Shard* s = m.add_shards();
  s->set_shard_id(0);
  s->set_shard_epoch(shard_epoch);
  v1::SlotRange* r = s->add_slots();
  r->set_start(0);
  r->set_end(cluster::kSlotCount - 1);
  for (int i : replicas) s->add_replicas(nodes[i]->id());
  for (int i : syncing) s->add_syncing(nodes[i]->id());
  return m;
}

v1::ClusterMap TwoShardMap(const std::vector<Node*>& nodes, std::vector<int> s0,
                           std::vector<int> s1, v1::MigrationState state,
                           uint32_t last_moved_slot) {
  v1::ClusterMap m = OneShardMap(nodes, s0, {});
  m.mutable_shards(0)->mutable_slots(0)->set_end(8191);
  v1::Shard* t = m.add_shards();
  t->set_shard_id(1);
  t->set_shard_epoch(1);
  t->add_slots()->set_start(8192);
  t->mutable_slots(0)->set_end(cluster::kSlotCount - 1);
  for (int i : s1) t->add_replicas(nodes[i]->id());
  m.set_next_migration_id(2);
  if (state != v1::MIGRATION_STATE_UNSPECIFIED) {
    v1::Migration* mig = m.add_migrations();
    mig->set_id(1);
    mig->mutable_slots()->set_start(0);
    mig->mutable_slots()->set_end(last_moved_slot);
    mig->set_source_shard(0);
    mig->set_target_shard(1);
    mig->set_state(state);
  }
  return m;
}

}  // namespace testing
}  // namespace server
}  // namespace kvstore
