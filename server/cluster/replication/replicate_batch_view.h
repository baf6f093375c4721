// Copyright 2026 The kvstore Authors.
//
// ReplicateBatchView: a ReplicateBatch (proto/kv_cluster.proto) read in
// place. Each write's key, entry and primary id are views into the bytes it
// was parsed from (a peer socket frame, or a parsed message's strings),
// nothing is copied.
//
// Why: the backup used to parse each batch into a v1::ReplicateBatch, which
// copied every 4 KiB entry into a string of its own (and allocated one per
// write) before the install copied it again into the pool. Measured at R=2
// with 4 KiB SETs pipelined: a third of a backup's connection thread was
// memmove. Reading the frame in place leaves the one copy into the pool.
//
// The wire format is protobuf's, so a batch sent by any encoder of the
// message parses here as protobuf parses it: the last occurrence of a
// scalar or bytes field wins, unknown fields of any wire type but the
// obsolete groups are skipped, timeout_micros is read packed or not, and
// an out-of-range varint truncates as protobuf truncates it. Unlike
// protobuf, a primary_node_id that is not UTF-8 is not refused here (node
// ids are checked against the map by the installer, and never match).
//
// Errors: ParseReplicateBatch() returns kDataLoss, naming the offset, for
// bytes that are not a ReplicateBatch (a truncated field, a length past the
// end, a varint over ten bytes, a group); `out` is then unspecified.
//
// Thread safety: plain values; the views live as long as their bytes.

#ifndef KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICATE_BATCH_VIEW_H_
#define KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICATE_BATCH_VIEW_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/protocol/layout.h"
#include "proto/kv_cluster.pb.h"
#include "server/rdma/replica_commit_sink.h"

namespace kvstore {
namespace server {

// One write of a batch. `commit` has the request's fields (is_delete set
// for REPLICA_OP_DELETE); `op` is the op as sent, so an unknown one can be
// refused.
struct ReplicateWrite {
  ReplicaCommit commit;
  int32_t op = 0;  // v1::ReplicaOp
  bool resent_after_rdma = false;
  // The index hash of commit.key when the receiver has it already (the
  // batch's cache hints: ApplyReplicateBatch), else null; valid for the
  // install call. Never on the wire.
  const layout::KeyHash* key_hash = nullptr;
  absl::string_view entry() const { return commit.entry; }
};

struct ReplicateBatchView {
  std::vector<ReplicateWrite> writes;
  std::vector<int64_t> timeout_micros;
  void Clear() {
    writes.clear();
    timeout_micros.clear();
  }
};

// Parses the wire bytes of a ReplicateBatch into `out` (cleared first; its
// vectors keep their capacity, so a reused view allocates nothing once
// grown). The views point into `bytes`.
absl::Status ParseReplicateBatch(absl::string_view bytes, ReplicateBatchView* out);

// The same views of a parsed message; they point into `req`'s strings.
ReplicateWrite ViewOf(const v1::ReplicateRequest& req);
void ViewOf(const v1::ReplicateBatch& batch, ReplicateBatchView* out);
// A message holding a copy of `write` (for what must outlive its bytes).
v1::ReplicateRequest RequestOf(const ReplicateWrite& write);
// The same into `req`, a cleared message: its strings' room is reused
// (assign(), which protobuf's set_*(data, size) would not do).
void CopyInto(const ReplicateWrite& write, v1::ReplicateRequest* req);

// The other direction, for the primary: appends `write` to `out` as one
// element of ReplicateBatch.writes (field 1) in protobuf's wire format, as
// SerializeToString of a batch holding it would (fields in number order,
// zero values left out), so a batch is built by appending its writes and
// then its times (AppendTimeouts) to a buffer that keeps its room: each
// entry is copied once, straight into the frame.
void AppendReplicateWrite(const ReplicateWrite& write, std::string* out);
// Appends ReplicateBatch.timeout_micros (field 2, packed); nothing when
// `micros` is empty.
void AppendTimeouts(const std::vector<int64_t>& micros, std::string* out);

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICATE_BATCH_VIEW_H_
