// Copyright 2026 The kvstore Authors.
//
// TcpDataPath against a fake RESP server on loopback, with the test-only
// failpoints of tcp_failpoints.h to stop its threads at exact points.

#include "client/internal/tcp/tcp_data_path.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/internal/tcp/tcp_failpoints.h"
#include "common/protocol/limits.h"
#include "common/testing/eventually.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace client {
namespace {

using ::kvstore::testing::Eventually;

// A RESP server on 127.0.0.1 that answers "+OK" to every chunk of bytes
// containing a command (the test sends one small request at a time) and can
// drop the connections it holds, as a restarting server would.
class FakeRespServer {
 public:
  FakeRespServer() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(listen_fd_, 16) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "fake server cannot listen";
    }
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }
  ~FakeRespServer() {
    shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    DropConnections();
    for (std::thread& t : handlers_) t.join();
    close(listen_fd_);
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  int accepted() const { return accepted_.load(); }

  // Shuts down every connection accepted so far; the client sees its end of
  // the stream.
  void DropConnections() {
    absl::MutexLock lock(&mu_);
    for (int fd : fds_) shutdown(fd, SHUT_RDWR);
  }

 private:
  void AcceptLoop() {
    for (;;) {
      int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;  // shut down
      accepted_++;
      absl::MutexLock lock(&mu_);
      fds_.push_back(fd);
      handlers_.emplace_back([fd] {
        char buf[4096];
        for (;;) {
          ssize_t n = recv(fd, buf, sizeof(buf), 0);
          if (n <= 0) break;
          if (absl::StrContains(absl::string_view(buf, n), "SET")) {
            (void)!send(fd, "+OK\r\n", 5, MSG_NOSIGNAL);
          }
        }
        close(fd);
      });
    }
  }

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  absl::Mutex mu_;
  std::vector<int> fds_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> handlers_ ABSL_GUARDED_BY(mu_);
};

// The race: a sender finds its connection up, then, before it queues its
// reply waiter, the connection's reader fails and answers everything queued.
// The request must not be queued behind that reader (nothing would ever
// answer it: the caller would wait until its deadline, or forever without
// one); it goes out on a new connection instead.
TEST(TcpDataPathTest, RequestRacingTheReadersFailureIsSentOnANewConnection) {
  FakeRespServer server;
  auto path = TcpDataPath::Connect(server.address(), 1, Limits(), absl::Seconds(2));
  ASSERT_TRUE(path.ok()) << path.status();
  ASSERT_TRUE((*path)->Put("k", "v", absl::Now() + absl::Seconds(5)).ok());
  ASSERT_EQ(server.accepted(), 1);

  std::atomic<int> drains{0};
  tcp_failpoints::SetAfterDrainForTest([&drains] { drains++; });
  bool raced = false;
  tcp_failpoints::SetBeforeQueueForTest([&] {
    if (raced) return;
    raced = true;
    // Between the sender's check and its queueing: the server drops the
    // connection and the reader fails and drains its queue.
    server.DropConnections();
    EXPECT_TRUE(Eventually([&] { return drains.load() > 0; }));
  });

  const absl::Time start = absl::Now();
  // A request queued behind the dead reader would wait out this deadline.
  absl::Status s = (*path)->Put("k", "v2", absl::Now() + absl::Seconds(60));
  tcp_failpoints::SetBeforeQueueForTest(nullptr);
  tcp_failpoints::SetAfterDrainForTest(nullptr);

  ASSERT_TRUE(raced);
  ASSERT_EQ(drains.load(), 1) << "the reader never failed: the race did not happen";
  EXPECT_TRUE(s.ok()) << s << " after " << absl::Now() - start;
  EXPECT_EQ(server.accepted(), 2) << "the request should have gone out on a new connection";
}

}  // namespace
}  // namespace client
}  // namespace kvstore
