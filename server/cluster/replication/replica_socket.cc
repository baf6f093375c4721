// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/replica_socket.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "glog/logging.h"
#include "server/cluster/peer/peer_socket.h"

namespace kvstore {
namespace server {

v1::ReplicateBatchReply ApplyReplicateBatch(
    const v1::ReplicateBatch& batch, absl::Time arrived,
    absl::FunctionRef<absl::Status(const v1::ReplicateRequest&, absl::Time deadline)> install,
    const KvStore* store) {
  v1::ReplicateBatchReply reply;
  const int n = batch.writes_size();
  if (store != nullptr && n > 1) store->Prefetch(batch.writes(0).key(), /*entries=*/false);
  for (int i = 0; i < n; ++i) {
    const v1::ReplicateRequest& write = batch.writes(i);
    if (store != nullptr && n > 1) {
      // Two ahead the buckets, one ahead the entries they name.
      if (i + 2 < n) store->Prefetch(batch.writes(i + 2).key(), /*entries=*/false);
      if (i + 1 < n) store->Prefetch(batch.writes(i + 1).key(), /*entries=*/true);
    }
    const absl::Time deadline = i < batch.timeout_micros_size()
                                    ? arrived + absl::Microseconds(batch.timeout_micros(i))
                                    : absl::InfiniteFuture();
    reply.set_last_seq(std::max(reply.last_seq(), write.seq()));
    absl::Status s = install(write, deadline);
    if (s.ok()) continue;
    v1::ReplicateFailure* failed = reply.add_failed();
    failed->set_index(static_cast<uint32_t>(i));
    failed->set_status(StatusToBytes(s));
  }
  return reply;
}

PeerListener::Handler ReplicaSocketHandler(BatchApplier apply) {
  return [apply = std::move(apply)](int fd, FrameReader& reader, const std::string& peer) {
    v1::ReplicateBatch batch;
    std::string out;
    for (;;) {
      // The socket blocks (peer_listener.h): the read waits for the next
      // batch, however long the primary is idle.
      absl::Status s = ReadFrame(fd, reader, &batch, absl::InfiniteFuture());
      if (!s.ok()) {
        if (s.code() != absl::StatusCode::kUnavailable) {
          LOG_EVERY_N(WARNING, 100) << "replication socket from " << peer << ": " << s;
        }
        return;
      }
      // Each write's time left counts from the batch's arrival.
      const v1::ReplicateBatchReply reply = apply(batch, absl::Now());
      out.clear();
      AppendFrame(reply, &out);
      if (!SendAll(fd, out, absl::InfiniteFuture()).ok()) return;
    }
  };
}

}  // namespace server
}  // namespace kvstore
