// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/socket_replication_stream.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "server/cluster/peer/peer_client.h"

namespace kvstore {
namespace server {

SocketReplicationStream::SocketReplicationStream(const v1::ClusterNode& node,
                                                 ReplicationStreamMetrics* metrics,
                                                 SocketReplicationStreamOptions options,
                                                 const KvStore* store)
    : ReplicationStream(node, metrics, /*ready=*/false, store), options_(std::move(options)) {
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = std::thread([this] { Run(); });
}

SocketReplicationStream::~SocketReplicationStream() {
  Break(absl::UnavailableError("the stream was closed"));
  thread_.join();
  if (fd_ >= 0) close(fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

void SocketReplicationStream::Cancel() {
  cancelled_ = true;
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void SocketReplicationStream::Run() {
  if (wake_fd_ < 0) {
    Break(absl::UnavailableError(absl::StrCat("eventfd: ", strerror(errno))));
    return;
  }
  if (absl::Status s = Connect(); !s.ok()) {
    Break(s);
    return;
  }
  Ready();
  Poll();
}

absl::Status SocketReplicationStream::Connect() {
  const absl::Time deadline = absl::Now() + options_.connect_timeout;
  absl::StatusOr<int> fd = ConnectTo(node().replication_address(), deadline, wake_fd_);
  if (!fd.ok()) return fd.status();
  fd_ = *fd;
  v1::PeerSocketHello hello;
  hello.set_secret(options_.secret);
  hello.set_node_id(options_.self);
  hello.set_purpose(std::string(kReplicatePurpose));
  std::string out;
  AppendFrame(hello, &out);
  absl::Status s = SendAll(fd_, out, deadline, wake_fd_);
  v1::PeerSocketWelcome welcome;
  if (s.ok()) s = ReadFrame(fd_, reader_, &welcome, deadline, wake_fd_);
  if (s.ok()) s = StatusFromBytes(welcome.status());
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("replication socket ", node().replication_address(),
                                               ": ", s.message()));
  }
  return absl::OkStatus();
}

SocketReplicationStream::SendResult SocketReplicationStream::SendPendingLocked() {
  while (out_sent_ < out_.size()) {
    const ssize_t n =
        send(fd_, out_.data() + out_sent_, out_.size() - out_sent_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      out_sent_ += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return SendResult::kBlocked;
    } else {
      return SendResult::kError;
    }
  }
  return SendResult::kDone;
}

void SocketReplicationStream::StartBatch(const v1::ReplicateBatch* batch) {
  SendResult r;
  {
    absl::MutexLock lock(&out_mu_);
    out_.clear();
    out_sent_ = 0;
    AppendFrame(*batch, &out_);
    r = SendPendingLocked();
    out_blocked_ = r == SendResult::kBlocked;
  }
  if (r == SendResult::kBlocked) {
    // The thread waits for room and finishes the frame.
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  } else {
    WriteDone(r == SendResult::kDone);
  }
}

void SocketReplicationStream::Poll() {
  for (;;) {
    bool want_out;
    {
      absl::MutexLock lock(&out_mu_);
      want_out = out_blocked_;
    }
    pollfd p[2] = {{fd_, static_cast<short>(POLLIN | (want_out ? POLLOUT : 0)), 0},
                   {wake_fd_, POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      Break(absl::UnavailableError(absl::StrCat("poll: ", strerror(errno))));
      return;
    }
    if ((p[1].revents & POLLIN) != 0) {
      uint64_t n;
      (void)!read(wake_fd_, &n, sizeof(n));
    }
    if (cancelled_) return;
    if ((p[0].revents & POLLOUT) != 0) {
      SendResult r = SendResult::kBlocked;
      {
        absl::MutexLock lock(&out_mu_);
        if (out_blocked_) {
          r = SendPendingLocked();
          out_blocked_ = r == SendResult::kBlocked;
        }
      }
      if (r != SendResult::kBlocked) WriteDone(r == SendResult::kDone);
    }
    if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !ReadReplies()) return;
  }
}

bool SocketReplicationStream::ReadReplies() {
  const ssize_t n = reader_.Receive(fd_);
  if (n == 0) {
    Break(absl::UnavailableError("the backup closed the replication socket"));
    return false;
  }
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
    Break(absl::UnavailableError(absl::StrCat("replication socket recv: ", strerror(errno))));
    return false;
  }
  for (;;) {
    absl::StatusOr<std::optional<absl::string_view>> frame = reader_.Next();
    if (!frame.ok()) {
      Break(frame.status());
      return false;
    }
    if (!frame->has_value()) return true;
    if (!reply_.ParseFromArray((*frame)->data(), static_cast<int>((*frame)->size()))) {
      Break(absl::DataLossError("a replication reply that does not parse"));
      return false;
    }
    if (!ReplyArrived(reply_)) return false;
  }
}

}  // namespace server
}  // namespace kvstore
