// Copyright 2026 The kvstore Authors.
//
// Fuzzes the backup's in-place reader of replication batches
// (server/cluster/replication/replicate_batch_view.h): the bytes of a peer
// socket frame, from a primary that showed the cluster secret but is still
// a peer to distrust.
//
// Checks, besides "no crash, no sanitizer report":
//   * every view of an accepted batch lies inside the input;
//   * when protobuf also parses the input as a ReplicateBatch, both read
//     the same writes and times (the reader claims protobuf's semantics);
//   * an accepted batch copied back into a message (RequestOf) and
//     serialized parses in place to the same fields again.

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "proto/kv_cluster.pb.h"
#include "server/cluster/replication/replicate_batch_view.h"
#include "tests/fuzz/fuzz_input.h"

namespace kvstore {
namespace {

using server::ReplicateBatchView;
using server::ReplicateWrite;

bool SameWrite(const ReplicateWrite& a, const ReplicateWrite& b) {
  return a.commit.shard_id == b.commit.shard_id && a.commit.shard_epoch == b.commit.shard_epoch &&
         a.commit.seq == b.commit.seq && a.op == b.op && a.commit.is_delete == b.commit.is_delete &&
         a.commit.key == b.commit.key && a.commit.entry == b.commit.entry &&
         a.commit.primary_node_id == b.commit.primary_node_id &&
         a.commit.primary_incarnation == b.commit.primary_incarnation &&
         a.resent_after_rdma == b.resent_after_rdma;
}

bool SameBatch(const ReplicateBatchView& a, const ReplicateBatchView& b) {
  if (a.writes.size() != b.writes.size() || a.timeout_micros != b.timeout_micros) return false;
  for (size_t i = 0; i < a.writes.size(); ++i) {
    if (!SameWrite(a.writes[i], b.writes[i])) return false;
  }
  return true;
}

}  // namespace
}  // namespace kvstore

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvstore;  // NOLINT: the fuzzer entry point is global
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  server::ReplicateBatchView view;
  if (!server::ParseReplicateBatch(bytes, &view).ok()) return 0;
  auto inside = [&](absl::string_view v) {
    return v.empty() || (v.data() >= bytes.data() && v.data() + v.size() <= bytes.data() + size);
  };
  for (const server::ReplicateWrite& w : view.writes) {
    KV_FUZZ_CHECK(inside(w.commit.key) && inside(w.commit.entry) &&
                  inside(w.commit.primary_node_id));
  }
  v1::ReplicateBatch parsed;
  if (parsed.ParseFromArray(data, static_cast<int>(size))) {
    server::ReplicateBatchView from_message;
    server::ViewOf(parsed, &from_message);
    KV_FUZZ_CHECK(SameBatch(view, from_message));
  }
  v1::ReplicateBatch copied;
  for (const server::ReplicateWrite& w : view.writes) *copied.add_writes() = server::RequestOf(w);
  copied.mutable_timeout_micros()->Add(view.timeout_micros.begin(), view.timeout_micros.end());
  const std::string again = copied.SerializeAsString();
  server::ReplicateBatchView reread;
  KV_FUZZ_CHECK(server::ParseReplicateBatch(again, &reread).ok() && SameBatch(view, reread));
  return 0;
}
