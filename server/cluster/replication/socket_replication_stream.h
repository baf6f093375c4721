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
// Reading on an event loop (WatchRepliesWith): once connected, the thread
// lends the socket to a watcher (net/fd_watch.h: the RESP server's loops)
// and stops reading it; the loop reads the replies and completes the
// tickets beside its connections. Under load the loop is awake anyway, so a
// batch's reply costs no wake-up of its own; the thread then only finishes
// blocked sends and waits for Cancel(). A loop that stops hands the socket
// back (OnUnwatched) and the thread reads again. An event loop that waits
// for its ticket (Wait(): the synchronous writes, which a RESP loop also
// runs) reads the replies itself meanwhile, so a loop waiting for a reply
// that only it (or another waiting loop) would read does not wait in vain.
//
// Failure: a refused hello (wrong secret: the listener's reason is kept), a
// connection that fails or closes, or a reply that does not parse breaks
// the stream as the base class describes; Cancel() (from Break(): a
// deadline, a broken peer, the destructor) wakes the thread, which ends.
//
// Thread safety: as ReplicationStream. The destructor breaks the stream
// and joins the thread; the socket is closed only once the stream is gone
// and no loop watches it (both hold it), so no writer or loop ever uses a
// descriptor closed (and perhaps reused) under it.

#ifndef KVSTORE_SERVER_CLUSTER_REPLICATION_SOCKET_REPLICATION_STREAM_H_
#define KVSTORE_SERVER_CLUSTER_REPLICATION_SOCKET_REPLICATION_STREAM_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/kv_cluster.pb.h"
#include "server/cluster/peer/peer_socket.h"
#include "server/cluster/replication/replication_stream.h"
#include "server/net/fd_watch.h"

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

  // Once connected, the replies are read by `watcher`'s loop instead of
  // the stream's thread (see the file comment); a watcher that refuses
  // (Watch() false) leaves them to the thread. Call at most once, on a
  // stream owned by a shared_ptr (the loop holds it weakly). Any thread.
  void WatchRepliesWith(std::shared_ptr<net::FdWatcher> watcher);

 private:
  enum class SendResult { kDone, kBlocked, kError };
  class ReplyWatch;    // the socket as a loop watches it
  struct OwnedSocket;  // closes the descriptor when the last holder goes
  void StartFrame(const std::string* frame) override;
  void Cancel() override;
  // On an event loop's thread while the socket is lent, reads replies
  // (whoever else reads them too: read_mu_ decides) until `ticket` is
  // done; elsewhere, waits.
  bool AwaitTicket(Ticket& ticket, absl::Time deadline) override;
  // The thread: connect, hello, then Poll() until broken.
  void Run();
  // Connects and says hello; the refusal or error otherwise.
  absl::Status Connect();
  void Poll();
  // Reads what the socket has and hands every whole reply on. Returns
  // false once the stream broke. On the thread, the loop watching or a
  // waiting writer.
  bool ReadReplies() ABSL_EXCLUSIVE_LOCKS_REQUIRED(read_mu_);
  // Lends the socket to watcher_ if it has one and the socket is not lent
  // yet; the thread's, before each poll.
  void MaybeLendSocket();
  // The loop gave the socket back: the thread reads again.
  void Unwatched();
  // Sends what is left of *out_ without blocking.
  SendResult SendPendingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(out_mu_);

  const SocketReplicationStreamOptions options_;
  int wake_fd_ = -1;                     // eventfd: Cancel(), or output left to finish
  std::atomic<int> fd_{-1};              // set by the thread before Ready()
  std::shared_ptr<OwnedSocket> socket_;  // fd_'s owner, shared with a watch
  std::atomic<bool> cancelled_{false};
  absl::Mutex watch_mu_;
  std::shared_ptr<net::FdWatcher> watcher_ ABSL_GUARDED_BY(watch_mu_);
  std::weak_ptr<SocketReplicationStream> self_ ABSL_GUARDED_BY(watch_mu_);
  // A loop reads the replies (the thread does not).
  bool lent_ ABSL_GUARDED_BY(watch_mu_) = false;
  // The thread is past the hello: a wake-up no longer cancels a connect.
  bool connected_ ABSL_GUARDED_BY(watch_mu_) = false;
  absl::Mutex out_mu_;
  // The frame being written: the stream's (BatchForm::kFrame), untouched
  // until WriteDone(); null when none is.
  const std::string* out_ ABSL_GUARDED_BY(out_mu_) = nullptr;
  size_t out_sent_ ABSL_GUARDED_BY(out_mu_) = 0;
  // The socket had no room for all of out_: the thread finishes it.
  bool out_blocked_ ABSL_GUARDED_BY(out_mu_) = false;
  // Whoever reads the replies holds read_mu_: the thread, or while lent_
  // the watching loop or a writer in AwaitTicket() (each only tries it).
  absl::Mutex read_mu_;
  FrameReader reader_ ABSL_GUARDED_BY(read_mu_);
  v1::ReplicateBatchReply reply_ ABSL_GUARDED_BY(read_mu_);
  std::thread thread_;  // last: started once the rest exists
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_REPLICATION_SOCKET_REPLICATION_STREAM_H_
