// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/socket_replication_stream.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/sync/thread_name.h"
#include "server/cluster/peer/peer_client.h"

namespace kvstore {
namespace server {

struct SocketReplicationStream::OwnedSocket {
  explicit OwnedSocket(int f) : fd(f) {}
  ~OwnedSocket() { close(fd); }
  OwnedSocket(const OwnedSocket&) = delete;
  OwnedSocket& operator=(const OwnedSocket&) = delete;
  const int fd;
};

// Holds the socket open while the loop has it, and the stream only weakly:
// a stream dropped by its owners goes (its destructor cancels it, which
// shuts the socket down, so the loop hears of it and drops the watch).
class SocketReplicationStream::ReplyWatch final : public net::FdWatch {
 public:
  ReplyWatch(std::shared_ptr<OwnedSocket> socket, std::weak_ptr<SocketReplicationStream> stream)
      : socket_(std::move(socket)), stream_(std::move(stream)) {}
  int fd() const override { return socket_->fd; }
  bool OnReadable() override {
    // A strong hold for the call: completing a ticket may drop the
    // owners' last reference, and the stream must outlive its own read.
    std::shared_ptr<SocketReplicationStream> s = stream_.lock();
    if (s == nullptr || s->cancelled_) return false;
    // Held only by a writer reading in AwaitTicket(): it reads this too.
    if (!s->read_mu_.TryLock()) return true;
    const bool more = s->ReadReplies();
    s->read_mu_.Unlock();
    return more;
  }
  void OnUnwatched() override {
    if (std::shared_ptr<SocketReplicationStream> s = stream_.lock()) s->Unwatched();
  }

 private:
  const std::shared_ptr<OwnedSocket> socket_;
  const std::weak_ptr<SocketReplicationStream> stream_;
};

SocketReplicationStream::SocketReplicationStream(const v1::ClusterNode& node,
                                                 ReplicationStreamMetrics* metrics,
                                                 SocketReplicationStreamOptions options,
                                                 const KvStore* store)
    : ReplicationStream(node, metrics, /*ready=*/false, store, BatchForm::kFrame),
      options_(std::move(options)) {
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = std::thread([this] {
    NameThread("kv-repl-stream");
    Run();
  });
}

SocketReplicationStream::~SocketReplicationStream() {
  Break(absl::UnavailableError("the stream was closed"));
  thread_.join();
  socket_.reset();  // closed here unless a loop still holds its watch
  if (wake_fd_ >= 0) close(wake_fd_);
}

void SocketReplicationStream::Cancel() {
  cancelled_ = true;
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  // A loop watching the socket sees it end (EOF) and drops its watch. The
  // descriptor is still open: socket_ holds it until the destructor.
  const int fd = fd_.load();
  if (fd >= 0) shutdown(fd, SHUT_RDWR);
}

void SocketReplicationStream::WatchRepliesWith(std::shared_ptr<net::FdWatcher> watcher) {
  {
    absl::MutexLock lock(&watch_mu_);
    watcher_ = std::move(watcher);
    // The base's enable_shared_from_this: this object is a
    // SocketReplicationStream whenever it is owned at all.
    self_ = std::static_pointer_cast<SocketReplicationStream>(weak_from_this().lock());
    // Still connecting: the thread lends the socket once connected. Not
    // woken now: during the connect and hello, a wake-up means Cancel().
    if (!connected_) return;
  }
  const uint64_t one = 1;  // the polling thread lends the socket at once
  (void)!write(wake_fd_, &one, sizeof(one));
}

bool SocketReplicationStream::AwaitTicket(Ticket& ticket, absl::Time deadline) {
  // Any other thread just waits: the loops go on reading. An event loop
  // that waits (a synchronous write on a RESP loop) may be the one that
  // reads this stream, or one whose reads another waiting loop needs; it
  // reads for itself meanwhile.
  if (!net::WatchingThreadScope::Active()) return ReplicationStream::AwaitTicket(ticket, deadline);
  for (;;) {
    {
      absl::MutexLock lock(&watch_mu_);
      if (!lent_) break;  // the thread reads
    }
    if (ticket.done()) return true;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    // Short polls: the reply may also come through another reader, which
    // completes the ticket without waking this one.
    pollfd p{fd_, POLLIN, 0};
    const int ms = static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(left), 1, 5));
    if (poll(&p, 1, ms) > 0 && read_mu_.TryLock()) {
      const bool more = ReadReplies();
      read_mu_.Unlock();
      if (!more) return ticket.done();  // broken: every ticket is failed
    }
  }
  return ReplicationStream::AwaitTicket(ticket, deadline);
}

void SocketReplicationStream::MaybeLendSocket() {
  std::shared_ptr<net::FdWatcher> watcher;
  std::weak_ptr<SocketReplicationStream> self;
  {
    absl::MutexLock lock(&watch_mu_);
    if (lent_ || watcher_ == nullptr || self_.expired()) return;
    watcher = std::move(watcher_);  // lent once; a loop that gives it back keeps it
    self = self_;
    // Before Watch(): the loop may read at once, and the thread must not.
    lent_ = true;
  }
  if (!watcher->Watch(std::make_shared<ReplyWatch>(socket_, std::move(self)))) {
    absl::MutexLock lock(&watch_mu_);
    lent_ = false;
  }
}

void SocketReplicationStream::Unwatched() {
  {
    absl::MutexLock lock(&watch_mu_);
    lent_ = false;
  }
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
  {
    absl::MutexLock lock(&watch_mu_);
    connected_ = true;
  }
  Ready();
  Poll();
}

absl::Status SocketReplicationStream::Connect() {
  const absl::Time deadline = absl::Now() + options_.connect_timeout;
  absl::StatusOr<int> fd = ConnectTo(node().replication_address(), deadline, wake_fd_);
  if (!fd.ok()) return fd.status();
  socket_ = std::make_shared<OwnedSocket>(*fd);
  fd_ = *fd;
  v1::PeerSocketHello hello;
  hello.set_secret(options_.secret);
  hello.set_node_id(options_.self);
  hello.set_purpose(std::string(kReplicatePurpose));
  std::string out;
  AppendFrame(hello, &out);
  absl::Status s = SendAll(fd_, out, deadline, wake_fd_);
  v1::PeerSocketWelcome welcome;
  if (s.ok()) {
    absl::MutexLock lock(&read_mu_);  // uncontended: nobody reads before Ready()
    s = ReadFrame(fd_, reader_, &welcome, deadline, wake_fd_);
  }
  if (s.ok()) s = StatusFromBytes(welcome.status());
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("replication socket ", node().replication_address(),
                                               ": ", s.message()));
  }
  return absl::OkStatus();
}

SocketReplicationStream::SendResult SocketReplicationStream::SendPendingLocked() {
  if (out_ == nullptr) return SendResult::kDone;
  while (out_sent_ < out_->size()) {
    const ssize_t n =
        send(fd_, out_->data() + out_sent_, out_->size() - out_sent_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      out_sent_ += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return SendResult::kBlocked;
    } else {
      out_ = nullptr;
      return SendResult::kError;
    }
  }
  out_ = nullptr;  // the stream may reuse the buffer once told WriteDone()
  return SendResult::kDone;
}

void SocketReplicationStream::StartFrame(const std::string* frame) {
  // The frame was encoded write by write as they queued (BatchForm::kFrame):
  // it goes to the kernel from where it is.
  SendResult r;
  {
    absl::MutexLock lock(&out_mu_);
    out_ = frame;
    out_sent_ = 0;
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
    MaybeLendSocket();
    bool want_out;
    {
      absl::MutexLock lock(&out_mu_);
      want_out = out_blocked_;
    }
    bool read_here;
    {
      absl::MutexLock lock(&watch_mu_);
      read_here = !lent_;
    }
    // The socket only when there is something to do on it here: polled for
    // nothing, a hung-up socket would still wake this thread.
    pollfd p[2] = {
        {wake_fd_, POLLIN, 0},
        {fd_, static_cast<short>((read_here ? POLLIN : 0) | (want_out ? POLLOUT : 0)), 0}};
    if (poll(p, read_here || want_out ? 2 : 1, -1) < 0) {
      if (errno == EINTR) continue;
      Break(absl::UnavailableError(absl::StrCat("poll: ", strerror(errno))));
      return;
    }
    if ((p[0].revents & POLLIN) != 0) {
      uint64_t n;
      (void)!read(wake_fd_, &n, sizeof(n));
    }
    if (cancelled_) return;
    if ((p[1].revents & POLLOUT) != 0) {
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
    if (read_here && (p[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      absl::MutexLock lock(&read_mu_);
      if (!ReadReplies()) return;
    }
  }
}

bool SocketReplicationStream::ReadReplies() {
  const ssize_t n = reader_.Receive(fd_, MSG_DONTWAIT);
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
