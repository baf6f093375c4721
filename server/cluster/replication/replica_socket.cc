// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/replica_socket.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "glog/logging.h"
#include "server/cluster/peer/peer_socket.h"
#include "server/storage/batch_prefetch.h"

namespace kvstore {
namespace server {

v1::ReplicateBatchReply ApplyReplicateBatch(
    const ReplicateBatchView& batch, absl::Time arrived,
    absl::FunctionRef<absl::Status(const ReplicateWrite&, absl::Time deadline)> install,
    const KvStore* store) {
  v1::ReplicateBatchReply reply;
  const size_t n = batch.writes.size();
  // Two ahead the buckets, one ahead the entries they name.
  BatchPrefetch prefetch(
      store, n, [&batch](size_t i) { return absl::string_view(batch.writes[i].commit.key); });
  for (size_t i = 0; i < n; ++i) {
    prefetch.Before(i);
    // With the hint's hash, which the install's index update then need not
    // compute again.
    ReplicateWrite write = batch.writes[i];
    write.key_hash = prefetch.HashOf(i);
    const absl::Time deadline = i < batch.timeout_micros.size()
                                    ? arrived + absl::Microseconds(batch.timeout_micros[i])
                                    : absl::InfiniteFuture();
    reply.set_last_seq(std::max(reply.last_seq(), write.commit.seq));
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
    ReplicateBatchView batch;  // reused: its vectors keep their room
    std::string out;
    for (;;) {
      // The socket blocks (peer_listener.h): the read waits for the next
      // batch, however long the primary is idle. The frame stays in the
      // reader's buffer until the next read, after the batch is applied.
      absl::StatusOr<absl::string_view> frame = NextFrame(fd, reader, absl::InfiniteFuture());
      absl::Status s = frame.ok() ? ParseReplicateBatch(*frame, &batch) : frame.status();
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
