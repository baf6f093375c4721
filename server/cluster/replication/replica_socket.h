// Copyright 2026 The kvstore Authors.
//
// The backup's end of a replication stream, whichever transport carries
// it: ApplyReplicateBatch() installs one ReplicateBatch and builds its
// reply (the gRPC ReplicateStream handler and the peer socket both call
// it), and ReplicaSocketHandler() serves a peer socket connection
// (server/cluster/peer/peer_listener.h, purpose "replicate"): it reads each
// ReplicateBatch frame in place (replicate_batch_view.h: the writes'
// entries are not copied out of the frame), applies it, and answers one
// ReplicateBatchReply frame per batch, on the connection's own thread, in
// order.
//
// Errors: a frame that does not parse or is too long ends the connection
// (logged; the primary's stream breaks and it opens a new one). The peer's
// close or the listener's Stop() end it quietly. A write's refusal is no
// error of the stream: the reply names it.
//
// Thread safety: the handler runs on the listener's connection threads;
// what `apply` calls must be thread-safe and outlive the listener.

#ifndef KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICA_SOCKET_H_
#define KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICA_SOCKET_H_

#include <functional>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/kv_cluster.pb.h"
#include "server/cluster/peer/peer_listener.h"
#include "server/cluster/replication/replicate_batch_view.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

// Installs `batch`'s writes in order with `install` (a Replicate call's
// checks and install), each with the deadline `arrived` plus its time left
// (ReplicateBatch::timeout_micros; none: no deadline). The reply names the
// batch's last seq and each refusal by the write's index. `store`, when
// not null, is given cache hints for the keys of the writes ahead (as the
// RESP loop's pipeline lookahead does): each install looks its key up in
// the index, and cold, those lookups were a tenth of a backup's CPU.
v1::ReplicateBatchReply ApplyReplicateBatch(
    const ReplicateBatchView& batch, absl::Time arrived,
    absl::FunctionRef<absl::Status(const ReplicateWrite&, absl::Time deadline)> install,
    const KvStore* store = nullptr);

// Serves replication streams on peer sockets: each batch that arrives goes
// to `apply` (with its arrival time; its views valid for the call), whose
// reply goes back.
using BatchApplier =
    std::function<v1::ReplicateBatchReply(const ReplicateBatchView& batch, absl::Time arrived)>;
PeerListener::Handler ReplicaSocketHandler(BatchApplier apply);

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICA_SOCKET_H_
