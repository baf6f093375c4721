// Copyright 2026 The kvstore Authors.
//
// Fuzzes the path a cluster map takes from etcd into a server's routing: the
// value of /kvstore/<cluster>/map (or of a watch event on it) as JSON →
// etcd_keys::DecodeMap → ClusterMapView::Build, which every server, the
// controller and the client library route through; and a member key's value
// → etcd_keys::DecodeNode. Whoever can write etcd's keys controls these
// bytes (docs/security.md §5.4), and a bad map must be refused, never crash
// a node or leave it with a view that breaks its own promises.
//
// Besides crashes it checks what Build() promises of a map it accepts:
// every slot has exactly the shard whose ranges hold it, shard ids and node
// ids resolve to themselves, a shard's primary is its first replica, the
// running migration is COPYING or HANDOFF and covers only its source's
// slots, and the map survives the JSON round trip an edit makes
// (EncodeMap → DecodeMap → Build, same epoch and slot owners).
//
// Input: byte 0 picks the form (even: JSON map, 1 mod 4: JSON node, 3 mod
// 4: binary ClusterMap as GetClusterMap carries it); the rest is the value.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/cluster/cluster_map.h"
#include "common/cluster/slots.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/kv_cluster.pb.h"
#include "server/cluster/membership/etcd_keys.h"
#include "tests/fuzz/fuzz_input.h"

namespace kvstore {
namespace {

namespace pb = ::kvstore::v1;
using cluster::ClusterMapView;

bool InRanges(const pb::Shard& shard, uint32_t slot) {
  for (const pb::SlotRange& r : shard.slots()) {
    if (r.start() <= slot && slot <= r.end()) return true;
  }
  return false;
}

bool Contains(const std::vector<const pb::Shard*>& shards, const pb::Shard* s) {
  for (const pb::Shard* x : shards) {
    if (x == s) return true;
  }
  return false;
}

void CheckView(const ClusterMapView& view) {
  const pb::ClusterMap& map = view.proto();
  uint64_t owned = 0;
  for (const pb::Shard& shard : map.shards()) {
    KV_FUZZ_CHECK(view.ShardById(shard.shard_id()) == &shard);
    owned += cluster::SlotCountOf(shard);
    (void)cluster::FormatSlotRanges(shard);
    const pb::ClusterNode* primary = view.Primary(shard);
    if (shard.replicas_size() == 0) {
      KV_FUZZ_CHECK(primary == nullptr);
    } else {
      KV_FUZZ_CHECK(primary != nullptr && primary->node_id() == shard.replicas(0));
      KV_FUZZ_CHECK(Contains(view.ShardsLedBy(shard.replicas(0)), &shard));
    }
    for (int i = 1; i < shard.replicas_size(); ++i) {
      KV_FUZZ_CHECK(view.Node(shard.replicas(i)) != nullptr);
      KV_FUZZ_CHECK(Contains(view.ShardsBackedBy(shard.replicas(i)), &shard));
    }
    for (const std::string& n : shard.syncing()) {
      KV_FUZZ_CHECK(view.Node(n) != nullptr);
      KV_FUZZ_CHECK(Contains(view.ShardsSyncingOn(n), &shard));
    }
  }
  // Every slot in exactly one shard: the ranges add up to the slot count
  // and each slot's shard holds it.
  KV_FUZZ_CHECK(owned == cluster::kSlotCount);
  for (uint32_t slot = 0; slot < cluster::kSlotCount; ++slot) {
    const pb::Shard* s = view.ShardForSlot(slot);
    KV_FUZZ_CHECK(s != nullptr && InRanges(*s, slot));
    const pb::Migration* m = view.ActiveMigrationForSlot(slot);
    if (m == nullptr) continue;
    KV_FUZZ_CHECK(m->state() == pb::MIGRATION_COPYING || m->state() == pb::MIGRATION_HANDOFF);
    KV_FUZZ_CHECK(m->slots().start() <= slot && slot <= m->slots().end());
    KV_FUZZ_CHECK(s->shard_id() == m->source_shard());
    KV_FUZZ_CHECK(view.MigrationById(m->id()) == m);
  }
  for (const pb::ClusterNode& n : map.nodes()) {
    const pb::ClusterNode* got = view.Node(n.node_id());
    KV_FUZZ_CHECK(got != nullptr && got->node_id() == n.node_id());
  }
  (void)view.ShardForKey("fuzz");
  // What an edit does: write the map back as JSON and read it again.
  auto again = server::etcd_keys::DecodeMap(server::etcd_keys::EncodeMap(map));
  KV_FUZZ_CHECK(again.ok());
  auto rebuilt = ClusterMapView::Build(*again);
  KV_FUZZ_CHECK(rebuilt.ok());
  KV_FUZZ_CHECK((*rebuilt)->epoch() == view.epoch());
  for (uint32_t slot = 0; slot < cluster::kSlotCount; slot += 97) {
    KV_FUZZ_CHECK((*rebuilt)->ShardForSlot(slot)->shard_id() ==
                  view.ShardForSlot(slot)->shard_id());
  }
}

void CheckMap(pb::ClusterMap map) {
  auto view = ClusterMapView::Build(std::move(map));
  if (view.ok()) CheckView(**view);
}

}  // namespace
}  // namespace kvstore

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Protobuf logs (and may abort on) nothing here, but keep its logging out
  // of the fuzzer's output.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  namespace pb = ::kvstore::v1;
  kvstore::fuzz::FuzzInput in(data, size);
  const uint8_t form = in.Int<uint8_t>();
  const absl::string_view value = in.Rest();
  if (form % 2 == 0) {
    auto map = kvstore::server::etcd_keys::DecodeMap(value);
    if (map.ok()) kvstore::CheckMap(*std::move(map));
  } else if (form % 4 == 1) {
    auto node = kvstore::server::etcd_keys::DecodeNode(value);
    if (node.ok()) {
      auto again =
          kvstore::server::etcd_keys::DecodeNode(kvstore::server::etcd_keys::EncodeNode(*node));
      KV_FUZZ_CHECK(again.ok() && again->node_id() == node->node_id());
    }
  } else {
    pb::ClusterMap map;
    if (map.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
      kvstore::CheckMap(std::move(map));
    }
  }
  return 0;
}
