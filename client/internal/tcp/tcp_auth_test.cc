// Copyright 2026 The kvstore Authors.
//
// AUTH on the TCP data path, against the shared fake RESP server on loopback
// scripted to behave as a password-protected Redis does: -NOAUTH before AUTH,
// -WRONGPASS for a wrong password, +OK otherwise. It records the first
// command of every connection, so the tests can check that the token is the
// first thing each (re)connection sends, and counts connections, so they can
// check that a refused token is not retried.

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/internal/tcp/tcp_data_path.h"
#include "common/protocol/limits.h"
#include "common/protocol/resp.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_resp_server.h"

namespace kvstore {
namespace client {
namespace {

using ::kvstore::testing::FakeRespServer;

constexpr char kToken[] = "fedcba9876543210-tcp-token";

// A password-protected Redis as far as AUTH goes, on the shared fake RESP
// server: every command but AUTH needs a successful AUTH on its connection
// first; GET answers "v", everything else +OK. `mute`: answers nothing.
class FakeRedis {
 public:
  explicit FakeRedis(std::string password, bool mute = false) : password_(std::move(password)) {
    server_.OnAnyOther([this, mute](const FakeRespServer::Request& r) {
      return mute ? FakeRespServer::Reply::Nothing() : Answer(r);
    });
  }

  std::string address() const { return server_.address(); }
  int accepted() const { return server_.accepted(); }
  std::vector<std::string> first_commands() const { return server_.first_commands(); }
  void set_password(std::string p) {
    absl::MutexLock lock(&mu_);
    password_ = std::move(p);
  }
  void DropConnections() { server_.DropConnections(); }

 private:
  FakeRespServer::Reply Answer(const FakeRespServer::Request& r) {
    using Reply = FakeRespServer::Reply;
    absl::MutexLock lock(&mu_);
    if (resp::CommandIs(r.args[0], "AUTH")) {
      if (password_.empty()) return Reply::Error("ERR AUTH called without any password configured");
      if (r.args.size() == 2 && r.args[1] == password_) {
        authed_.insert(r.connection);
        return Reply::Ok();
      }
      return Reply::Error("WRONGPASS invalid username-password pair or user is disabled.");
    }
    if (!password_.empty() && !authed_.contains(r.connection)) {
      return Reply::Error("NOAUTH Authentication required.");
    }
    return resp::CommandIs(r.args[0], "GET") ? Reply::Bulk("v") : Reply::Ok();
  }

  absl::Mutex mu_;
  std::string password_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<size_t> authed_ ABSL_GUARDED_BY(mu_);  // connections
  FakeRespServer server_;  // last: stopped before the state above goes
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
  EXPECT_EQ(server.first_commands()[0], "SET k v");
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
  // The answer is the deadline's: a client that waited for a reply instead
  // would hang here.
  auto path = TcpDataPath::Connect(server.address(), 1, Limits(), absl::Milliseconds(300), kToken);
  ASSERT_FALSE(path.ok());
  EXPECT_EQ(path.status().code(), absl::StatusCode::kDeadlineExceeded) << path.status();
}

}  // namespace
}  // namespace client
}  // namespace kvstore
