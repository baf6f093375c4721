// Copyright 2026 The kvstore Authors.
//
// Fuzzes the KvCluster RPCs a node answers for its peers (the backup's and
// the migration target's side of replication: Replicate, ReplicaStatus,
// ShardDigest, ReconcileSlots, ReportInSync, ImportWrite, BeginImport,
// ImportEntries, AcceptHandoff, GetClusterMap). Anyone holding the cluster's
// token can send them, so a request that does not fit the map must be
// refused with an error: never a crash, a hang, or a change to data the
// sender has no right to.
//
// The node under test is the replication fixture's (server/cluster/
// replication/replication_test_util.h): a real KvStore, ReplicaInstaller,
// SlotImporter and ClusterService on a real gRPC server on 127.0.0.1, with
// a second node as its peer, both on the fake map store. The map: shard 0
// (slots 0-8191) led by the peer with the node under test as its backup,
// shard 1 (8192-16383) led by the node under test, and migration 1 copying
// slots 0-100 from shard 0 to shard 1. Requests go through a real stub
// with a deadline, so a handler that waits forever shows up as a timeout.
//
// The one thing no request may do: change a key of shard 1, which this node
// leads (only its own writes may). A sentinel there is checked after every
// input.
//
// Input: byte 0 picks the RPC, byte 1 which fields are set to the map's
// real values (shard, epochs, sender, incarnation: so that requests get
// past the first checks), byte 2 whether a PUT's entry is replaced by a
// well-formed entry of the request's key; the rest is the serialized
// request.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/cluster/slots.h"
#include "common/protocol/layout.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/grpcpp.h"
#include "proto/kv_cluster.grpc.pb.h"
#include "server/cluster/replication/replication_test_util.h"
#include "tests/fuzz/fuzz_input.h"

namespace kvstore {
namespace {

namespace pb = ::kvstore::v1;
using server::testing::FakeMapStore;
using server::testing::Node;
using server::testing::NodeOptions;

constexpr char kSentinelValue[] = "only-my-own-writes";

// The two nodes and what a well-formed request needs to know of the map.
struct World {
  FakeMapStore maps;
  std::unique_ptr<Node> self;  // the node under test
  std::unique_ptr<Node> peer;  // primary of shard 0, source of migration 1
  std::unique_ptr<pb::KvCluster::Stub> stub;
  std::string sentinel;  // a key of shard 1
  uint64_t map_epoch = 0;
  uint64_t shard0_epoch = 0;
  uint64_t shard1_epoch = 0;
  uint64_t peer_incarnation = 0;
  uint64_t self_incarnation = 0;

  World() {
    NodeOptions o;
    o.replication_timeout = absl::Milliseconds(500);
    o.sync_thread = false;
    o.settle_idle = false;
    self = std::make_unique<Node>("self", &maps, o);
    peer = std::make_unique<Node>("peer", &maps, o);
    maps.Set(server::testing::TwoShardMap({self.get(), peer.get()}, {1, 0}, {0, 1},
                                          pb::MIGRATION_COPYING, 100));
    const pb::ClusterMap m = maps.Current();
    map_epoch = m.epoch();
    shard0_epoch = m.shards(0).shard_epoch();
    shard1_epoch = m.shards(1).shard_epoch();
    for (const pb::ClusterNode& n : m.nodes()) {
      if (n.node_id() == "peer") peer_incarnation = n.incarnation();
      if (n.node_id() == "self") self_incarnation = n.incarnation();
    }
    for (int i = 0;; ++i) {
      sentinel = absl::StrCat("sentinel-", i);
      const uint32_t slot = cluster::KeySlot(sentinel);
      if (slot >= 8192) break;
    }
    const absl::Status s = self->Put(sentinel, kSentinelValue);
    if (!s.ok()) {
      std::fprintf(stderr, "cluster_rpc_fuzzer: cannot write the sentinel: %s\n",
                   s.ToString().c_str());
      std::abort();
    }
    stub = self->NewStub();
  }
};

World& TheWorld() {
  static World* w = new World();  // lives for the process: no teardown races
  return *w;
}

template <typename M>
bool Parse(absl::string_view bytes, M* m) {
  return m->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

std::string WellFormedEntry(absl::string_view key) {
  if (key.empty()) key = "k";
  std::string e(layout::EntryBytes(key.size(), 5), '\0');
  layout::EncodeEntry(e.data(), key, "value", 1);
  return e;
}

// Sends `request` with `call`; the answer itself is not checked (an error is
// the expected answer to most inputs), only that there is one in time.
template <typename Req, typename Resp, typename Call>
void Send(const Req& request, Call call) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  Resp response;
  const grpc::Status s = call(&ctx, request, &response);
  KV_FUZZ_CHECK(s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED);
}

void Run(World& w, uint8_t which, uint8_t fix, bool good_entry, absl::string_view bytes) {
  pb::KvCluster::Stub& stub = *w.stub;
  // Which shard a fixed-up request names: shard 0 (we back it: accepted
  // when well-formed) or shard 1 (we lead it: always refused).
  const bool shard1 = (fix & 0x80) != 0;
  const uint32_t shard_id = shard1 ? 1 : 0;
  const uint64_t shard_epoch = shard1 ? w.shard1_epoch : w.shard0_epoch;
  switch (which % 10) {
    case 0: {
      pb::ReplicateRequest r;
      if (!Parse(bytes, &r)) return;
      if (fix & 1) r.set_shard_id(shard_id);
      if (fix & 2) r.set_shard_epoch(shard_epoch);
      if (fix & 4) r.set_primary_node_id("peer");
      if (fix & 8) r.set_primary_incarnation(w.peer_incarnation);
      if (good_entry) r.set_entry(WellFormedEntry(r.key()));
      Send<pb::ReplicateRequest, pb::ReplicateResponse>(
          r, [&](auto* c, auto& q, auto* a) { return stub.Replicate(c, q, a); });
      break;
    }
    case 1: {
      pb::ReplicaStatusRequest r;
      if (!Parse(bytes, &r)) return;
      Send<pb::ReplicaStatusRequest, pb::ReplicaStatusResponse>(
          r, [&](auto* c, auto& q, auto* a) { return stub.ReplicaStatus(c, q, a); });
      break;
    }
    case 2: {
      pb::ShardDigestRequest r;
      if (!Parse(bytes, &r)) return;
      if (fix & 1) r.set_shard_id(shard_id);
      if (fix & 2) r.set_shard_epoch(shard_epoch);
      if (fix & 4) r.set_primary_node_id("peer");
      if (fix & 8) r.set_primary_incarnation(w.peer_incarnation);
      Send<pb::ShardDigestRequest, pb::ShardDigestResponse>(
          r, [&](auto* c, auto& q, auto* a) { return stub.ShardDigest(c, q, a); });
      break;
    }
    case 3: {
      pb::ReconcileSlotsRequest r;
      if (!Parse(bytes, &r)) return;
      if (fix & 1) r.set_shard_id(shard_id);
      if (fix & 2) r.set_shard_epoch(shard_epoch);
      if (fix & 4) r.set_primary_node_id("peer");
      if (fix & 8) r.set_primary_incarnation(w.peer_incarnation);
      if (good_entry) {
        for (std::string& e : *r.mutable_entries()) e = WellFormedEntry(e);
      }
      Send<pb::ReconcileSlotsRequest, pb::ReconcileSlotsResponse>(
          r, [&](auto* c, auto& q, auto* a) { return stub.ReconcileSlots(c, q, a); });
      break;
    }
    case 4: {
      pb::ReportInSyncRequest r;
      if (!Parse(bytes, &r)) return;
      if (fix & 1) r.set_shard_id(shard_id);
      if (fix & 2) r.set_shard_epoch(shard_epoch);
      Send<pb::ReportInSyncRequest, pb::ReportInSyncResponse>(
          r, [&](auto* c, auto& q, auto* a) { return stub.ReportInSync(c, q, a); });
      break;
    }
    case 5: {
      pb::ImportWriteRequest r;
      if (!Parse(bytes, &r)) return;
      if (fix & 1) r.set_migration_id(1);
      if (fix & 2) r.set_map_epoch(w.map_epoch);
      if (fix & 4) r.set_source_node_id("peer");
      if (fix & 8) r.set_source_incarnation(w.peer_incarnation);
      if (good_entry) r.set_entry(WellFormedEntry(r.key()));
      Send<pb::ImportWriteRequest, pb::ImportWriteResponse>(
          r, [&](auto* c, auto& q, auto* a) { return stub.ImportWrite(c, q, a); });
      break;
    }
    case 6: {
      pb::BeginImportRequest r;
      if (!Parse(bytes, &r)) return;
      if (fix & 1) r.set_migration_id(1);
      if (fix & 2) r.set_map_epoch(w.map_epoch);
      if (fix & 4) r.set_source_node_id("peer");
      if (fix & 8) r.set_source_incarnation(w.peer_incarnation);
      Send<pb::BeginImportRequest, pb::BeginImportResponse>(
          r, [&](auto* c, auto& q, auto* a) { return stub.BeginImport(c, q, a); });
      break;
    }
    case 7: {
      pb::ImportEntriesRequest r;
      if (!Parse(bytes, &r)) return;
      if (fix & 1) r.set_migration_id(1);
      if (good_entry) {
        for (std::string& e : *r.mutable_entries()) e = WellFormedEntry(e);
      }
      Send<pb::ImportEntriesRequest, pb::ImportEntriesResponse>(
          r, [&](auto* c, auto& q, auto* a) { return stub.ImportEntries(c, q, a); });
      break;
    }
    case 8: {
      pb::AcceptHandoffRequest r;
      if (!Parse(bytes, &r)) return;
      if (fix & 1) r.set_migration_id(1);
      if (fix & 2) r.set_map_epoch(w.map_epoch);
      if (fix & 4) r.set_source_node_id("peer");
      if (fix & 8) r.set_source_incarnation(w.peer_incarnation);
      Send<pb::AcceptHandoffRequest, pb::AcceptHandoffResponse>(
          r, [&](auto* c, auto& q, auto* a) { return stub.AcceptHandoff(c, q, a); });
      break;
    }
    default: {
      pb::GetClusterMapRequest r;
      if (!Parse(bytes, &r)) return;
      Send<pb::GetClusterMapRequest, pb::GetClusterMapResponse>(
          r, [&](auto* c, auto& q, auto* a) { return stub.GetClusterMap(c, q, a); });
      break;
    }
  }
}

}  // namespace
}  // namespace kvstore

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  kvstore::World& w = kvstore::TheWorld();
  kvstore::fuzz::FuzzInput in(data, size);
  const uint8_t which = in.Int<uint8_t>();
  const uint8_t fix = in.Int<uint8_t>();
  const bool good_entry = (in.Int<uint8_t>() & 1) != 0;
  kvstore::Run(w, which, fix, good_entry, in.Rest());
  // Shard 1 is this node's own: no peer request may have changed it.
  KV_FUZZ_CHECK(w.self->Value(w.sentinel) == kvstore::kSentinelValue);
  return 0;
}
