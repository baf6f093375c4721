// Copyright 2026 The kvstore Authors.
//
// SocketReplicationStream: a replication stream (replication_stream.h) on
// the backup's peer socket (server/cluster/peer/peer_socket.h), the plain
// TCP connection its --replication_port serves. One frame per batch each
// way: ReplicateBatch out, ReplicateBatchReply back.
//
// Why: on gRPC every batch cost HTTP/2 framing and hand-offs between gRPC's
// threads on both nodes; here a batch costs one send() by the thread that
// took the queue, and its reply one wake-up of this stream's thread (and,
// on the backup, one of the connection's thread: replica_socket.h).
//
// How: a thread of the stream's own connects (to the node's
// replication_address, within connect_timeout), says hello with the
// cluster secret and reads the welcome; until then writes queue. Then it
// polls the socket: replies are read and handed to ReplyArrived(), which
// starts the next batch on this thread when writes queued meanwhile. A
// batch is sent by whoever takes the queue, without blocking: what the
// socket does not take at once is left to the thread, which finishes it
// when the socket has room (and then reports WriteDone()).
//
// Failure: a refused hello (wrong secret: the listener's reason is kept), a
// connection that fails or closes, or a reply that does not parse breaks
// the stream as the base class describes; Cancel() (from Break(): a
// deadline, a broken peer, the destructor) wakes the thread, which ends.
//
// Thread safety: as ReplicationStream. The destructor breaks the stream
// and joins the thread; the socket is closed only then, so no writer ever
// sends on a descriptor the thread has closed.

#ifndef KVSTORE_SERVER_CLUSTER_REPLICATION_SOCKET_REPLICATION_STREAM_H_
#define KVSTORE_SERVER_CLUSTER_REPLICATION_SOCKET_REPLICATION_STREAM_H_

#include <atomic>
#include <cstddef>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/kv_cluster.pb.h"
#include "server/cluster/peer/peer_socket.h"
#include "server/cluster/replication/replication_stream.h"

namespace kvstore {
namespace server {

struct SocketReplicationStreamOptions {
  std::string secret;  // the cluster secret the hello shows
  std::string self;    // this node's id, for the backup's log
  // Connecting and the hello together; writes queued meanwhile fail at
  // their own deadlines first (the replicator's), which break the stream.
  absl::Duration connect_timeout = absl::Seconds(10);
};

class SocketReplicationStream final : public ReplicationStream {
 public:
  // Starts connecting to `node`'s replication_address. `metrics` is not
  // owned and must outlive the stream.
  SocketReplicationStream(const v1::ClusterNode& node, ReplicationStreamMetrics* metrics,
                          SocketReplicationStreamOptions options, const KvStore* store = nullptr);
  // Breaks the stream, joins the thread, closes the socket.
  ~SocketReplicationStream() override;

 private:
  enum class SendResult { kDone, kBlocked, kError };
  void StartBatch(const v1::ReplicateBatch* batch) override;
  void Cancel() override;
  // The thread: connect, hello, then Poll() until broken.
  void Run();
  // Connects and says hello; the refusal or error otherwise.
  absl::Status Connect();
  void Poll();
  // Reads what the socket has and hands every whole reply on. Returns
  // false once the stream broke.
  bool ReadReplies();
  // Sends what is left of out_ without blocking.
  SendResult SendPendingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(out_mu_);

  const SocketReplicationStreamOptions options_;
  int wake_fd_ = -1;  // eventfd: Cancel(), or output left to finish
  int fd_ = -1;       // set by the thread before Ready(); closed by ~
  std::atomic<bool> cancelled_{false};
  absl::Mutex out_mu_;
  std::string out_ ABSL_GUARDED_BY(out_mu_);  // the frame of the batch being written
  size_t out_sent_ ABSL_GUARDED_BY(out_mu_) = 0;
  // The socket had no room for all of out_: the thread finishes it.
  bool out_blocked_ ABSL_GUARDED_BY(out_mu_) = false;
  FrameReader reader_;             // the thread's
  v1::ReplicateBatchReply reply_;  // the thread's
  std::thread thread_;             // last: started once the rest exists
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_REPLICATION_SOCKET_REPLICATION_STREAM_H_
