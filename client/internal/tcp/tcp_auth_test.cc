// Copyright 2026 The kvstore Authors.
//
// AUTH on the TCP data path, against a small fake RESP server on loopback
// that behaves as a password-protected Redis does: -NOAUTH before AUTH,
// -WRONGPASS for a wrong password, +OK otherwise. It records the first
// command of every connection, so the tests can check that the token is the
// first thing each (re)connection sends, and counts connections, so they can
// check that a refused token is not retried.

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
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/internal/tcp/tcp_data_path.h"
#include "common/protocol/limits.h"
#include "common/protocol/resp.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace client {
namespace {

constexpr char kToken[] = "fedcba9876543210-tcp-token";

class FakeRedis {
 public:
  // `password` empty: no AUTH needed. `mute`: never answer anything.
  explicit FakeRedis(std::string password, bool mute = false)
      : mute_(mute), password_(std::move(password)) {
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
  ~FakeRedis() {
    shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    DropConnections();
    // Joined outside mu_: the handlers take it.
    std::vector<std::thread> handlers;
    {
      absl::MutexLock lock(&mu_);
      handlers.swap(handlers_);
    }
    for (std::thread& t : handlers) t.join();
    close(listen_fd_);
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  int accepted() const { return accepted_.load(); }
  // The first command of each connection, arguments joined by spaces.
  std::vector<std::string> first_commands() {
    absl::MutexLock lock(&mu_);
    return first_;
  }
  void set_password(std::string p) {
    absl::MutexLock lock(&mu_);
    password_ = std::move(p);
  }
  // Shuts down every connection so far: the client sees the stream end.
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
      first_.emplace_back();
      const size_t index = first_.size() - 1;
      handlers_.emplace_back([this, fd, index] { Serve(fd, index); });
    }
  }

  // The reply to one complete command on a connection.
  std::string Answer(const std::vector<absl::string_view>& args, bool* authed) {
    std::string out;
    absl::MutexLock lock(&mu_);
    if (resp::CommandIs(args[0], "AUTH")) {
      if (password_.empty()) {
        resp::AppendError(&out, "ERR AUTH called without any password configured");
      } else if (args.size() == 2 && args[1] == password_) {
        *authed = true;
        resp::AppendOk(&out);
      } else {
        resp::AppendError(&out, "WRONGPASS invalid username-password pair or user is disabled.");
      }
    } else if (!password_.empty() && !*authed) {
      resp::AppendError(&out, "NOAUTH Authentication required.");
    } else if (resp::CommandIs(args[0], "GET")) {
      resp::AppendBulk(&out, "v");
    } else {
      resp::AppendOk(&out);
    }
    return out;
  }

  void Serve(int fd, size_t index) {
    std::string buf;
    bool authed = false;
    char chunk[4096];
    for (;;) {
      ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
      if (n <= 0) break;
      buf.append(chunk, static_cast<size_t>(n));
      for (;;) {
        resp::ParsedRequest r = resp::ParseRequest(buf, resp::RequestLimits());
        size_t total = r.consumed;
        if (r.kind == resp::ParsedRequest::Kind::kSetValue) total += r.value_len + 2;
        if (r.kind == resp::ParsedRequest::Kind::kNeedMore ||
            r.kind == resp::ParsedRequest::Kind::kError || buf.size() < total) {
          break;
        }
        {
          absl::MutexLock lock(&mu_);
          if (first_[index].empty()) {
            std::vector<std::string> words(r.args.begin(), r.args.end());
            first_[index] = absl::StrJoin(words, " ");
          }
        }
        const std::string reply = Answer(r.args, &authed);
        buf.erase(0, total);
        if (!mute_) (void)!send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
      }
    }
    close(fd);
  }

  const bool mute_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  absl::Mutex mu_;
  std::string password_ ABSL_GUARDED_BY(mu_);
  std::vector<int> fds_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> first_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> handlers_ ABSL_GUARDED_BY(mu_);
};

absl::Time Soon() { return absl::Now() + absl::Seconds(5); }

TEST(TcpAuthTest, AuthIsTheFirstCommandOfEveryConnectionAndReconnection) {
  FakeRedis server(kToken);
  auto path = TcpDataPath::Connect(server.address(), 2, Limits(), absl::Seconds(2), kToken);
  ASSERT_TRUE(path.ok()) << path.status();
  ASSERT_TRUE((*path)->Put("k", "v", Soon()).ok());
  ASSERT_TRUE((*path)->Get("k", Soon()).ok());
  ASSERT_EQ(server.accepted(), 2);
  // The server goes away and comes back: each reconnection authenticates.
  server.DropConnections();
  // A request may still go out on a connection the client has not yet seen
  // lost (kUnavailable); the next on that connection reconnects. Which of
  // the two connections a request takes is not fixed, so keep writing until
  // both have reconnected (bounded).
  int ok = 0;
  for (int i = 0; i < 40 && (ok < 2 || server.accepted() < 4); ++i) {
    absl::Status s = (*path)->Put("k", "v2", Soon());
    if (s.ok())
      ++ok;
    else
      EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  }
  EXPECT_GE(ok, 2);
  ASSERT_EQ(server.accepted(), 4);
  for (const std::string& first : server.first_commands()) {
    EXPECT_EQ(first, absl::StrCat("AUTH ", kToken));
  }
}

TEST(TcpAuthTest, NoTokenSendsNoAuth) {
  FakeRedis server("");
  auto path = TcpDataPath::Connect(server.address(), 1, Limits(), absl::Seconds(2));
  ASSERT_TRUE(path.ok()) << path.status();
  ASSERT_TRUE((*path)->Put("k", "v", Soon()).ok());
  ASSERT_EQ(server.first_commands().size(), 1u);
  EXPECT_EQ(server.first_commands()[0], "SET k");  // the parser holds back the value
}

TEST(TcpAuthTest, WrongTokenFailsTheConnectWithUnauthenticated) {
  FakeRedis server(kToken);
  auto path = TcpDataPath::Connect(server.address(), 2, Limits(), absl::Seconds(2),
                                   "not-the-right-token-at-all");
  ASSERT_FALSE(path.ok());
  EXPECT_EQ(path.status().code(), absl::StatusCode::kUnauthenticated) << path.status();
  EXPECT_TRUE(absl::StrContains(path.status().message(), "WRONGPASS")) << path.status();
  EXPECT_EQ(server.accepted(), 1) << "the second connection must not be tried";
}

TEST(TcpAuthTest, RefusedOnReconnectIsNotRetried) {
  FakeRedis server(kToken);
  auto path = TcpDataPath::Connect(server.address(), 1, Limits(), absl::Seconds(2), kToken);
  ASSERT_TRUE(path.ok()) << path.status();
  ASSERT_TRUE((*path)->Put("k", "v", Soon()).ok());
  // The server restarts with another password.
  server.set_password("another-password-entirely");
  server.DropConnections();
  const int before = server.accepted();
  int refused = 0;
  for (int i = 0; i < 20; ++i) {
    absl::Status s = (*path)->Put("k", "v", Soon());
    if (absl::IsUnauthenticated(s)) ++refused;
  }
  EXPECT_GE(refused, 19);
  EXPECT_EQ(server.accepted(), before + 1) << "one refused AUTH, then no more dialling";
}

TEST(TcpAuthTest, ClientWithoutTokenGetsNoAuthAsUnauthenticated) {
  FakeRedis server(kToken);
  auto path = TcpDataPath::Connect(server.address(), 1, Limits(), absl::Seconds(2));
  ASSERT_TRUE(path.ok()) << path.status();
  absl::Status s = (*path)->Put("k", "v", Soon());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
}

TEST(TcpAuthTest, SilentServerTimesOutTheAuth) {
  FakeRedis server(kToken, /*mute=*/true);
  const absl::Time start = absl::Now();
  auto path = TcpDataPath::Connect(server.address(), 1, Limits(), absl::Milliseconds(300), kToken);
  ASSERT_FALSE(path.ok());
  EXPECT_EQ(path.status().code(), absl::StatusCode::kDeadlineExceeded) << path.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

}  // namespace
}  // namespace client
}  // namespace kvstore
