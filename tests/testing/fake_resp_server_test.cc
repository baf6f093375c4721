// Copyright 2026 The kvstore Authors.
//
// The fake RESP server against a plain socket client: default replies,
// scripted ones, what it records, hang-ups and dropped connections.

#include "tests/testing/fake_resp_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/protocol/resp.h"
#include "common/testing/eventually.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace testing {
namespace {

using ::testing::ElementsAre;

int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  timeval tv{60, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

void Send(int fd, const std::vector<absl::string_view>& args) {
  std::string out;
  resp::AppendCommand(&out, args);
  ASSERT_EQ(send(fd, out.data(), out.size(), MSG_NOSIGNAL), static_cast<ssize_t>(out.size()));
}

// Reads `n` bytes, or fewer at EOF.
std::string ReadBytes(int fd, size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    const ssize_t r = recv(fd, out.data() + got, n - got, 0);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  out.resize(got);
  return out;
}

TEST(FakeRespServer, AnswersOkByDefaultAndRecordsEveryRequest) {
  FakeRespServer server;
  const int fd = Connect(server.port());
  Send(fd, {"SET", "k", std::string("v\0v", 3)});
  EXPECT_EQ(ReadBytes(fd, 5), "+OK\r\n");
  Send(fd, {"PING"});
  EXPECT_EQ(ReadBytes(fd, 5), "+OK\r\n");
  std::vector<FakeRespServer::Request> got = server.received();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_THAT(got[0].args, ElementsAre("SET", "k", std::string("v\0v", 3)));
  EXPECT_THAT(got[1].args, ElementsAre("PING"));
  EXPECT_EQ(got[0].connection, 0u);
  EXPECT_EQ(server.accepted(), 1);
  EXPECT_THAT(server.first_commands(), ElementsAre(std::string("SET k v\0v", 9)));
  close(fd);
}

TEST(FakeRespServer, HandlersScriptRepliesPerCommandAndConnection) {
  FakeRespServer server;
  server.On("get", [](const FakeRespServer::Request& r) {
    return r.connection == 0 ? FakeRespServer::Reply::Bulk("first")
                             : FakeRespServer::Reply::Error("MOVED 0 127.0.0.1:1");
  });
  server.OnAnyOther(
      [](const FakeRespServer::Request&) { return FakeRespServer::Reply::Nothing(); });
  const int a = Connect(server.port());
  Send(a, {"GET", "k"});
  EXPECT_EQ(ReadBytes(a, 11), "$5\r\nfirst\r\n");
  ASSERT_TRUE(Eventually([&] { return server.accepted() == 1; }));
  const int b = Connect(server.port());
  Send(b, {"DEL", "k"});  // no answer: the GET's reply comes next
  Send(b, {"GET", "k"});
  EXPECT_EQ(ReadBytes(b, 22), "-MOVED 0 127.0.0.1:1\r\n");
  close(a);
  close(b);
}

TEST(FakeRespServer, HangUpAndDropConnectionsEndTheClientsStream) {
  FakeRespServer server;
  server.On("QUIT", [](const FakeRespServer::Request&) { return FakeRespServer::Reply::HangUp(); });
  const int a = Connect(server.port());
  Send(a, {"QUIT"});
  EXPECT_EQ(ReadBytes(a, 1), "");  // EOF, no reply
  const int b = Connect(server.port());
  Send(b, {"PING"});
  EXPECT_EQ(ReadBytes(b, 5), "+OK\r\n");
  server.DropConnections();
  EXPECT_EQ(ReadBytes(b, 1), "");
  close(a);
  close(b);
}

}  // namespace
}  // namespace testing
}  // namespace kvstore
